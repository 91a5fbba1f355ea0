"""The smallest servable model: whatever ge-plugin adds on top of it is the plugin's own overhead.

The benchmarks serve it next to the real models so that per-request cost of the backend, the fast path and
Triton itself can be told apart from the cost of the model.
"""

from __future__ import annotations

import onnx

from ge_plugin.models._graph import FLOAT, GraphBuilder, tensor

WIDTH = 16


def identity() -> onnx.ModelProto:
    """``INPUT0`` float32 [batch, 16] -> ``OUTPUT0`` float32 [batch, 16], one Identity node."""
    g = GraphBuilder()
    g.op("Identity", "INPUT0", out="OUTPUT0")
    return g.build(
        "identity",
        [tensor("INPUT0", FLOAT, ["batch", WIDTH])],
        [tensor("OUTPUT0", FLOAT, ["batch", WIDTH])],
        doc="OUTPUT0 = INPUT0: the ge-plugin overhead floor for benchmarks.",
        metadata={"ge_plugin.model": "identity"},
    )
