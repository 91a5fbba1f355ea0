"""The floor for a response of ge_llama's size: precomputed logits, no device, no model.

Each request gets logits [B, S, 32000] fp32 for its input_ids [B, S]: 2 MiB for one row of 16 tokens, 8 and
16 MiB for client batches of 4 and 8. The array for a shape is made once (random values, so every page is
real memory, as ge's pinned staging is) and handed back as it is on every later request. What a request
costs here is Triton, the Python backend's shared memory and gRPC carrying that response: the unavoidable
cost of its size. ``ge_llama`` returns the same tensors through the ``ge`` backend, and the bench reads one
against the other, batch size by batch size.
"""

import numpy as np
import triton_python_backend_utils as pb_utils

VOCAB = 32000


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        self.logits: dict[tuple[int, int], np.ndarray] = {}

    def _logits(self, rows: int, seq: int) -> np.ndarray:
        logits = self.logits.get((rows, seq))
        if logits is None:
            rng = np.random.default_rng(rows * 1000 + seq)
            logits = rng.standard_normal((rows, seq, VOCAB), dtype=np.float32)
            self.logits[rows, seq] = logits
        return logits

    def execute(self, requests: list) -> list:
        responses = []
        for request in requests:
            rows, seq = request.inputs()[0].shape()
            tensor = pb_utils.Tensor("logits", self._logits(rows, seq))
            responses.append(pb_utils.InferenceResponse([tensor]))
        return responses
