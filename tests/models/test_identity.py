"""The identity model: the overhead floor the benchmarks compare against."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from ge_plugin import models


def test_identity_passes_the_full_onnx_checker(untyped_tensors):
    assert untyped_tensors(models.identity()) == []


def test_identity_is_a_single_node_from_input0_to_output0():
    model = models.identity()
    assert [(n.op_type, list(n.input), list(n.output)) for n in model.graph.node] == [
        ("Identity", ["INPUT0"], ["OUTPUT0"])
    ]
    for value in (*model.graph.input, *model.graph.output):
        kind = value.type.tensor_type
        assert kind.elem_type == onnx.TensorProto.FLOAT
        assert [d.dim_param or d.dim_value for d in kind.shape.dim] == ["batch", models.IDENTITY_WIDTH]


@pytest.mark.parametrize("batch", [1, 8])
def test_identity_returns_its_input(identity_run, batch):
    x = np.random.default_rng(batch).standard_normal((batch, models.IDENTITY_WIDTH)).astype(np.float32)
    np.testing.assert_array_equal(identity_run(x), x)
