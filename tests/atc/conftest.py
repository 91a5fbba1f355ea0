"""Small ONNX graphs on disk for the ATC tests."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge_plugin.sim import _state
from ge_plugin.sim import acl as sim_acl


def two_layer() -> onnx.ModelProto:
    """ids int64 [batch, seq] and x float [batch, seq, 4] -> h = x @ W (node "mm"), y = h + 1, n = ids * 2."""
    w = np.arange(8, dtype=np.float32).reshape(4, 2)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
            helper.make_node("Add", ["h", "one"], ["y"], name="add"),
            helper.make_node("Mul", ["ids", "two"], ["n"], name="double"),
        ],
        "two_layer",
        [
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 4]),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 2]),
            helper.make_tensor_value_info("n", TensorProto.INT64, ["batch", "seq"]),
        ],
        [
            numpy_helper.from_array(w, "W"),
            numpy_helper.from_array(np.array(1, np.float32), "one"),
            numpy_helper.from_array(np.array(2, np.int64), "two"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def nonzero() -> onnx.ModelProto:
    """x float [n] -> idx = NonZero(x): an output whose shape depends on the data."""
    graph = helper.make_graph(
        [helper.make_node("NonZero", ["x"], ["idx"])],
        "nonzero",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("idx", TensorProto.INT64, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def acl():
    """The simulated pyACL, initialised with device 0 set, reset after the test."""
    _state.reset_for_tests()
    assert sim_acl.init() == 0
    assert sim_acl.rt.set_device(0) == 0
    yield sim_acl
    _state.reset_for_tests()


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "two_layer.onnx"
    onnx.save(two_layer(), path)
    return path


@pytest.fixture
def base(model_file: Path, tmp_path: Path) -> list[str]:
    """The flags every build needs, for the two-layer model."""
    return [
        f"--model={model_file}",
        "--framework=5",
        f"--output={tmp_path / 'out'}",
        "--soc_version=Ascend910B3",
    ]


@pytest.fixture
def graphs(graphs: SimpleNamespace) -> SimpleNamespace:
    """tests/conftest.py's graphs, and the ATC tests' own."""
    return SimpleNamespace(**vars(graphs), two_layer=two_layer, nonzero=nonzero)
