"""validate(): one request's tensors checked against the model's inputs, viewed rather than copied."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest

from ge_plugin.errors import RequestError


@pytest.fixture
def specs(fp: ModuleType) -> list:
    return [
        fp.TensorSpec("input_ids", "int64", (-1, -1), (8, 128)),
        fp.TensorSpec("pixel", "fp16", (-1, 3, 4), (8, 3, 4)),
        fp.TensorSpec("bias", "bf16", (-1, 2), (8, 2)),
    ]


def good_request() -> dict[str, Any]:
    return {
        "input_ids": np.arange(10, dtype=np.int64).reshape(2, 5),
        "pixel": np.zeros((2, 3, 4), dtype=np.float16),
        "bias": np.ones((2, 2), dtype=np.uint16),
    }


class DLPackOnly:
    """A tensor seen only through DLPack, like a pb_utils.Tensor in Triton's Python backend."""

    def __init__(self, array: np.ndarray) -> None:
        self._array = array

    def __dlpack__(self, stream: Any = None) -> Any:
        return self._array.__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._array.__dlpack_device__()


def test_validate_returns_the_same_arrays_in_spec_order(fp: ModuleType, specs: list) -> None:
    request = good_request()
    shuffled = {name: request[name] for name in ("bias", "pixel", "input_ids")}
    arrays = fp.validate(specs, shuffled)
    assert [a is request[s.name] for a, s in zip(arrays, specs)] == [True, True, True]


def test_validate_copies_only_a_non_contiguous_array(fp: ModuleType, specs: list) -> None:
    request = good_request()
    wide = np.arange(20, dtype=np.int64).reshape(2, 10)
    request["input_ids"] = wide[:, ::2]
    arrays = fp.validate(specs, request)
    assert arrays[0].flags.c_contiguous
    assert not np.shares_memory(arrays[0], wide)
    np.testing.assert_array_equal(arrays[0], wide[:, ::2])
    assert arrays[1] is request["pixel"]


def test_validate_views_a_read_only_buffer_without_copying(fp: ModuleType) -> None:
    spec = fp.TensorSpec("x", "fp32", (-1, 3), (4, 3))
    backing = np.arange(6, dtype=np.float32).reshape(2, 3)
    backing.flags.writeable = False
    view = backing.data  # a memoryview, what Triton's shared-memory inputs look like: read-only buffers
    (array,) = fp.validate([spec], {"x": view})
    assert isinstance(array, np.ndarray)
    assert np.shares_memory(array, backing)
    assert not array.flags.writeable
    np.testing.assert_array_equal(array, backing)


def test_validate_views_a_dlpack_tensor_without_copying(fp: ModuleType) -> None:
    spec = fp.TensorSpec("x", "int32", (-1, 4), (4, 4))
    backing = np.arange(8, dtype=np.int32).reshape(2, 4)
    (array,) = fp.validate([spec], {"x": DLPackOnly(backing)})
    assert np.shares_memory(array, backing)
    np.testing.assert_array_equal(array, backing)


def test_validate_accepts_uint16_bit_patterns_for_bf16(fp: ModuleType) -> None:
    spec = fp.TensorSpec("x", "bf16", (2,), (2,), batched=False)
    bits = np.array([0x3F80, 0x4000], dtype=np.uint16)
    assert fp.validate([spec], {"x": bits})[0] is bits


def test_validate_accepts_the_limits_themselves(fp: ModuleType) -> None:
    spec = fp.TensorSpec("ids", "int64", (-1, -1), (8, 128))
    ids = np.zeros((8, 128), dtype=np.int64)
    (accepted,) = fp.validate([spec], {"ids": ids})
    assert accepted is ids  # accepted as it came: neither refused nor copied


def test_validate_request_error_is_a_value_error(fp: ModuleType, specs: list) -> None:
    with pytest.raises(ValueError):
        fp.validate(specs, {})


def _with(**changes: Any) -> dict[str, Any]:
    request = good_request()
    for name, value in changes.items():
        if value is None:
            del request[name]
        else:
            request[name] = value
    return request


ERRORS = {
    "missing": (
        _with(pixel=None),
        "missing input 'pixel': the model takes input_ids, pixel, bias; the request has input_ids, bias",
    ),
    "missing-all": (
        {},
        "missing input 'input_ids': the model takes input_ids, pixel, bias; the request has none",
    ),
    "unexpected": (
        {**good_request(), "token_type_ids": np.zeros((2, 5), np.int64)},
        "unexpected input 'token_type_ids': the model takes input_ids, pixel, bias",
    ),
    "dtype": (
        _with(input_ids=np.zeros((2, 5), np.int32)),
        "input 'input_ids': expected int64 data, got int32",
    ),
    "dtype-float-for-half": (
        _with(pixel=np.zeros((2, 3, 4), np.float32)),
        "input 'pixel': expected fp16 data, got float32",
    ),
    "dtype-bf16": (
        _with(bias=np.zeros((2, 2), np.float16)),
        "input 'bias': expected bf16 (uint16 bit patterns) data, got float16",
    ),
    "dtype-byte-order": (
        _with(input_ids=np.zeros((2, 5), ">i8")),
        "input 'input_ids': expected int64 data, got >i8 (non-native byte order)",
    ),
    "dtype-same-size-other-kind": (
        _with(input_ids=np.zeros((2, 5), np.uint64)),
        "input 'input_ids': expected int64 data, got uint64",
    ),
    "rank": (
        _with(pixel=np.zeros((2, 12), np.float16)),
        "input 'pixel': expected shape [-1, 3, 4] (3 dims), got [2, 12] (2 dims)",
    ),
    "fixed-dim": (
        _with(pixel=np.zeros((2, 3, 5), np.float16)),
        "input 'pixel': dim 2 is 5, expected 4",
    ),
    "batch-limit": (
        _with(input_ids=np.zeros((9, 5), np.int64)),
        "input 'input_ids': batch 9 exceeds the largest gear 8",
    ),
    "sequence-limit": (
        _with(input_ids=np.zeros((2, 300), np.int64)),
        "input 'input_ids': dim 1 is 300, longer than the largest sequence gear 128",
    ),
    "empty-batch": (
        _with(input_ids=np.zeros((0, 5), np.int64)),
        "input 'input_ids': empty batch (dim 0 is 0)",
    ),
    "empty-dim": (
        _with(input_ids=np.zeros((2, 0), np.int64)),
        "input 'input_ids': dim 1 is 0; every dim needs at least one element",
    ),
    "not-an-array": (
        _with(input_ids=[[1, 2, 3]]),
        "input 'input_ids': expected an array (buffer protocol or DLPack), got list",
    ),
}


@pytest.mark.parametrize(("request_", "message"), list(ERRORS.values()), ids=list(ERRORS))
def test_validate_names_the_input_and_the_problem(
    fp: ModuleType, specs: list, request_: dict[str, Any], message: str
) -> None:
    with pytest.raises(RequestError) as caught:
        fp.validate(specs, request_)
    assert str(caught.value) == message


def test_validate_words_dim_0_of_an_unbatched_input_as_a_sequence(fp: ModuleType) -> None:
    spec = fp.TensorSpec("tokens", "int32", (-1,), (64,), batched=False)
    with pytest.raises(RequestError) as caught:
        fp.validate([spec], {"tokens": np.zeros(65, np.int32)})
    assert str(caught.value) == "input 'tokens': dim 0 is 65, longer than the largest sequence gear 64"
    with pytest.raises(RequestError) as caught:
        fp.validate([spec], {"tokens": np.zeros(0, np.int32)})
    assert str(caught.value) == "input 'tokens': dim 0 is 0; every dim needs at least one element"


def test_validate_reports_the_first_problem_in_spec_order(fp: ModuleType, specs: list) -> None:
    request = _with(input_ids=np.zeros((2, 5), np.int32), pixel=None)
    with pytest.raises(RequestError, match=r"^input 'input_ids': expected int64"):
        fp.validate(specs, request)
