from __future__ import annotations

import pytest

from ge_plugin import dtypes
from ge_plugin.spec import Batching, InputDecl, ModelFiles, ModelSpec, OutputDecl, Placement

FP32 = dtypes.by_name("fp32")


def _spec(**overrides) -> ModelSpec:
    fields = dict(
        name="m",
        model=ModelFiles("m.om", "m.onnx", "Ascend310P3"),
        inputs=(InputDecl("x", FP32, (-1, 3)), InputDecl("y", FP32, (-1,))),
        outputs=(OutputDecl("z", FP32, (-1,)),),
        batching=Batching((1, 4)),
        dims_gears=(8, 16),
    )
    fields.update(overrides)
    return ModelSpec(**fields)


def test_model_spec_expands_shorthand_dims_gears_when_built_in_python():
    assert _spec().dims_gears == ((8, 8), (16, 16))


def test_model_spec_validates_when_built_in_python():
    with pytest.raises(ValueError, match="gears must be strictly ascending"):
        _spec(batching=Batching((4, 1)))
    with pytest.raises(ValueError, match="device 1 is listed twice"):
        Placement(devices=(1, 1))


def test_model_spec_properties_follow_batching():
    assert _spec().max_batch_size == 4
    unbatched = _spec(batching=None, inputs=(InputDecl("x", FP32, (1, -1)),), dims_gears=(8, 16))
    assert unbatched.max_batch_size == 0
    assert unbatched.gears == ()
    assert unbatched.dims_gears == ((8,), (16,))


def test_model_spec_source_path_without_a_file_is_relative_to_the_working_directory():
    assert (
        str(_spec(model=ModelFiles("m.om", "../models/m.onnx", "Ascend310P3")).source_path)
        == "../models/m.onnx"
    )


def test_model_spec_dynamic_dims_lists_every_minus_one_input_dim_in_order():
    spec = _spec(inputs=(InputDecl("a", FP32, (-1, 4, -1)), InputDecl("b", FP32, (2, -1))), dims_gears=())

    assert spec.dynamic_dims == ((0, 0), (0, 2), (1, 1))
