"""TensorSpec: checked once when the model loads, immutable afterwards."""

from __future__ import annotations

from types import ModuleType

import pytest


def test_tensorspec_keeps_fields_as_tuples(fp: ModuleType) -> None:
    spec = fp.TensorSpec("input_ids", "int64", [-1, 128], [8, 128])
    assert (spec.name, spec.type, spec.dims, spec.limits, spec.batched) == (
        "input_ids",
        "int64",
        (-1, 128),
        (8, 128),
        True,
    )
    assert fp.TensorSpec("x", "fp32", (3,), (3,), batched=False).batched is False


def test_tensorspec_accepts_a_scalar_input(fp: ModuleType) -> None:
    assert fp.TensorSpec("scale", "fp32", (), ()).dims == ()


@pytest.mark.parametrize("attr", ["name", "type", "dims", "limits", "batched"])
def test_tensorspec_is_immutable(fp: ModuleType, attr: str) -> None:
    spec = fp.TensorSpec("x", "fp32", (-1, 4), (8, 4))
    with pytest.raises(AttributeError):
        setattr(spec, attr, getattr(spec, attr))
    assert spec.dims == (-1, 4)


def test_tensorspec_refuses_new_attributes(fp: ModuleType) -> None:
    spec = fp.TensorSpec("x", "fp32", (-1, 4), (8, 4))
    with pytest.raises(AttributeError):
        spec.extra = 1


def test_tensorspec_equal_specs_hash_alike(fp: ModuleType) -> None:
    one = fp.TensorSpec("x", "bf16", [-1, -1], [8, 512])
    two = fp.TensorSpec("x", "bf16", (-1, -1), (8, 512))
    assert one == two
    assert hash(one) == hash(two)
    assert one != fp.TensorSpec("x", "bf16", (-1, -1), (8, 256))
    assert one != fp.TensorSpec("x", "bf16", (-1, -1), (8, 512), batched=False)
    assert one != ("x", "bf16", (-1, -1), (8, 512))


def test_tensorspec_repr_rebuilds_an_equal_spec(fp: ModuleType) -> None:
    spec = fp.TensorSpec("mask", "int32", (-1, 7), (4, 7), batched=False)
    assert repr(spec) == "TensorSpec('mask', 'int32', (-1, 7), (4, 7), batched=False)"
    assert eval(repr(spec), {"TensorSpec": fp.TensorSpec}) == spec


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("", "fp32", (1,), (1,)), "TensorSpec name must be a non-empty string, got ''"),
        ((7, "fp32", (1,), (1,)), "TensorSpec name must be a non-empty string, got 7"),
        (
            ("x", "float32", (1,), (1,)),
            "TensorSpec 'x': unknown type 'float32'; use one of bool, uint8, uint16, uint32, uint64, int8, int16, "
            "int32, int64, fp16, fp32, fp64, bf16",
        ),
        (
            ("x", "fp32", (-1, 4), (8,)),
            "TensorSpec 'x': dims [-1, 4] and limits [8] differ in length",
        ),
        (("x", "fp32", (-1, 0), (8, 1)), "TensorSpec 'x': dim 1 is 0; use -1 (dynamic) or a positive length"),
        (("x", "fp32", (-2,), (8,)), "TensorSpec 'x': dim 0 is -2; use -1 (dynamic) or a positive length"),
        (("x", "fp32", (-1, 4), (0, 4)), "TensorSpec 'x': the limit of dim 0 is 0; it must be positive"),
        (("x", "fp32", (-1, 4), (8, 5)), "TensorSpec 'x': dim 1 is fixed at 4 but its limit is 5"),
        (("x", "fp32", (1,) * 33, (1,) * 33), "TensorSpec 'x': 33 dims, more than 32"),
    ],
)
def test_tensorspec_rejects_bad_definitions(fp: ModuleType, args: tuple, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        fp.TensorSpec(*args)
    assert str(caught.value) == message


def test_tensorspec_type_names_are_the_dtype_table_short_names(fp: ModuleType) -> None:
    # The engine names types with ge_plugin.dtypes; every non-string type there must be accepted here.
    from ge_plugin.dtypes import all_dtypes

    for dtype in all_dtypes():
        if dtype.short == "string":
            with pytest.raises(ValueError, match="unknown type 'string'"):
                fp.TensorSpec("x", dtype.short, (1,), (1,))
        else:
            assert fp.TensorSpec("x", dtype.short, (1,), (1,)).type == dtype.short
