"""copy_bytes() and fill(): the plain staging moves, for tensors that need no padding or casting."""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

import numpy as np
import pytest

UNTOUCHED = 0xAB


def test_copy_bytes_copies_to_the_start_of_dst(fp: ModuleType, staging: Callable) -> None:
    src = np.arange(6, dtype=np.float32).reshape(2, 3)
    dst = staging(40)
    fp.copy_bytes(dst, src)
    assert dst[:24].tobytes() == src.tobytes()
    assert (dst[24:] == UNTOUCHED).all()


def test_copy_bytes_accepts_any_contiguous_buffers(fp: ModuleType) -> None:
    dst = bytearray(8)
    fp.copy_bytes(memoryview(dst)[2:], b"abcd")
    assert bytes(dst) == b"\x00\x00abcd\x00\x00"


def test_copy_bytes_moves_a_large_tensor(fp: ModuleType, staging: Callable) -> None:
    src = np.random.default_rng(1).integers(0, 256, size=3 << 20, dtype=np.uint8)
    dst = staging(src.size)
    fp.copy_bytes(dst, src)
    np.testing.assert_array_equal(dst, src)


READ_ONLY = np.zeros(16, np.uint8)
READ_ONLY.flags.writeable = False

COPY_ERRORS = {
    "dst-small": (dict(dst=np.zeros(15, np.uint8)), "copy_bytes: dst holds 15 bytes, src has 16"),
    "dst-read-only": (dict(dst=READ_ONLY), "copy_bytes: dst is read-only; it must be writable"),
    "src-strided": (dict(src=np.zeros((4, 8), np.uint8)[:, ::2]), "copy_bytes: src is not C-contiguous"),
    "src-fortran": (dict(src=np.zeros((4, 4), np.uint8, order="F")), "copy_bytes: src is not C-contiguous"),
    "src-not-a-buffer": (
        dict(src=3),
        "copy_bytes: src must be a contiguous buffer such as a numpy uint8 array, got int",
    ),
}


@pytest.mark.parametrize(("changes", "message"), list(COPY_ERRORS.values()), ids=list(COPY_ERRORS))
def test_copy_bytes_rejects_buffers_it_cannot_use(
    fp: ModuleType, changes: dict[str, Any], message: str
) -> None:
    args: dict[str, Any] = dict(dst=np.zeros(16, np.uint8), src=np.ones(16, np.uint8))
    args.update(changes)
    with pytest.raises(ValueError) as caught:
        fp.copy_bytes(**args)
    assert str(caught.value) == message


def test_fill_writes_typed_values_in_range(fp: ModuleType, staging: Callable) -> None:
    dst = staging(5 * 4)
    fp.fill(dst, "int32", -2, start=1, count=3)
    words = dst.view(np.int32)
    assert words[1:4].tolist() == [-2, -2, -2]
    assert dst[:4].tolist() == [UNTOUCHED] * 4
    assert dst[16:].tolist() == [UNTOUCHED] * 4


def test_fill_runs_to_the_end_by_default(fp: ModuleType, staging: Callable) -> None:
    dst = staging(7)  # three whole bf16 elements, and a byte no element covers
    fp.fill(dst, "bf16", 1.0, start=1)
    assert dst[:6].view(np.uint16).tolist() == [0xABAB, 0x3F80, 0x3F80]
    assert dst[6] == UNTOUCHED


@pytest.mark.parametrize(
    ("type_", "value", "expected"),
    [
        ("bool", 1, np.ones(8, np.bool_)),
        ("uint8", 7, np.full(8, 7, np.uint8)),
        ("fp16", -0.0, np.full(4, -0.0, np.float16)),
        ("fp64", 0.25, np.full(1, 0.25, np.float64)),
        ("int64", 0, np.zeros(1, np.int64)),
        ("uint64", 2.0**64 - 2048, np.full(1, 2**64 - 2048, np.uint64)),
    ],
)
def test_fill_writes_every_type(
    fp: ModuleType, staging: Callable, type_: str, value: float, expected: np.ndarray
) -> None:
    dst = staging(8)
    fp.fill(dst, type_, value)
    assert dst.tobytes() == expected.tobytes()


def test_fill_writes_a_large_range(fp: ModuleType, staging: Callable) -> None:
    dst = staging(1 << 20)
    fp.fill(dst, "fp32", 2.5)
    assert (dst.view(np.float32) == 2.5).all()


FILL_ERRORS = {
    "type": (
        dict(type="half"),
        "fill: type: unknown type 'half'; use one of bool, uint8, uint16, uint32, uint64, int8, int16, int32, int64, fp16, fp32, fp64, bf16",
    ),
    "value": (dict(type="int8", value=-129), "fill: value: -129.0 does not fit in int8 [-128, 127]"),
    "past-end": (dict(start=2, count=3), "fill: elements 2..5 are outside dst, which holds 4 fp32 elements"),
    "negative-start": (dict(start=-1), "fill: elements -1..4 are outside dst, which holds 4 fp32 elements"),
    "start-past-end": (dict(start=5), "fill: elements 5..4 are outside dst, which holds 4 fp32 elements"),
    "negative-count": (dict(count=-2), "fill: elements 0..-2 are outside dst, which holds 4 fp32 elements"),
    "read-only": (dict(dst=b"\x00" * 16), "fill: dst is read-only; it must be writable"),
}


@pytest.mark.parametrize(("changes", "message"), list(FILL_ERRORS.values()), ids=list(FILL_ERRORS))
def test_fill_rejects_out_of_range_requests(
    fp: ModuleType, staging: Callable, changes: dict[str, Any], message: str
) -> None:
    dst = staging(16)
    args: dict[str, Any] = dict(dst=dst, type="fp32", value=0.0)
    args.update(changes)
    with pytest.raises(ValueError) as caught:
        fp.fill(**args)
    assert str(caught.value) == message
    assert (dst == UNTOUCHED).all()
