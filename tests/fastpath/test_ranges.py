"""Declared value ranges and inputs tied to another's shape: refused in validate(), before the device.

A token id past the vocabulary fails the embedding's Gather on the device, and with it every request of
that execute; an int64 that an int32 model cannot hold would be found only while copying. Both are the
client's mistake and get a RequestError naming the input, the value and where it is.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from ge_plugin.errors import RequestError


def ids_spec(fp: ModuleType, **kwargs) -> object:
    return fp.TensorSpec("input_ids", "int64", (-1, -1), (8, 128), value_range=(0, 31999), **kwargs)


def test_range_accepts_its_bounds_themselves(fp: ModuleType) -> None:
    (out,) = fp.validate([ids_spec(fp)], {"input_ids": np.array([[0, 31999, 5]], dtype=np.int64)})
    assert out.tolist() == [[0, 31999, 5]]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            [[5, 6], [32000, 1]],
            "input 'input_ids': value 32000 at [1, 0] is outside the accepted range [0, 31999]",
        ),
        ([[-1, 5]], "input 'input_ids': value -1 at [0, 0] is outside the accepted range [0, 31999]"),
        ([[1, 2**40]], "input 'input_ids': value 1099511627776 at [0, 1] is outside"),
    ],
)
def test_range_refuses_the_first_value_outside_it(fp: ModuleType, values, message) -> None:
    with pytest.raises(RequestError) as caught:
        fp.validate([ids_spec(fp)], {"input_ids": np.array(values, dtype=np.int64)})
    assert message in str(caught.value)


def test_range_is_checked_on_a_non_contiguous_request_too(fp: ModuleType) -> None:
    ids = np.zeros((2, 8), dtype=np.int64)
    ids[1, 6] = 40000
    with pytest.raises(RequestError, match=r"value 40000 at \[1, 3\]"):
        fp.validate([ids_spec(fp)], {"input_ids": ids[:, ::2]})


def test_range_check_drops_the_gil_on_a_large_request_and_still_finds_the_value(fp: ModuleType) -> None:
    ids = np.ones((1, 100_000), dtype=np.int64)
    ids[0, 99_999] = 32000
    spec = fp.TensorSpec("input_ids", "int64", (-1, -1), (8, 100_000), value_range=(0, 31999))
    with pytest.raises(RequestError, match=r"value 32000 at \[0, 99999\]"):
        fp.validate([spec], {"input_ids": ids})


@pytest.mark.parametrize(
    ("type_name", "array", "value_range", "shown"),
    [
        ("fp32", np.array([[0.5, np.nan]], np.float32), (0.0, 1.0), "value nan at [0, 1]"),
        ("fp32", np.array([[0.5, 1.5]], np.float32), (0.0, 1.0), "value 1.5 at [0, 1]"),
        (
            "fp16",
            np.array([[0.25, -2.0]], np.float16),
            (-1, 1),
            "value -2.0 at [0, 1] is outside the accepted range [-1.0, 1.0]",
        ),
        ("fp64", np.array([[np.inf]], np.float64), (-1e300, 1e300), "value inf at [0, 0]"),
        ("bf16", np.array([[0x3F80, 0x4040]], np.uint16), (0.0, 2.0), "value 3.0 at [0, 1]"),
        ("int32", np.array([[3, 7]], np.int32), (0, 5), "value 7 at [0, 1]"),
        ("int8", np.array([[-128]], np.int8), (-5, 5), "value -128 at [0, 0]"),
        ("uint8", np.array([[250]], np.uint8), (0, 200), "value 250 at [0, 0]"),
        ("uint16", np.array([[1, 65535]], np.uint16), (0, 100), "value 65535 at [0, 1]"),
        ("uint32", np.array([[2**32 - 1]], np.uint32), (0, 10), "value 4294967295 at [0, 0]"),
        ("uint64", np.array([[2**64 - 1]], np.uint64), (0, 2**63), "value 18446744073709551615 at [0, 0]"),
        ("bool", np.array([[True, False]], np.bool_), (0, 0), "value 1 at [0, 0]"),
    ],
)
def test_range_works_for_every_type(fp: ModuleType, type_name, array, value_range, shown) -> None:
    spec = fp.TensorSpec("x", type_name, (-1, -1), (4, 4), value_range=value_range)
    with pytest.raises(RequestError) as caught:
        fp.validate([spec], {"x": array})
    assert f"input 'x': {shown}" in str(caught.value)


def test_range_no_value_can_meet_refuses_every_value(fp: ModuleType) -> None:
    spec = fp.TensorSpec("x", "uint64", (-1,), (4,), value_range=(-5, -1))
    with pytest.raises(RequestError, match=r"value 0 at \[0\]"):
        fp.validate([spec], {"x": np.zeros(1, np.uint64)})


@pytest.mark.parametrize(
    ("type_name", "value_range", "message"),
    [
        ("int64", (5, 1), "value_range low 5 is above high 1"),
        ("int64", (0, 1.5), "value_range high 1.5 is not an integer, and int64 holds integers"),
        ("fp32", (float("nan"), 1.0), "value_range low is NaN"),
        ("fp32", (0.0,), "value_range must be (low, high)"),
        ("fp32", ("0", 1), "value_range low: '0' is not a number"),
    ],
)
def test_tensorspec_refuses_a_malformed_range(fp: ModuleType, type_name, value_range, message) -> None:
    with pytest.raises(ValueError) as caught:
        fp.TensorSpec("x", type_name, (-1,), (4,), value_range=value_range)
    assert message in str(caught.value)


def test_tensorspec_keeps_integer_bounds_as_ints_and_float_bounds_as_floats(fp: ModuleType) -> None:
    assert fp.TensorSpec("x", "int64", (-1,), (4,), value_range=(0.0, 7.0)).value_range == (0, 7)
    assert fp.TensorSpec("x", "fp32", (-1,), (4,), value_range=(0, 7)).value_range == (0.0, 7.0)
    spec = fp.TensorSpec("x", "int64", (-1,), (4,), value_range=(0, 7), same_shape_as="y")
    assert eval(repr(spec), {"TensorSpec": fp.TensorSpec}) == spec
    assert spec != fp.TensorSpec("x", "int64", (-1,), (4,), value_range=(0, 8), same_shape_as="y")


def bert_specs(fp: ModuleType) -> list:
    return [
        fp.TensorSpec("input_ids", "int64", (-1, -1), (8, 64), value_range=(0, 999)),
        fp.TensorSpec(
            "attention_mask", "int64", (-1, -1), (8, 64), value_range=(0, 1), same_shape_as="input_ids"
        ),
    ]


def test_tied_inputs_of_the_same_shape_pass(fp: ModuleType) -> None:
    ids = np.ones((2, 5), np.int64)
    out = fp.validate(bert_specs(fp), {"input_ids": ids, "attention_mask": np.ones_like(ids)})
    assert [a.shape for a in out] == [(2, 5), (2, 5)]


@pytest.mark.parametrize("mask_shape", [(1, 5), (2, 4)])
def test_tied_input_of_another_shape_is_refused_naming_both(fp: ModuleType, mask_shape) -> None:
    request = {"input_ids": np.ones((2, 4) if mask_shape == (1, 5) else (2, 5), np.int64)}
    request["attention_mask"] = np.ones(mask_shape, np.int64)
    with pytest.raises(RequestError) as caught:
        fp.validate(bert_specs(fp), request)
    ids_shape = list(request["input_ids"].shape)
    assert str(caught.value) == (
        f"input 'attention_mask': shape {list(mask_shape)} differs from input 'input_ids''s {ids_shape}; "
        "the model takes them with the same shape"
    )


def test_each_input_is_checked_on_its_own_before_the_ties(fp: ModuleType) -> None:
    request = {"input_ids": np.ones((1, 4), np.int64), "attention_mask": np.full((1, 5), 2, np.int64)}
    with pytest.raises(RequestError, match="input 'attention_mask': value 2 at"):
        fp.validate(bert_specs(fp), request)


def test_tensorspec_refuses_a_tie_to_itself(fp: ModuleType) -> None:
    with pytest.raises(ValueError, match="same_shape_as names the input itself"):
        fp.TensorSpec("x", "int64", (-1,), (4,), same_shape_as="x")
