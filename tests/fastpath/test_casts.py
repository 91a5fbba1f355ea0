"""The element casts, against numpy (fp16) and ml_dtypes (bf16), over every 16-bit pattern and a large fp32
sample: round to nearest even, subnormals, infinities, NaN stays NaN (with its sign)."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import ml_dtypes
import numpy as np
import pytest

BF16 = ml_dtypes.bfloat16
DTYPES = {"fp16": np.float16, "fp32": np.float32, "bf16": np.uint16, "int32": np.int32, "int64": np.int64}


def convert(fp: ModuleType, values: np.ndarray, src_type: str, dst_type: str) -> np.ndarray:
    """values cast by the fast path: a one-source gather of a 1-D tensor, read back as dst_type's bits."""
    dtype = np.dtype(DTYPES[dst_type])
    dst = np.empty(values.size * dtype.itemsize, np.uint8)
    fp.gather(dst, (values.size,), dst_type, [values], src_type, 0)
    return dst.view(dtype)


ALL_16BIT = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


def fp32_sample() -> np.ndarray:
    """Random bit patterns (so every exponent, NaNs and subnormals included), exact ties for fp16 and bf16
    and their neighbours, and the edges of fp16's range."""
    rng = np.random.default_rng(12345)
    random_bits = rng.integers(0, 1 << 32, size=400_000, dtype=np.uint64).astype(np.uint32)
    finite16 = ALL_16BIT.view(np.float16)
    finite16 = finite16[np.isfinite(finite16)].astype(np.float64)
    finite16.sort()
    ties16 = ((finite16[:-1] + finite16[1:]) / 2).astype(np.float32)  # exact in fp32
    ties_bf16 = (ALL_16BIT.astype(np.uint32) << 16 | 0x8000).astype(np.uint32)
    near = [t.view(np.uint32) + d for t in (ties16,) for d in (-1, 1)]
    small = (rng.uniform(-(2.0**-13), 2.0**-13, size=50_000)).astype(np.float32).view(np.uint32)
    edges = np.array(
        [65504.0, 65519.996, 65520.0, 2.0**-24, 2.0**-25, 2.0**-25 * 1.0000001, 2.0**-14], np.float32
    )
    return np.concatenate(
        [
            random_bits,
            ties16.view(np.uint32),
            *[n.astype(np.uint32) for n in near],
            ties_bf16,
            small,
            edges.view(np.uint32),
        ]
    ).view(np.float32)


SAMPLE = fp32_sample()


def test_cast_fp16_to_fp32_matches_numpy_on_all_patterns(
    fp: ModuleType, assert_same_floats: Callable
) -> None:
    halves = ALL_16BIT.view(np.float16)
    assert_same_floats(convert(fp, halves, "fp16", "fp32"), halves.astype(np.float32), np.uint32)


def test_cast_fp16_to_fp32_keeps_nan_payload(fp: ModuleType) -> None:
    nans = np.array([0x7C01, 0xFE01, 0x7E00], np.uint16).view(np.float16)
    assert convert(fp, nans, "fp16", "fp32").view(np.uint32).tolist() == [0x7F802000, 0xFFC02000, 0x7FC00000]


def test_cast_fp32_to_fp16_matches_numpy_on_a_large_sample(
    fp: ModuleType, assert_same_floats: Callable
) -> None:
    with np.errstate(over="ignore", invalid="ignore"):
        expected = SAMPLE.astype(np.float16)
    assert_same_floats(convert(fp, SAMPLE, "fp32", "fp16"), expected, np.uint16)


def test_cast_fp32_to_fp16_round_trips_every_half(fp: ModuleType, assert_same_floats: Callable) -> None:
    halves = ALL_16BIT.view(np.float16)
    back = convert(fp, halves.astype(np.float32), "fp32", "fp16")
    assert_same_floats(back, halves, np.uint16)


def test_cast_fp32_to_fp16_quiets_nan_and_keeps_sign(fp: ModuleType) -> None:
    nans = np.array([0x7F800001, 0xFF800001, 0x7FC00000, 0x7FFFFFFF], np.uint32).view(np.float32)
    assert convert(fp, nans, "fp32", "fp16").view(np.uint16).tolist() == [0x7E00, 0xFE00, 0x7E00, 0x7FFF]


def test_cast_fp32_to_bf16_matches_ml_dtypes_on_a_large_sample(
    fp: ModuleType, assert_same_floats: Callable
) -> None:
    with np.errstate(invalid="ignore"):
        expected = SAMPLE.astype(BF16)
    assert_same_floats(convert(fp, SAMPLE, "fp32", "bf16").view(BF16), expected, np.uint16)


def test_cast_bf16_to_fp32_matches_ml_dtypes_on_all_patterns(
    fp: ModuleType, assert_same_floats: Callable
) -> None:
    expected = ALL_16BIT.view(BF16).astype(np.float32)
    assert_same_floats(convert(fp, ALL_16BIT, "bf16", "fp32"), expected, np.uint32)


def test_cast_fp16_to_bf16_matches_ml_dtypes_on_all_patterns(
    fp: ModuleType, assert_same_floats: Callable
) -> None:
    with np.errstate(invalid="ignore"):
        expected = ALL_16BIT.view(np.float16).astype(np.float32).astype(BF16)
    got = convert(fp, ALL_16BIT.view(np.float16), "fp16", "bf16")
    assert_same_floats(got.view(BF16), expected, np.uint16)


def test_cast_bf16_to_fp16_goes_through_fp32(fp: ModuleType, assert_same_floats: Callable) -> None:
    with np.errstate(over="ignore", invalid="ignore"):
        expected = ALL_16BIT.view(BF16).astype(np.float32).astype(np.float16)
    assert_same_floats(convert(fp, ALL_16BIT, "bf16", "fp16"), expected, np.uint16)


def test_cast_int32_to_int64_keeps_every_value(fp: ModuleType) -> None:
    values = np.array([-(2**31), -1, 0, 1, 2**31 - 1], np.int32)
    np.testing.assert_array_equal(convert(fp, values, "int32", "int64"), values.astype(np.int64))


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, 2**63 - 1, -(2**63)])
def test_cast_int64_to_int32_rejects_values_out_of_range(fp: ModuleType, value: int) -> None:
    values = np.array([0, 2**31 - 1, -(2**31), value, 0], np.int64)
    with pytest.raises(ValueError) as caught:
        convert(fp, values, "int64", "int32")
    assert (
        str(caught.value)
        == f"cannot cast int64 to int32: source 0 holds {value} at [3], which does not fit in int32"
    )


@pytest.mark.parametrize(
    ("dst_type", "pad", "bits"),
    [
        ("fp16", 1e-8, 0x0000),  # under half the smallest subnormal
        ("fp16", 6e-8, 0x0001),  # rounds up to the smallest subnormal
        ("fp16", 65520.0, 0x7C00),  # the first value that rounds to inf
        ("fp16", float("-inf"), 0xFC00),
        ("bf16", float("nan"), 0x7FC0),
        ("bf16", 1.00390625, 0x3F80),  # a tie, to even
    ],
)
def test_cast_pad_value_rounds_like_the_data(fp: ModuleType, dst_type: str, pad: float, bits: int) -> None:
    dst = np.empty(2, np.uint8)
    fp.gather(dst, (1,), dst_type, [], "fp32", pad)
    assert dst.view(np.uint16)[0] == bits


def test_casts_one_table_that_both_twins_and_the_engine_share(fp, both):
    """The conversions exist once per implementation (CASTS), the engine reads the picked one, and the two
    agree with each other and with what gather does: each listed pair converts, no other pair does."""
    from ge_plugin import fastpath
    from ge_plugin.engine import binding

    compiled, twin = both
    assert compiled.CASTS == twin.CASTS
    assert fastpath.CASTS is compiled.CASTS or fastpath.CASTS is twin.CASTS
    numpy_of: dict[str, Any] = {"bool": np.bool_, "uint8": np.uint8, "int32": np.int32, "int64": np.int64}
    numpy_of.update({"fp16": np.float16, "fp32": np.float32, "bf16": np.uint16})
    names = list(numpy_of)
    for a in names:
        for b in names:
            dst = np.zeros(64, np.uint8)
            src = np.zeros((1, 2), numpy_of[a])
            if a == b or (a, b) in fp.CASTS:
                fp.gather(dst, (1, 2), b, [src], a, 0)
            else:
                with pytest.raises(
                    ValueError, match=r"cannot cast .* \(the casts are fp32<->fp16, fp32<->bf16"
                ):
                    fp.gather(dst, (1, 2), b, [src], a, 0)
            assert binding._can_cast(a, b) == (a == b or ((a, b) in fp.CASTS and (b, a) in fp.CASTS))
