"""The floor for a response of ge_llama's size: precomputed logits, no device, no model.

Each request gets logits [B, S, 32000] fp32 for its input_ids [B, S]: 2 MiB for one row of 16 tokens, 8 and
16 MiB for client batches of 4 and 8. The array for a shape is made once (random values, so every page is
real memory, as ge's pinned staging is) and handed back as it is on every later request. What a request
costs here is Triton, the Python backend's shared memory and gRPC carrying that response: the unavoidable
cost of its size. ``ge_llama`` returns the same tensors through the ``ge`` backend, and the bench reads one
against the other, batch size by batch size. With ``GE_PLUGIN_STUB_TIMING`` set, reading the requests,
the work (finding the logits) and building the responses are timed (``ge_plugin.backend.timing``).
"""

import math

import numpy as np
import triton_python_backend_utils as pb_utils

from ge_plugin.backend import timing

VOCAB = 32000


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        self.logits: dict[tuple[int, int], np.ndarray] = {}
        self.timer = timing.from_environment(args.get("model_name", ""), args.get("model_instance_name", ""))
        if self.timer is not None:
            self.execute = self._timed_execute  # type: ignore[method-assign]

    def _logits(self, rows: int, seq: int) -> np.ndarray:
        logits = self.logits.get((rows, seq))
        if logits is None:
            rng = np.random.default_rng(rows * 1000 + seq)
            logits = rng.standard_normal((rows, seq, VOCAB), dtype=np.float32)
            self.logits[rows, seq] = logits
        return logits

    def _work(self, shapes: list) -> list:
        """The logits for each request's shape: what this floor does in place of a model."""
        return [self._logits(*shape) for shape in shapes]

    def execute(self, requests: list) -> list:
        responses = []
        for request in requests:
            rows, seq = request.inputs()[0].shape()
            tensor = pb_utils.Tensor("logits", self._logits(rows, seq))
            responses.append(pb_utils.InferenceResponse([tensor]))
        return responses

    def _timed_execute(self, requests: list) -> list:
        started, t0 = timing.wall(), timing.clock()
        shapes = [tuple(request.inputs()[0].shape()) for request in requests]
        t1 = timing.clock()
        outputs = self._work(shapes)
        t2 = timing.clock()
        responses = [pb_utils.InferenceResponse([pb_utils.Tensor("logits", logits)]) for logits in outputs]
        timer = self.timer
        assert timer is not None  # only installed with a timer
        timer.record(started, len(requests), t1 - t0, t2 - t1, timing.clock() - t2, math.nan)
        return responses

    def finalize(self) -> None:
        if self.timer is not None:
            self.timer.write()
