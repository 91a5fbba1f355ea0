"""``TritonPythonModel`` of the ``ge`` backend: serves an Ascend OM model for any config with ``backend: "ge"``.

Installed as ``<backend-dir>/ge/model.py`` (``ge-plugin install-backend``). It stays thin: parse the config
once, hand each batch of requests to the engine, map outcomes to responses. Request tensors are read as
zero-copy DLPack views of Triton's shared memory (``as_numpy()`` would copy every input once more).
Bad input fails only its own request (INVALID_ARG, naming the input); a device failure fails the requests
of the execute it hit (INTERNAL) and the engine rebuilds what broke, so the instance stays usable.
"""

from __future__ import annotations

import json
import logging
import os

import numpy as np
import triton_python_backend_utils as pb_utils

from ge_plugin import __version__, device, fastpath
from ge_plugin.backend.metrics import MetricsPublisher
from ge_plugin.engine import Engine
from ge_plugin.errors import GePluginError, RequestError, UnavailableError

log = logging.getLogger("ge_plugin.backend")


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
    def initialize(self, args: dict) -> None:
        _log_to_triton()
        config = json.loads(args["model_config"])
        self.name = args.get("model_name", config.get("name", ""))
        version_dir = os.path.join(args["model_repository"], args.get("model_version", "1"))
        for io in (*config.get("input", []), *config.get("output", [])):
            if io.get("data_type") == "TYPE_BF16":
                raise pb_utils.TritonModelException(
                    f"model {self.name!r}: {io['name']} is TYPE_BF16, which Triton 2.51's Python backend cannot "
                    "pass as numpy; declare it TYPE_FP32 and ge-plugin converts to the OM's bf16 on the way"
                )
        try:
            self.engine = Engine.from_model_config(
                config, version_dir=version_dir, instance_name=args.get("model_instance_name", "")
            )
        except GePluginError as exc:
            raise pb_utils.TritonModelException(self._naming_the_model(str(exc))) from None
        self.input_names = frozenset(self.engine.input_names)
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

    def _naming_the_model(self, message: str) -> str:
        """The message with the model's name in front, once: most engine errors already start with it."""
        prefix = f"model {self.name!r}"
        return message if message.startswith(prefix) else f"{prefix}: {message}"

    def execute(self, requests: list) -> list | None:
        """With one lane: run the batch and return its responses. With more (``streams_per_instance``),
        return as soon as the batch is on the device and send each response when it is done, so that
        Triton calls ``execute`` again with the next batch meanwhile."""
        batch = []
        requested = []
        for request in requests:
            tensors = {}
            for tensor in request.inputs():
                try:
                    tensors[tensor.name()] = np.from_dlpack(tensor)
                except (BufferError, TypeError, RuntimeError):
                    tensors[tensor.name()] = tensor.as_numpy()
            batch.append(tensors)
            requested.append(request.requested_output_names())
        if len(self.engine.lanes) > 1:
            senders = [request.get_response_sender() for request in requests]

            def send(index: int, outcome: object) -> None:
                senders[index].send(_response(outcome), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

            self.engine.submit(batch, requested, send)
            return None
        # Views of the engine's staging: the stub copies returned responses before the next execute.
        return [_response(outcome) for outcome in self.engine.execute(batch, requested, views=True)]

    def finalize(self) -> None:
        metrics = getattr(self, "metrics", None)
        if metrics is not None:
            metrics.close()
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.close()
            device.finalize()


def _response(outcome: object) -> pb_utils.InferenceResponse:
    """Outputs, or the error with the code a client can act on: 400 bad input, 503 retry later, 500."""
    if isinstance(outcome, GePluginError):
        if isinstance(outcome, RequestError):
            code = pb_utils.TritonError.INVALID_ARG
        elif isinstance(outcome, UnavailableError):
            code = pb_utils.TritonError.UNAVAILABLE
        else:
            code = pb_utils.TritonError.INTERNAL
        return pb_utils.InferenceResponse(error=pb_utils.TritonError(str(outcome), code))
    return pb_utils.InferenceResponse(
        output_tensors=[pb_utils.Tensor(name, array) for name, array in outcome.items()]  # type: ignore[attr-defined]
    )
