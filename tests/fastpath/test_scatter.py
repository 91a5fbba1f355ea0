"""scatter(): one output split back per request, trimmed to each request's shape, one new array each."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest


def staged(tensor: np.ndarray) -> np.ndarray:
    """The tensor's bytes in a flat uint8 buffer, as the D2H copy leaves them in the staging buffer."""
    return np.frombuffer(np.ascontiguousarray(tensor).tobytes(), np.uint8).copy()


def test_scatter_splits_rows_and_trims_each_request(fp: ModuleType) -> None:
    logits = np.arange(4 * 5 * 3, dtype=np.float32).reshape(4, 5, 3)
    outs = fp.scatter(staged(logits), (4, 5, 3), "fp32", "fp32", [1, 2], [(2, 3), (5, 1)])
    assert [o.shape for o in outs] == [(1, 2, 3), (2, 5, 1)]
    np.testing.assert_array_equal(outs[0], logits[0:1, :2, :3])
    np.testing.assert_array_equal(outs[1], logits[1:3, :5, :1])


def test_scatter_returns_new_contiguous_arrays(fp: ModuleType) -> None:
    src = staged(np.arange(12, dtype=np.int64).reshape(3, 4))
    outs = fp.scatter(src, [3, 4], "int64", "int64", [2, 1], [[4], [4]])
    for out in outs:
        assert isinstance(out, np.ndarray)
        assert out.flags.c_contiguous
        assert out.flags.writeable
        assert not np.shares_memory(out, src)
    src[:] = 0  # the staging buffer is reused by the next batch; the responses must not change
    np.testing.assert_array_equal(outs[1], [[8, 9, 10, 11]])


def test_scatter_keeps_zero_length_trims(fp: ModuleType) -> None:
    src = staged(np.ones((2, 3), np.int32))
    (out,) = fp.scatter(src, (2, 3), "int32", "int32", [2], [(0,)])
    assert out.shape == (2, 0)
    assert out.dtype == np.int32


def test_scatter_reads_a_read_only_buffer(fp: ModuleType) -> None:
    tensor = np.arange(6, dtype=np.int16).reshape(2, 3)
    (out,) = fp.scatter(tensor.tobytes(), (2, 3), "int16", "int16", [2], [(2,)])
    np.testing.assert_array_equal(out, tensor[:, :2])


@pytest.mark.parametrize(
    ("src_type", "tensor", "out_type", "dtype"),
    [
        ("fp16", np.array([[0.5, -1.0, 65504.0]], np.float16), "fp32", np.float32),
        ("fp32", np.array([[0.5, -1.0, 1e9]], np.float32), "fp16", np.float16),
        ("int32", np.array([[7, -(2**31), 2**31 - 1]], np.int32), "int64", np.int64),
        ("int64", np.array([[7, -(2**31), 2**31 - 1]], np.int64), "int32", np.int32),
    ],
)
def test_scatter_casts_into_the_output(
    fp: ModuleType, src_type: str, tensor: np.ndarray, out_type: str, dtype: Any
) -> None:
    (out,) = fp.scatter(staged(tensor), tensor.shape, src_type, out_type, [1], [(3,)])
    assert out.dtype == dtype
    with np.errstate(over="ignore"):  # 1e9 overflows fp16 to inf, as intended
        expected = tensor.astype(dtype)
    np.testing.assert_array_equal(out, expected)


def test_scatter_bf16_output_is_uint16_bits(fp: ModuleType) -> None:
    tensor = np.array([[1.0, -2.0]], np.float32)
    (out,) = fp.scatter(staged(tensor), (1, 2), "fp32", "bf16", [1], [(2,)])
    assert out.dtype == np.uint16
    assert out.tolist() == [[0x3F80, 0xC000]]


def test_scatter_large_outputs_match_numpy_slices(fp: ModuleType) -> None:
    # 8 logits outputs of up to [1, 24, 3000] fp32: well past the size where the GIL is released.
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((8, 24, 3000)).astype(np.float32)
    lengths = [int(n) for n in rng.integers(1, 25, size=8)]
    outs = fp.scatter(staged(logits), logits.shape, "fp32", "fp32", [1] * 8, [(n, 3000) for n in lengths])
    for i, (out, n) in enumerate(zip(outs, lengths)):
        np.testing.assert_array_equal(out, logits[i : i + 1, :n])


def test_scatter_int64_to_int32_names_the_value_that_does_not_fit(fp: ModuleType) -> None:
    tensor = np.zeros((3, 4), np.int64)
    tensor[2, 1] = -(2**33)  # trimmed away for request 0 and not owned by it
    tensor[1, 3] = 2**31  # outside request 1's trim: never read
    tensor[2, 2] = 2**31
    with pytest.raises(ValueError) as caught:
        fp.scatter(staged(tensor), (3, 4), "int64", "int32", [1, 2], [(4,), (3,)])
    assert str(caught.value) == (
        "cannot cast int64 to int32: request 1 holds -8589934592 at [1, 1], which does not fit in int32"
    )


SCATTER_ERRORS = {
    "src-type": (
        dict(src_type="float"),
        "scatter: src_type: unknown type 'float'; use one of bool, uint8, uint16, uint32, uint64, int8, int16, int32, "
        "int64, fp16, fp32, fp64, bf16",
    ),
    "out-type": (
        dict(out_type=None),
        "scatter: out_type: unknown type None; use one of bool, uint8, uint16, uint32, uint64, int8, int16, int32, "
        "int64, fp16, fp32, fp64, bf16",
    ),
    "cast": (
        dict(out_type="fp64"),
        "scatter: cannot cast fp32 to fp64 (the casts are fp32<->fp16, fp32<->bf16, fp16<->bf16, int64<->int32)",
    ),
    "src-shape": (
        dict(src_shape=[4, -1]),
        "scatter: src_shape [4, -1]: dim 1 is -1; every dim needs at least one element",
    ),
    "src-small": (dict(src_shape=(4, 4)), "scatter: src holds 48 bytes, the source [4, 4] fp32 needs 64"),
    "src-not-a-buffer": (
        dict(src=None),
        "scatter: src must be a contiguous buffer such as a numpy uint8 array, got NoneType",
    ),
    "counts": (
        dict(rows=[1, 1], shapes=[(3,)]),
        "scatter: 2 row counts but 1 shapes; give one of each per request",
    ),
    "zero-rows": (
        dict(rows=[1, 0], shapes=[(3,), (3,)]),
        "scatter: request 1 has 0 rows; every request has at least one",
    ),
    "shape-rank": (
        dict(shapes=[(3, 1)]),
        "scatter: request 0 shape [3, 1] has 2 dims, the source [4, 3] has 1 after the row dim",
    ),
    "shape-too-long": (
        dict(rows=[1, 1], shapes=[(3,), (4,)]),
        "scatter: request 1 shape [4]: dim 1 is 4, outside the source's 0..3",
    ),
    "too-many-rows": (
        dict(rows=[3, 2], shapes=[(3,), (3,)]),
        "scatter: the requests own 5 rows in total, more than the source's 4",
    ),
}


@pytest.mark.parametrize(("changes", "message"), list(SCATTER_ERRORS.values()), ids=list(SCATTER_ERRORS))
def test_scatter_rejects_rows_and_shapes_that_do_not_fit(
    fp: ModuleType, changes: dict[str, Any], message: str
) -> None:
    args: dict[str, Any] = dict(
        src=np.zeros(48, np.uint8),
        src_shape=(4, 3),
        src_type="fp32",
        out_type="fp32",
        rows=[1],
        shapes=[(3,)],
    )
    args.update(changes)
    with pytest.raises(ValueError) as caught:
        fp.scatter(**args)
    assert str(caught.value) == message
