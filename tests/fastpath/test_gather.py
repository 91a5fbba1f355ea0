"""gather(): requests stacked into a gear in the staging buffer, every dim padded, cast on the way."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

UNTOUCHED = 0xAB


def as_tensor(buffer: np.ndarray, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    return buffer[: count * dtype.itemsize].view(dtype).reshape(shape)


def test_gather_stacks_rows_and_pads_the_rows_after(fp: ModuleType, staging: Callable) -> None:
    dst = staging(4 * 3 * 8)
    srcs = [np.array([[1, 2, 3]], np.int64), np.array([[4, 5, 6], [7, 8, 9]], np.int64)]
    written = fp.gather(dst, (4, 3), "int64", srcs, "int64", -1)
    assert written == 4 * 3 * 8
    np.testing.assert_array_equal(
        as_tensor(dst, (4, 3), np.int64), [[1, 2, 3], [4, 5, 6], [7, 8, 9], [-1, -1, -1]]
    )


def test_gather_pads_each_sequence_to_the_dims_gear(fp: ModuleType, staging: Callable) -> None:
    dst = staging(3 * 6 * 4)
    srcs = [np.array([[1, 2]], np.int32), np.array([[3, 4, 5, 6, 7]], np.int32)]
    fp.gather(dst, [3, 6], "int32", srcs, "int32", 0)
    np.testing.assert_array_equal(
        as_tensor(dst, (3, 6), np.int32), [[1, 2, 0, 0, 0, 0], [3, 4, 5, 6, 7, 0], [0, 0, 0, 0, 0, 0]]
    )


def test_gather_pads_inner_dims_of_a_rank_4_source(fp: ModuleType, staging: Callable) -> None:
    gear = (2, 3, 4, 5)
    source = np.arange(1 * 2 * 3 * 4, dtype=np.float32).reshape(1, 2, 3, 4) + 1
    dst = staging(int(np.prod(gear)) * 4)
    fp.gather(dst, gear, "fp32", [source], "fp32", 0.5)
    expected = np.full(gear, 0.5, np.float32)
    expected[:1, :2, :3, :4] = source
    np.testing.assert_array_equal(as_tensor(dst, gear, np.float32), expected)


def test_gather_pads_every_dim_of_an_unbatched_input(fp: ModuleType, staging: Callable) -> None:
    # Unbatched models get one source and the gear shape; dim 0 is padded like any other.
    dst = staging(4 * 3 * 2)
    fp.gather(dst, (4, 3), "fp16", [np.ones((2, 2), np.float16)], "fp16", 0)
    expected = np.zeros((4, 3), np.float16)
    expected[:2, :2] = 1
    np.testing.assert_array_equal(as_tensor(dst, (4, 3), np.float16), expected)


def test_gather_leaves_bytes_past_the_gear_alone(fp: ModuleType, staging: Callable) -> None:
    dst = staging(100)
    assert fp.gather(dst, (2, 2), "int16", [np.ones((1, 2), np.int16)], "int16", 0) == 8
    assert (dst[8:] == UNTOUCHED).all()


def test_gather_accepts_any_writable_buffer_and_buffer_sources(fp: ModuleType) -> None:
    dst = bytearray(2 * 2 * 4)
    source = np.array([[1.5, 2.5]], np.float32).data  # a memoryview
    fp.gather(dst, (2, 2), "fp32", (source,), "fp32", 0)
    np.testing.assert_array_equal(np.frombuffer(dst, np.float32), [1.5, 2.5, 0, 0])


def test_gather_accepts_a_generator_of_sources(fp: ModuleType, staging: Callable) -> None:
    dst = staging(3 * 8)
    fp.gather(dst, (3,), "int64", (np.array([i], np.int64) for i in range(2)), "int64", 9)
    np.testing.assert_array_equal(as_tensor(dst, (3,), np.int64), [0, 1, 9])


def test_gather_copies_a_non_contiguous_source_correctly(fp: ModuleType, staging: Callable) -> None:
    wide = np.arange(24, dtype=np.int32).reshape(2, 12)
    dst = staging(3 * 8 * 4)
    fp.gather(dst, (3, 8), "int32", [wide[:, ::2]], "int32", -7)
    expected = np.full((3, 8), -7, np.int32)
    expected[:2, :6] = wide[:, ::2]
    np.testing.assert_array_equal(as_tensor(dst, (3, 8), np.int32), expected)


def test_gather_with_no_sources_fills_the_gear(fp: ModuleType, staging: Callable) -> None:
    dst = staging(2 * 2 * 2)
    fp.gather(dst, (2, 2), "bf16", [], "bf16", 1.0)
    np.testing.assert_array_equal(as_tensor(dst, (2, 2), np.uint16), np.full((2, 2), 0x3F80))


def test_gather_large_batch_matches_small_batches(fp: ModuleType, staging: Callable) -> None:
    # Above 64 KiB the compiled module releases the GIL; the bytes must not change.
    rng = np.random.default_rng(7)
    srcs = [rng.standard_normal((2, int(n), 700)).astype(np.float32) for n in rng.integers(1, 40, size=6)]
    gear = (16, 40, 700)
    dst = staging(int(np.prod(gear)) * 2)
    fp.gather(dst, gear, "fp16", srcs, "fp32", -0.0)
    expected = np.full(gear, -0.0, np.float16)
    row = 0
    for source in srcs:
        expected[row : row + 2, : source.shape[1]] = source.astype(np.float16)
        row += 2
    assert as_tensor(dst, gear, np.uint16).tobytes() == expected.view(np.uint16).tobytes()


@pytest.mark.parametrize(
    ("src_type", "source", "dst_type", "pad", "expected"),
    [
        (
            "fp32",
            np.array([1.0, 65504.0, 1e5, 2**-24], np.float32),
            "fp16",
            0,
            [1.0, 65504.0, np.inf, 2**-24],
        ),
        ("fp16", np.array([0.5, -2.0, 2**-24], np.float16), "fp32", 3, [0.5, -2.0, 2**-24, 3]),
        ("int32", np.array([-(2**31), 2**31 - 1], np.int32), "int64", 5, [-(2**31), 2**31 - 1, 5]),
        ("int64", np.array([-(2**31), 2**31 - 1], np.int64), "int32", 5, [-(2**31), 2**31 - 1, 5]),
    ],
)
def test_gather_casts_numbers(
    fp: ModuleType,
    staging: Callable,
    src_type: str,
    source: np.ndarray,
    dst_type: str,
    pad: float,
    expected: list,
) -> None:
    dtype = {"fp16": np.float16, "fp32": np.float32, "int32": np.int32, "int64": np.int64}[dst_type]
    n = len(expected)
    dst = staging(n * np.dtype(dtype).itemsize)
    fp.gather(dst, (n,), dst_type, [source], src_type, pad)
    np.testing.assert_array_equal(as_tensor(dst, (n,), dtype), np.array(expected, dtype))


def test_gather_casts_fp32_to_bf16_rounding_to_nearest_even(fp: ModuleType, staging: Callable) -> None:
    bits = np.array([0x3F808000, 0x3F818000, 0x3F808001, 0x7F7FFFFF, 0x7FC00001], np.uint32)
    dst = staging(6 * 2)
    fp.gather(dst, (6,), "bf16", [bits.view(np.float32)], "fp32", 1.0)
    # ties go to the even neighbour, just above a tie rounds up, the largest float overflows to inf, NaN stays
    assert as_tensor(dst, (6,), np.uint16).tolist() == [0x3F80, 0x3F82, 0x3F81, 0x7F80, 0x7FC0, 0x3F80]


def test_gather_converts_the_pad_value_like_the_data(fp: ModuleType, staging: Callable) -> None:
    dst = staging(2)
    fp.gather(dst, (1,), "fp16", [], "fp32", 0.1)
    assert as_tensor(dst, (1,), np.uint16)[0] == np.float32(0.1).astype(np.float16).view(np.uint16)
    fp.gather(dst, (1,), "bf16", [], "fp32", -3.0e38)
    assert as_tensor(dst, (1,), np.uint16)[0] == 0xFF62  # -3.0e38 rounded to bf16


def test_gather_int64_to_int32_names_the_value_that_does_not_fit(fp: ModuleType, staging: Callable) -> None:
    srcs = [np.zeros((1, 3), np.int64), np.array([[1, 2, 3], [4, 2**31, -(2**40)]], np.int64)]
    with pytest.raises(ValueError) as caught:
        fp.gather(staging(3 * 4 * 4), (3, 4), "int32", srcs, "int64", 0)
    assert str(caught.value) == (
        "cannot cast int64 to int32: source 1 holds 2147483648 at [1, 1], which does not fit in int32"
    )


def _source(*shape: int, dtype: Any = np.int64) -> np.ndarray:
    return np.ones(shape, dtype)


READ_ONLY = np.zeros(64, np.uint8)
READ_ONLY.flags.writeable = False
STRIDED = np.zeros(128, np.uint8)[::2]

GATHER_ERRORS = {
    "dst-type": (
        dict(dst_type="fp8"),
        "gather: dst_type: unknown type 'fp8'; use one of bool, uint8, uint16, uint32, uint64, int8, int16, int32, "
        "int64, fp16, fp32, fp64, bf16",
    ),
    "src-type": (
        dict(src_type="TYPE_INT64"),
        "gather: src_type: unknown type 'TYPE_INT64'; use one of bool, uint8, uint16, uint32, uint64, int8, int16, "
        "int32, int64, fp16, fp32, fp64, bf16",
    ),
    "cast": (
        dict(src_type="int64", dst_type="fp32"),
        "gather: cannot cast int64 to fp32 (the casts are fp32<->fp16, fp32<->bf16, fp16<->bf16, int64<->int32)",
    ),
    "empty-shape": (dict(dst_shape=()), "gather: dst_shape is empty; it needs at least the row dim"),
    "zero-dim": (
        dict(dst_shape=(4, 0)),
        "gather: dst_shape [4, 0]: dim 1 is 0; every dim needs at least one element",
    ),
    "pad-fraction": (
        dict(pad_value=0.5),
        "gather: pad_value: 0.5 is not an integer, and int64 holds integers",
    ),
    "pad-nan": (
        dict(pad_value=float("nan")),
        "gather: pad_value: nan is not an integer, and int64 holds integers",
    ),
    "pad-range": (
        dict(pad_value=2.0**63),
        "gather: pad_value: 9.223372036854776e+18 does not fit in int64 [-9223372036854775808, 9223372036854775807]",
    ),
    "pad-range-uint8": (
        dict(dst_type="uint8", src_type="uint8", srcs=[_source(1, 3, dtype=np.uint8)], pad_value=256),
        "gather: pad_value: 256.0 does not fit in uint8 [0, 255]",
    ),
    "pad-bool": (
        dict(dst_type="bool", src_type="bool", srcs=[_source(1, 3, dtype=np.bool_)], pad_value=2),
        "gather: pad_value: 2.0 does not fit in bool [0, 1]",
    ),
    "pad-not-a-number": (dict(pad_value="0"), "gather: pad_value: '0' is not a number"),
    "dst-small": (
        dict(dst=np.zeros(20, np.uint8)),
        "gather: dst holds 20 bytes, the destination [4, 3] int64 needs 96",
    ),
    "dst-read-only": (dict(dst=READ_ONLY), "gather: dst is read-only; it must be writable"),
    "dst-bytes": (dict(dst=bytes(96)), "gather: dst is read-only; it must be writable"),
    "dst-strided": (dict(dst=STRIDED), "gather: dst is not C-contiguous"),
    "dst-not-a-buffer": (
        dict(dst=[0] * 96),
        "gather: dst must be a writable contiguous buffer such as a numpy uint8 array, got list",
    ),
    "source-not-an-array": (
        dict(srcs=[_source(1, 3), [[1, 2, 3]]]),
        "gather: source 1 is not an array, got list",
    ),
    "source-dtype": (
        dict(srcs=[_source(1, 3), _source(1, 3, dtype=np.float64)]),
        "gather: source 1 holds float64 data, expected int64",
    ),
    "source-rank": (
        dict(srcs=[_source(1, 3, 1)]),
        "gather: source 0 has 3 dims [1, 3, 1], the destination [4, 3] has 2",
    ),
    "source-empty": (
        dict(srcs=[_source(0, 3)]),
        "gather: source 0 [0, 3]: dim 0 is 0; every dim needs at least one element",
    ),
    "source-too-long": (
        dict(srcs=[_source(1, 3), _source(2, 4)]),
        "gather: source 1 [2, 4]: dim 1 is 4, longer than the destination's 3",
    ),
    "too-many-rows": (
        dict(srcs=[_source(3, 3), _source(2, 2)]),
        "gather: the sources hold 5 rows in total, more than the destination's 4",
    ),
}


@pytest.mark.parametrize(("changes", "message"), list(GATHER_ERRORS.values()), ids=list(GATHER_ERRORS))
def test_gather_rejects_before_writing_a_byte(
    fp: ModuleType, staging: Callable, changes: dict[str, Any], message: str
) -> None:
    dst = staging(96)
    args = dict(
        dst=dst, dst_shape=(4, 3), dst_type="int64", srcs=[_source(1, 3)], src_type="int64", pad_value=0
    )
    args.update(changes)
    with pytest.raises(ValueError) as caught:
        fp.gather(**args)
    assert str(caught.value) == message
    assert (dst == UNTOUCHED).all()
