"""The floor: the cheapest model Triton's Python backend can serve, so ge_identity's extra cost is ge-plugin's.

One response per request, the input handed back as the output, nothing else. Whatever this costs is Triton,
gRPC and the Python backend's IPC on this machine; ``ge_identity`` serves the same tensors through the ``ge``
backend (engine, pinned staging, simulated device), and the bench reads one against the other.
"""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests: list) -> list:
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", request.inputs()[0].as_numpy())])
            for request in requests
        ]
