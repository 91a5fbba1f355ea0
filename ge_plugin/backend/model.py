"""``TritonPythonModel`` of the ``ge`` backend: serves an Ascend OM model for any config with ``backend: "ge"``.

Installed as ``<backend-dir>/ge/model.py`` (``ge-plugin install-backend``). It stays thin: parse the config
once, hand each batch of requests to the engine, map outcomes to responses, and per request do no more than
the least a Python backend does (the bench's floor: ``as_numpy()`` in, ``Tensor`` and ``InferenceResponse``
out). Request tensors are read with ``as_numpy()``: the stub copied each input out of shared memory when it
loaded the request, and ``as_numpy()`` hands that array over, where a DLPack view would make a capsule and a
second array per input on top. A model with one output does not ask for each request's output names (there is
only one to ask for). TYPE_BF16 tensors cross only as DLPack in Triton 2.51 (``as_numpy()`` refuses them,
numpy cannot read them): the fast path views their words as uint16 (``bf16_view``) and hands bf16 outputs back
as DLPack capsules over the same memory (``bf16_capsule``), so a bf16 model is served without a conversion or
a copy of its own. ``GE_PLUGIN_STUB_TIMING`` (``timing``) times reading, the engine and responding, per
execute, when set at initialize; unset, nothing is timed.
Bad input fails only its own request (INVALID_ARG, naming the input); a device failure fails the requests
of the execute it hit (INTERNAL) and the engine rebuilds what broke, so the instance stays usable.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import triton_python_backend_utils as pb_utils

from ge_plugin import __version__, device, fastpath
from ge_plugin.backend import timing
from ge_plugin.backend.generate import GenerateModel, is_generating
from ge_plugin.backend.metrics import MetricsPublisher
from ge_plugin.engine import Engine, Lifetime, Mode
from ge_plugin.engine.lane import Outcome
from ge_plugin.errors import GePluginError, RequestError, UnavailableError

log = logging.getLogger("ge_plugin.backend")

#: A one-lane instance whose executes keep the device this long (µs) or longer, on a running average, answers
#: from the engine's completion thread, as a two-lane one does. Returning the responses from ``execute`` lets the
#: client have its answer a moment before Triton 2.51 counts the instance free again; a request sent in that
#: moment finds no free instance, and the dynamic batcher then waits for its 500 ms poll. On a busy host that
#: moment is long enough to hit often (perf_analyzer at concurrency 1 against the LLaMA on the seed's device
#: time: p90 from 85 to 583 ms; tests/e2e/test_one_lane.py). Answering from the completion thread lets
#: ``execute`` return before the answer exists, which costs a thread hand-over (about 0.2 ms per execute on
#: the bench's host, so not for executes of microseconds, which are over before any client could ask again).
ANSWER_LATER_US = 2_000.0
#: the weight of one execute's stream time in that running average: one stall of a quick model's
#: execute (a preempted host thread) moves it by an eighth, and the instance keeps returning its responses
RECENT_WEIGHT = 0.125


class _TritonLog(logging.Handler):
    """ge_plugin's warnings and errors (a lane rebuilt, a precision the config did not declare) in Triton's
    log, where an operator looks. Each record is one IPC to the server: only the unusual reaches here."""

    def emit(self, record: logging.LogRecord) -> None:
        message = f"ge: {self.format(record)}"
        if record.levelno >= logging.ERROR:
            pb_utils.Logger.log_error(message)
        else:
            pb_utils.Logger.log_warn(message)


def _log_to_triton() -> None:
    root = logging.getLogger("ge_plugin")
    if not any(isinstance(h, _TritonLog) for h in root.handlers):
        handler = _TritonLog(logging.WARNING)
        root.addHandler(handler)
        root.propagate = False


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        _log_to_triton()
        config = json.loads(args["model_config"])
        if is_generating(config):  # a generate: model: the decoupled adapter answers it (backend/generate.py)
            try:
                self.generating = GenerateModel(pb_utils, args, config)
            except GePluginError as exc:
                raise pb_utils.TritonModelException(f"model {config.get('name', '')!r}: {exc}") from None
            self.execute = self.generating.execute  # type: ignore[method-assign,assignment]
            self.finalize = self.generating.finalize  # type: ignore[method-assign]
            return
        self.name = args.get("model_name", config.get("name", ""))
        version_dir = os.path.join(args["model_repository"], args.get("model_version", "1"))
        try:
            self.engine = Engine.from_model_config(
                config, version_dir=version_dir, instance_name=args.get("model_instance_name", "")
            )
        except GePluginError as exc:
            raise pb_utils.TritonModelException(self._naming_the_model(str(exc))) from None
        self.input_names = frozenset(self.engine.input_names)
        serving = self.engine.config
        #: the TYPE_BF16 tensors, which cross as DLPack only (empty for most models: no cost per request)
        self.bf16_inputs = frozenset(io.name for io in serving.inputs if io.dtype.short == "bf16")
        self.bf16_outputs = frozenset(io.name for io in serving.outputs if io.dtype.short == "bf16")
        #: with one output every request asks for it: its requested names are not worth reading
        self.one_output = len(serving.outputs) == 1
        #: the one input's name (Triton checks each request's input names against the config before execute,
        #: so a request of a one-input model holds exactly that tensor), or None
        self.only_input = (
            serving.inputs[0].name if len(serving.inputs) == 1 and not self.bf16_inputs else None
        )
        self.only_output = serving.outputs[0].name if self.one_output and not self.bf16_outputs else None
        labels = {
            "model": self.name,
            "version": str(args.get("model_version", "1")),
            "instance": args.get("model_instance_name", ""),
            "device": str(self.engine.device_id),
        }
        self.metrics = MetricsPublisher(
            pb_utils,
            self.engine.stats,
            labels,
            self.engine.config.params.metrics_interval_ms,
            device_memory=self.engine.device_memory,
            info={
                "fastpath": fastpath.IMPLEMENTATION,
                "device_kind": device.kind(),
                "ge_plugin": __version__,
            },
        )
        if fastpath.FALLBACK_REASON:
            pb_utils.Logger.log_warn(f"ge: {self.name}: the fast path is the {fastpath.describe()}")
        pb_utils.Logger.log_info(
            f"ge: {self.name} instance {labels['instance']} on device {self.engine.device_id} "
            f"({device.kind()}), gears {', '.join(g.label for g in self.engine.gears.gears)}, "
            f"{self.engine.stats.device_bytes} device bytes allocated once, fast path {fastpath.describe()}"
        )
        #: two lanes or more: always answer from the engine's completion thread (one lane: ``_answer_later``)
        self.pipelined = self.engine.mode is Mode.PIPELINED
        #: the running average of stream µs per execute, and (executes, stream µs) as last read
        self.recent_us = 0.0
        self._seen = (0, 0.0)
        self.timer = timing.from_environment(self.name, labels["instance"])
        if self.timer is not None:  # the stub calls the instance's execute: the timed one, from now on
            self.execute = self._timed_execute  # type: ignore[method-assign]

    def _naming_the_model(self, message: str) -> str:
        """The message with the model's name in front, once: most engine errors already start with it."""
        prefix = f"model {self.name!r}"
        return message if message.startswith(prefix) else f"{prefix}: {message}"

    def execute(self, requests: list[Any]) -> list[Any] | None:
        """With one lane and quick executes: run the batch and return its responses. With more lanes
        (``streams_per_instance``), or one whose executes take a device's time (``ANSWER_LATER_US``), return
        as soon as the batch is on the device and send each response when it is done, so that Triton calls
        ``execute`` again with the next batch meanwhile."""
        batch, requested = self._read(requests)
        outcomes = self._run(requests, batch, requested)
        return None if outcomes is None else self._respond(outcomes)

    def _timed_execute(self, requests: list[Any]) -> list[Any] | None:
        """``execute`` with each phase timed (GE_PLUGIN_STUB_TIMING)."""
        clock, timer, stats = timing.clock, self.timer, self.engine.stats
        started = timing.wall()
        t0 = clock()
        batch, requested = self._read(requests)
        t1 = clock()
        stream_before = stats.execute_us_sum
        outcomes = self._run(requests, batch, requested)
        t2 = clock()
        if outcomes is None:  # submitted: the completion thread waits for the stream and answers
            assert timer is not None
            timer.record(started, len(requests), t1 - t0, t2 - t1, float("nan"), float("nan"))
            return None
        stream = stats.execute_us_sum - stream_before
        responses = self._respond(outcomes)
        t3 = clock()
        assert timer is not None
        timer.record(started, len(requests), t1 - t0, t2 - t1, t3 - t2, stream)
        return responses

    def _read(self, requests: list[Any]) -> tuple[list[dict[str, Any]], list[list[str]] | None]:
        """Each request's tensors by name, and the output names each asks for (None: all, one output)."""
        only = self.only_input
        if only is not None:
            batch = [{only: request.inputs()[0].as_numpy()} for request in requests]
            return batch, None if self.one_output else [r.requested_output_names() for r in requests]
        batch = []
        bf16 = self.bf16_inputs
        for request in requests:
            tensors = {}
            for tensor in request.inputs():
                name = tensor.name()
                tensors[name] = _bf16_words(tensor) if bf16 and name in bf16 else tensor.as_numpy()
            batch.append(tensors)
        requested = None if self.one_output else [request.requested_output_names() for request in requests]
        return batch, requested

    def _run(
        self, requests: list[Any], batch: list[dict[str, Any]], requested: list[list[str]] | None
    ) -> list[Outcome] | None:
        """The engine's outcomes, or None when they are sent later from the completion thread."""
        if self.pipelined or self._answer_later():
            senders = [request.get_response_sender() for request in requests]
            bf16_out = self.bf16_outputs

            def send(index: int, outcome: Outcome) -> None:
                senders[index].send(
                    _response(outcome, bf16_out), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                )

            self.engine.submit(batch, requested, send)
            return None
        # Views of the engine's staging: the stub copies returned responses before the next execute.
        return self.engine.execute(batch, requested, lifetime=Lifetime.UNTIL_NEXT_CALL)

    def _answer_later(self) -> bool:
        """Whether a one-lane instance answers this batch from the completion thread: while its executes keep
        the device ANSWER_LATER_US or longer on a running average, taken on here over the executes finished
        since the last call (by this thread or the completion thread)."""
        stats = self.engine.stats
        count, spent = sum(stats.execute_buckets), stats.execute_us_sum
        seen_count, seen_spent = self._seen
        if count > seen_count:
            per_execute = (spent - seen_spent) / (count - seen_count)
            self.recent_us += (per_execute - self.recent_us) * RECENT_WEIGHT
            self._seen = (count, spent)
        return self.recent_us >= ANSWER_LATER_US

    def _respond(self, outcomes: list[Outcome]) -> list[Any]:
        if self.bf16_outputs:
            return [_response(outcome, self.bf16_outputs) for outcome in outcomes]
        response, tensor = pb_utils.InferenceResponse, pb_utils.Tensor
        only = self.only_output
        if only is not None:
            return [
                response([tensor(only, outcome[only])]) if type(outcome) is dict else _response(outcome)
                for outcome in outcomes
            ]
        return [
            response([tensor(name, array) for name, array in outcome.items()])
            if type(outcome) is dict
            else _response(outcome)
            for outcome in outcomes
        ]

    def finalize(self) -> None:
        timer = getattr(self, "timer", None)
        if timer is not None:
            timer.write()
        metrics = getattr(self, "metrics", None)
        if metrics is not None:
            metrics.close()
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.close()
            device.finalize()


def _bf16_words(tensor: Any) -> object:
    """A TYPE_BF16 input's words (uint16), viewed through DLPack; what cannot be viewed is passed on as it is,
    for request validation to refuse with the reason (this request alone)."""
    try:
        return fastpath.bf16_view(tensor)
    except ValueError:
        return tensor


def _response(outcome: Outcome, bf16: frozenset[str] = frozenset()) -> Any:
    """Outputs, or the error with the code a client can act on: 400 bad input, 503 retry later, 500. A bf16
    output (its words, uint16) goes back as a DLPack capsule, the only way Triton 2.51 takes TYPE_BF16."""
    if isinstance(outcome, GePluginError):
        if isinstance(outcome, RequestError):
            code = pb_utils.TritonError.INVALID_ARG
        elif isinstance(outcome, UnavailableError):
            code = pb_utils.TritonError.UNAVAILABLE
        else:
            code = pb_utils.TritonError.INTERNAL
        return pb_utils.InferenceResponse(error=pb_utils.TritonError(str(outcome), code))
    if bf16:
        return pb_utils.InferenceResponse(
            output_tensors=[
                pb_utils.Tensor.from_dlpack(name, fastpath.bf16_capsule(array))
                if name in bf16
                else pb_utils.Tensor(name, array)
                for name, array in outcome.items()
            ]
        )
    return pb_utils.InferenceResponse(
        output_tensors=[pb_utils.Tensor(name, array) for name, array in outcome.items()]
    )
