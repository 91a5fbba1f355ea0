"""The ``ge`` backend's decoupled adapter for generating models (a config with the ``generate`` parameter).

Triton hands ``execute`` a list of requests; each is read (Contract B's tensors, generate_io), queued on the
generation loop and answered later through its response sender: a response every ``tokens_per_response``
tokens when the request asked to ``stream``, else one response with every token; the last one carries the
finish reason and TRITONSERVER_RESPONSE_COMPLETE_FINAL. ``execute`` returns None at once, so Triton keeps
handing over new requests while others generate: they join at the loop's next step.

Three threads besides Triton's: the loop (device work and sampling), a sender (each ``send`` is an IPC to
the server, kept off the loop so a step never waits for one) and a watcher that asks every
``CANCEL_POLL_S`` whether a request was cancelled (a client gone, a gRPC stream cancelled) and tells the
loop, which frees the slot at its next step. Metrics are published from their own timer (metrics below).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ge_plugin import device, generate_io
from ge_plugin.engine import device_for_instance
from ge_plugin.errors import RequestError, UnavailableError
from ge_plugin.generate import GenerateConfig, Generator, SamplingParams, Sequence
from ge_plugin.generate.loop import GenerationLoop
from ge_plugin.params import ModelParams

log = logging.getLogger("ge_plugin.backend")

#: how often the watcher asks Triton whether each live request was cancelled (one IPC per request)
CANCEL_POLL_S = 0.05
OUTPUT_IDS, FINISH_REASON, PROMPT_TOKENS, COMPLETION_TOKENS = (name for name, _, _ in generate_io.OUTPUTS)
#: stop ids one request may list
MAX_STOP_IDS = 1024


class _Live:
    """One request being answered: its sender, what it asked for, and the tokens not sent yet."""

    __slots__ = ("completion", "pending", "prompt_tokens", "request", "sender", "sequence", "stream")

    def __init__(self, request: Any, prompt_tokens: int, stream: bool):
        self.request = request
        self.sender = request.get_response_sender()
        self.prompt_tokens = prompt_tokens
        self.stream = stream
        self.pending: list[int] = []
        self.completion = 0
        self.sequence: Sequence | None = None


class GenerateModel:
    """What ``TritonPythonModel`` delegates to for a generating model."""

    def __init__(self, pb_utils: Any, args: dict[str, str], config: dict[str, Any]):
        self.pb = pb_utils
        self.name = args.get("model_name", config.get("name", ""))
        params = ModelParams.from_parameters(config.get("parameters", {}))
        self.config = GenerateConfig.from_json(params.generate)
        version = str(args.get("model_version", "1"))
        om_path = os.path.join(args["model_repository"], version, params.om_model_path_for(version))
        instance = args.get("model_instance_name", "")
        self.device_id = device_for_instance(instance, params.device_ids)
        self.generator = Generator(om_path, self.config, device_id=self.device_id, acl_json=params.acl_json)
        _check_tokenizer(
            config.get("parameters", {}), args["model_repository"], self.generator.layout.vocab, self.name
        )
        self.loop = GenerationLoop(self.generator)
        self._live: dict[int, _Live] = {}
        self._live_lock = threading.Lock()
        self._outbox: queue.SimpleQueue[tuple[_Live, list[int], str] | None] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._sender = threading.Thread(target=self._send_loop, name="ge-generate-send", daemon=True)
        self._sender.start()
        self._watcher = threading.Thread(target=self._watch, name="ge-generate-cancel", daemon=True)
        self._watcher.start()
        from ge_plugin.backend.generate_metrics import GenerateMetrics
        from ge_plugin.backend.metrics import instance_labels

        labels = instance_labels(self.name, version, instance, self.device_id)
        self.metrics = GenerateMetrics(
            pb_utils, self.generator.stats, labels, params.metrics_interval_ms, self.generator.layout
        )
        layout = self.generator.layout
        pb_utils.Logger.log_info(
            f"ge: {self.name} generates on device {self.device_id} ({device.kind()}): {layout.slots} slots x "
            f"{layout.context} tokens, KV cache {self.generator.cache.nbytes} device bytes allocated once"
        )

    # ---- Triton's thread ----

    def execute(self, requests: list[Any]) -> None:
        for request in requests:
            self._start(request)
        return None

    def _start(self, request: Any) -> None:
        try:
            ids, params, stream = self._read(request)
            live = _Live(request, int(ids.size), stream)
        except RequestError as exc:
            self._fail(request.get_response_sender(), str(exc), self.pb.TritonError.INVALID_ARG)
            return
        with self._live_lock:
            try:
                live.sequence = self.loop.submit(
                    ids, params, lambda s, new, finish: self._outbox.put((live, new, finish))
                )
            except RequestError as exc:
                self._fail(live.sender, str(exc), self.pb.TritonError.INVALID_ARG)
                return
            except UnavailableError as exc:
                self._fail(live.sender, str(exc), self.pb.TritonError.UNAVAILABLE)
                return
            self._live[id(live)] = live

    def _read(self, request: Any) -> tuple[NDArray[Any], SamplingParams, bool]:
        """Contract B's inputs; RequestError naming the input that is wrong."""
        pb = self.pb
        tensor = pb.get_input_tensor_by_name(request, "input_ids")
        if tensor is None:
            raise RequestError("input_ids is required")
        ids = tensor.as_numpy()
        if ids.ndim != 1:
            raise RequestError(f"input_ids must be one list of ids, got shape {list(ids.shape)}")

        def one(name: str) -> Any:
            given = pb.get_input_tensor_by_name(request, name)
            if given is None:
                return None
            value = given.as_numpy()
            if value.size != 1:
                raise RequestError(f"{name} takes one value, got {value.size}")
            return value.reshape(-1)[0]

        stop = pb.get_input_tensor_by_name(request, "stop_ids")
        stop_ids: tuple[int, ...] = ()
        if stop is not None:
            values = stop.as_numpy().reshape(-1)
            if values.size > MAX_STOP_IDS:
                raise RequestError(f"stop_ids lists {values.size} ids; at most {MAX_STOP_IDS}")
            stop_ids = tuple(int(v) for v in values)
        max_tokens, temperature, top_k, top_p = (
            one("max_tokens"),
            one("temperature"),
            one("top_k"),
            one("top_p"),
        )
        seed, ignore_eos, stream = one("seed"), one("ignore_eos"), one("stream")
        params = SamplingParams(
            max_tokens=self.config.max_tokens if max_tokens is None else int(max_tokens),
            temperature=0.0 if temperature is None else float(temperature),
            top_k=0 if top_k is None else int(top_k),
            top_p=1.0 if top_p is None else float(top_p),
            seed=None if seed is None else int(seed),
            ignore_eos=bool(ignore_eos) if ignore_eos is not None else False,
            stop_ids=stop_ids,
        )
        return ids, params, bool(stream) if stream is not None else False

    def _fail(self, sender: Any, message: str, code: Any) -> None:
        pb = self.pb
        error = pb.TritonError(f"model {self.name!r}: {message}", code)
        sender.send(pb.InferenceResponse(error=error), flags=pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    # ---- the sender thread ----

    def _send_loop(self) -> None:
        while True:
            item = self._outbox.get()
            if item is None:
                return
            live, new, finish = item
            try:
                self._deliver(live, new, finish)
            except Exception as exc:  # a sender that broke (the server is going away): drop this request
                log.warning("%s: a response could not be sent: %s", self.name, exc)
                self._forget(live)
            del item, live  # not kept alive by this frame while it waits for the next one

    def _forget(self, live: _Live) -> None:
        """Let go of an answered request. Its sequence's listener holds ``live`` and ``live`` held the
        sequence: a cycle that only a garbage collection would free, maybe not before the stub's
        interpreter finalizes, when destroying the request's objects in the by-then unmapped shared memory
        kills the stub (SIGSEGV at every stop of a server that had generated)."""
        with self._live_lock:
            self._live.pop(id(live), None)
        live.sequence = None

    def _deliver(self, live: _Live, new: list[int], finish: str) -> None:
        live.pending.extend(new)
        live.completion += len(new)
        pb = self.pb
        if not finish:
            if live.stream and len(live.pending) >= self.config.tokens_per_response:
                live.sender.send(self._response(live, ""))
            return
        error = live.sequence.error if live.sequence is not None else None
        self._forget(live)
        if finish == "error":
            self._fail(live.sender, error or "the generation step failed", pb.TritonError.INTERNAL)
            return
        live.sender.send(self._response(live, finish), flags=pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def _response(self, live: _Live, finish: str) -> Any:
        pb = self.pb
        ids, live.pending = live.pending, []
        return pb.InferenceResponse(
            [
                pb.Tensor(OUTPUT_IDS, np.asarray(ids, dtype=np.int64)),
                pb.Tensor(FINISH_REASON, np.array([finish.encode()], dtype=np.object_)),
                pb.Tensor(PROMPT_TOKENS, np.array([live.prompt_tokens], dtype=np.int32)),
                pb.Tensor(COMPLETION_TOKENS, np.array([live.completion], dtype=np.int32)),
            ]
        )

    # ---- the cancellation watcher ----

    def _watch(self) -> None:
        while not self._stop.wait(CANCEL_POLL_S):
            with self._live_lock:
                live = list(self._live.values())
            for item in live:
                sequence = item.sequence
                if sequence is not None and not sequence.cancelled and item.request.is_cancelled():
                    self.loop.cancel(sequence)

    def finalize(self) -> None:
        """Every sequence ends ("cancelled", with its final response), then the threads, metrics, device."""
        try:
            self.loop.close()
        finally:
            self._stop.set()
            self._outbox.put(None)
            self._sender.join()
            self._watcher.join()
            self.metrics.close()
            self.generator.close()
            device.finalize()


def _check_tokenizer(parameters: dict[str, Any], model_dir: str, vocab: int, name: str) -> None:
    """A tokenizer the config names must make only ids the OM's logits have (text.files): else the load fails
    here, naming both sizes, rather than a text request later."""
    from pathlib import Path

    from ge_plugin.text.files import tokenizer_paths

    plain = {
        key: v.get("string_value", "") if isinstance(v, dict) else str(v) for key, v in parameters.items()
    }
    paths = tokenizer_paths(plain, Path(model_dir))
    if paths is not None:
        from ge_plugin.text.tokenizer import Tokenizer

        Tokenizer.from_files(*paths).check_vocab(vocab, name)


def is_generating(config: dict[str, Any]) -> bool:
    """Whether a model config (the JSON Triton hands to initialize) is for this adapter."""
    parameters = config.get("parameters", {}) or {}
    value = parameters.get("generate")
    if isinstance(value, dict):
        value = value.get("string_value", "")
    return bool(value)
