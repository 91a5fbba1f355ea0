"""The floor for a response of ge_llama's size: precomputed logits, no device, no model.

Each request gets logits [B, S, 32000] fp32 for its input_ids [B, S]: 2 MiB for one row of 16 tokens, 8 and
16 MiB for client batches of 4 and 8. The array for a shape is made once (random values, so every page is
real memory, as ge's pinned staging is) and handed back as it is on every later request. What a request
costs here is Triton, the Python backend's shared memory and gRPC carrying that response: the unavoidable
cost of its size. ``ge_llama`` returns the same tensors through the ``ge`` backend, and the bench reads one
against the other, batch size by batch size. With ``GE_PLUGIN_STUB_TIMING`` set, reading the requests,
the work (finding the logits) and building the responses are timed (``ge_plugin.backend.timing``).

It answers as ``ge_llama`` does (two lanes: always from the engine's completion thread): ``execute`` hands
the batch to a thread of its own and returns None, and that thread sends the responses. Returned from
``execute``, a 2 MiB response reached the client before Triton 2.51 counted the instance free again, and on
a busy host the client's next request then waited for the dynamic batcher's 500 ms poll (perf_analyzer at
c=1: p50 502,808 µs; tests/e2e/test_one_lane.py). The thread alone still lost that race now and then (its
work is a lookup, over before the stub's return reaches the server), so the bench serves this floor with a
second instance (``repository.TWINS``): at c=1 the next request always finds one free, and the other is idle.
"""

import math
import queue
import threading

import numpy as np
import triton_python_backend_utils as pb_utils

from ge_plugin.backend import timing

VOCAB = 32000


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        self.logits: dict[tuple[int, int], np.ndarray] = {}
        self.timer = timing.from_environment(args.get("model_name", ""), args.get("model_instance_name", ""))
        self.batches: queue.SimpleQueue = queue.SimpleQueue()
        self.answering = threading.Thread(target=self._answer, name="floor-answer", daemon=True)
        self.answering.start()

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

    def execute(self, requests: list) -> None:
        started, t0 = timing.wall(), timing.clock()
        shapes = [tuple(request.inputs()[0].shape()) for request in requests]
        senders = [request.get_response_sender() for request in requests]
        self.batches.put((started, timing.clock() - t0, shapes, senders))
        return None

    def _answer(self) -> None:
        """The answering thread: each batch's work, its responses built and sent, in the order they came."""
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        while (batch := self.batches.get()) is not None:
            started, read_s, shapes, senders = batch
            t1 = timing.clock()
            outputs = self._work(shapes)
            t2 = timing.clock()
            responses = [
                pb_utils.InferenceResponse([pb_utils.Tensor("logits", logits)]) for logits in outputs
            ]
            t3 = timing.clock()
            for sender, response in zip(senders, responses):
                sender.send(response, flags=final)
            if self.timer is not None:
                self.timer.record(started, len(shapes), read_s, t2 - t1, t3 - t2, math.nan)

    def finalize(self) -> None:
        self.batches.put(None)
        self.answering.join(timeout=10)
        if self.timer is not None:
            self.timer.write()
