"""The same-size floor at the device's pace: wait what the simulated device would take, then return logits.

``py_logits`` answers at once; the replica's LLaMA answers after its device time (78 / 145 / 220 ms at batch
1 / 4 / 8). Transport measured right after an idle gap of that length is slower than back to back (the
bench measured gRPC's and the stub's share of a 16 MiB response at about twice their unpaced time), so a
floor that answers at once understates what any model at that pace pays. This one sleeps the device time
of the gear the batch would run on (the ``execute_latency_ms`` table of its acl.json, the replica's own),
off the GIL as a host waits for an NPU, and then returns precomputed logits like ``py_logits``, from the
same answering thread (as the replica's two-lane ge LLaMA answers from its completion thread). What the
replica's ge LLaMA adds beyond this is ge's.
"""

import json
import os
import sys
import time

# the floor's own model, copied beside this file by the bench's repository builder
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_logits import TritonPythonModel as Floor


class TritonPythonModel(Floor):
    def initialize(self, args: dict) -> None:
        config = json.loads(args["model_config"])
        acl_json = json.loads(config["parameters"]["acl_json"]["string_value"])
        self.latency_ms = {
            tuple(int(v) for v in label.split(",")): ms
            for label, ms in acl_json["ge_plugin_sim"]["execute_latency_ms"].items()
        }
        self.batches_by_size = sorted({batch for batch, _ in self.latency_ms})
        super().initialize(args)

    def _wait(self, shapes: list) -> None:
        """The device time of the gear the batch would run on."""
        rows = sum(shape[0] for shape in shapes)
        seq = max(shape[1] for shape in shapes)
        gear = next((b for b in self.batches_by_size if b >= rows), self.batches_by_size[-1])
        time.sleep(self.latency_ms.get((gear, seq), 0.0) / 1000)

    def _work(self, shapes: list) -> list:
        """The device's wait, then the logits."""
        self._wait(shapes)
        return super()._work(shapes)
