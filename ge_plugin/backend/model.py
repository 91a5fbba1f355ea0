"""``TritonPythonModel`` of the ``ge`` backend: serves an Ascend OM model for any config with ``backend: "ge"``.

Installed as ``<backend-dir>/ge/model.py`` (``ge-plugin install-backend``). It stays thin: parse the config
once, hand each batch of requests to the engine (which says whether it answers them at once or from its
completion thread: ``Engine.answers_later``), map answers to responses, and per request do no more than the
least a Python backend does (the bench's floor: ``as_numpy()`` in, ``Tensor`` and ``InferenceResponse`` out).
A request whose client left before its batch ran is answered CANCELLED (``departures``). Request tensors are
read with ``as_numpy()``: the stub copied each input out of shared memory when it loaded the request, and
``as_numpy()`` hands that array over, where a DLPack view would make a capsule and a second array per input on
top. A model with one output does not ask for each request's output names (there is only one to ask for).
TYPE_BF16 tensors cross only as DLPack in Triton 2.51 (``as_numpy()`` refuses them, numpy cannot read them):
the fast path views their words as uint16 (``bf16_view``) and hands bf16 outputs back as DLPack capsules over
the same memory (``bf16_capsule``), so a bf16 model is served without a conversion or a copy of its own.
``GE_PLUGIN_STUB_TIMING`` (``timing``) times reading, the engine and responding, per execute, when set at
initialize; unset, nothing is timed.
Bad input fails only its own request (INVALID_ARG, naming the input); a device failure fails the requests
of the execute it hit (INTERNAL) and the engine rebuilds what broke, so the instance stays usable.
"""

from __future__ import annotations

import json
import os
from typing import Any

import triton_python_backend_utils as pb_utils

from ge_plugin import __version__, device, fastpath
from ge_plugin.backend import timing
from ge_plugin.backend.departures import Departures
from ge_plugin.backend.generate import GenerateModel, is_generating
from ge_plugin.backend.metrics import MetricsPublisher, instance_labels
from ge_plugin.backend.triton_log import log_to_triton
from ge_plugin.engine import Answer, Engine, Lifetime
from ge_plugin.errors import GePluginError, RequestError, UnavailableError


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        log_to_triton(pb_utils.Logger)
        config = json.loads(args["model_config"])
        if is_generating(config):  # a generate: model: the decoupled adapter answers it (backend/generate.py)
            try:
                self.generating = GenerateModel(pb_utils, args, config)
            except GePluginError as exc:
                raise pb_utils.TritonModelException(f"model {config.get('name', '')!r}: {exc}") from None
            self.execute = self.generating.execute  # type: ignore[method-assign]
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
        labels = instance_labels(
            self.name,
            str(args.get("model_version", "1")),
            args.get("model_instance_name", ""),
            self.engine.device_id,
        )
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
        #: the engine says whether each batch is answered from its completion thread
        self.answers_later = self.engine.answers_later
        #: requests whose client left before their batch ran are answered CANCELLED, not run
        self.departures = Departures(pb_utils, self.engine.stats)
        self.timer = timing.from_environment(self.name, labels["instance"])

    def _naming_the_model(self, message: str) -> str:
        """The message with the model's name in front, once: most engine errors already start with it."""
        prefix = f"model {self.name!r}"
        return message if message.startswith(prefix) else f"{prefix}: {message}"

    def execute(self, requests: list[Any]) -> list[Any] | None:
        """Run the batch and return its responses, or, when the engine answers later (more lanes, or one
        whose executes take a device's time), return None as soon as the batch is on the device and send
        each response when it is done, so that Triton calls ``execute`` again with the next batch meanwhile."""
        departures = self.departures
        if departures.worth_checking(len(requests)):
            gone = departures.gone(requests)
            if any(gone):
                return departures.serve_without(requests, gone, self._serve)
        if self.timer is not None:
            return self.timer.phases(requests, self._read, self._run, self._respond, self._stream_us)
        return self._serve(requests)

    def _serve(self, requests: list[Any]) -> list[Any] | None:
        outcomes = self._run(requests, self._read(requests))
        return None if outcomes is None else self._respond(outcomes)

    def _stream_us(self) -> float:
        return self.engine.stats.execute_us_sum

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
        self, requests: list[Any], tensors: tuple[list[dict[str, Any]], list[list[str]] | None]
    ) -> list[Answer] | None:
        """The engine's outcomes, or None when they are sent later from the completion thread."""
        batch, requested = tensors
        if self.answers_later():
            senders = [request.get_response_sender() for request in requests]
            bf16_out = self.bf16_outputs

            def send(index: int, outcome: Answer) -> None:
                senders[index].send(
                    _response(outcome, bf16_out), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                )

            self.engine.submit(batch, requested, send)
            return None
        # Views of the engine's staging: the stub copies returned responses before the next execute.
        return self.engine.execute(batch, requested, lifetime=Lifetime.UNTIL_NEXT_CALL)

    def _respond(self, outcomes: list[Answer]) -> list[Any]:
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


def _response(outcome: Answer, bf16: frozenset[str] = frozenset()) -> Any:
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
