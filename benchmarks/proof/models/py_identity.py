"""The floor: the cheapest model Triton's Python backend can serve, so ge_identity's extra cost is ge-plugin's.

One response per request, the input handed back as the output, nothing else. Whatever this costs is Triton,
gRPC and the Python backend's IPC on this machine; ``ge_identity`` serves the same tensors through the ``ge``
backend (engine, pinned staging, simulated device), and the bench reads one against the other. With
``GE_PLUGIN_STUB_TIMING`` set (as the bench sets it for every model), reading the requests and building the
responses are timed as the ``ge`` backend's are (``ge_plugin.backend.timing``).
"""

import math

import triton_python_backend_utils as pb_utils

from ge_plugin.backend import timing


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        self.timer = timing.from_environment(args.get("model_name", ""), args.get("model_instance_name", ""))
        if self.timer is not None:
            self.execute = self._timed_execute  # type: ignore[method-assign]

    def execute(self, requests: list) -> list:
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", request.inputs()[0].as_numpy())])
            for request in requests
        ]

    def _timed_execute(self, requests: list) -> list:
        started, t0 = timing.wall(), timing.clock()
        arrays = [request.inputs()[0].as_numpy() for request in requests]
        t1 = timing.clock()
        responses = [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", array)]) for array in arrays]
        timer = self.timer
        assert timer is not None  # only installed with a timer
        timer.record(started, len(requests), t1 - t0, 0.0, timing.clock() - t1, math.nan)
        return responses

    def finalize(self) -> None:
        if self.timer is not None:
            self.timer.write()
