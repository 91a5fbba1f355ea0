"""Microbenchmarks of the fast path, the compiled module and the pure-Python twin side by side (one group
per case), with np.copyto as the bandwidth yardstick for the 64 MiB copies. Inputs are built outside the
timed call; the staging buffers are touched once before timing, as pinned memory always is.

Run with ``make bench-micro``; the summary table at the end gives the py/c ratios and the GB/s.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from ge_plugin.fastpath import COMPILED, NO_EXTENSIONS, TWIN, Implementation

SMALL_SPEEDUP = 5.0  # the compiled module must be at least this much faster on small requests
COPY_BANDWIDTH = 0.8  # and reach at least this fraction of np.copyto's bandwidth on one large tensor


def _load(impl: Implementation) -> ModuleType:
    if impl == COMPILED and NO_EXTENSIONS:
        pytest.skip("GE_PLUGIN_NO_EXTENSIONS=1: no compiled module to time")
    return impl.load()


@pytest.fixture(params=[COMPILED, TWIN], ids=str)
def impl(request: pytest.FixtureRequest) -> tuple[str, ModuleType]:
    """The same two implementations the property tests run on (tests/fastpath/conftest.py)."""
    return str(request.param), _load(request.param)


def staging(nbytes: int) -> np.ndarray:
    buffer = np.empty(nbytes, np.uint8)
    buffer.fill(0)  # fault the pages in now, not inside the first timed call
    return buffer


@pytest.mark.benchmark(group="gather rows")
def test_bench_gather_16_requests_of_1x128_int64(
    impl: tuple[str, ModuleType], record: Callable[..., None]
) -> None:
    name, fp = impl
    rng = np.random.default_rng(0)
    srcs = [rng.integers(0, 30000, size=(1, 128), dtype=np.int64) for _ in range(16)]
    gear = (16, 128)
    dst = staging(16 * 128 * 8)
    case = "gather 16 x [1,128] int64 into [16,128]"
    record(case, name, dst.size, fp.gather, dst, gear, "int64", srcs, "int64", 0, speedup=SMALL_SPEEDUP)


@pytest.mark.benchmark(group="gather sequences")
def test_bench_gather_8_sequences_into_dims_gear_128(
    impl: tuple[str, ModuleType], record: Callable[..., None]
) -> None:
    name, fp = impl
    rng = np.random.default_rng(1)
    lengths = rng.integers(1, 129, size=8)
    srcs = [rng.integers(0, 30000, size=(1, int(n)), dtype=np.int64) for n in lengths]
    gear = (8, 128)
    dst = staging(8 * 128 * 8)
    case = "gather 8 x [1,S<=128] int64 into [8,128]"
    record(case, name, dst.size, fp.gather, dst, gear, "int64", srcs, "int64", 0, speedup=SMALL_SPEEDUP)


@pytest.mark.benchmark(group="validate")
def test_bench_validate_a_two_input_request(
    impl: tuple[str, ModuleType], record: Callable[..., None]
) -> None:
    name, fp = impl
    specs = [
        fp.TensorSpec("input_ids", "int64", (-1, -1), (8, 128)),
        fp.TensorSpec("mask", "int64", (-1, -1), (8, 128)),
    ]
    request = {"input_ids": np.ones((1, 77), np.int64), "mask": np.ones((1, 77), np.int64)}
    record("validate 2 inputs of [1,77] int64", name, 0, fp.validate, specs, request, speedup=SMALL_SPEEDUP)


@pytest.mark.benchmark(group="gather cast")
def test_bench_gather_cast_fp32_image_to_fp16(
    impl: tuple[str, ModuleType], record: Callable[..., None]
) -> None:
    # not one of the targets: how much an fp16 OM costs clients that send fp32
    name, fp = impl
    image = np.random.default_rng(4).standard_normal((1, 3, 224, 224), dtype=np.float32)
    gear = (1, 3, 224, 224)
    dst = staging(image.size * 2)
    record(
        "gather [1,3,224,224] fp32 cast to fp16",
        name,
        dst.size,
        fp.gather,
        dst,
        gear,
        "fp16",
        [image],
        "fp32",
        0,
    )


VOCAB = 32000
MAX_SEQ = 32


@pytest.mark.benchmark(group="scatter logits")
def test_bench_scatter_8_logits_trimmed(impl: tuple[str, ModuleType], record: Callable[..., None]) -> None:
    name, fp = impl
    rng = np.random.default_rng(2)
    src_shape = (8, MAX_SEQ, VOCAB)
    src = staging(int(np.prod(src_shape)) * 4)
    src.view(np.float32)[:] = rng.standard_normal(src.size // 4, dtype=np.float32)
    lengths = [int(n) for n in rng.integers(1, MAX_SEQ + 1, size=8)]
    shapes = [(n, VOCAB) for n in lengths]
    nbytes = sum(lengths) * VOCAB * 4
    case = f"scatter 8 x [1,S<={MAX_SEQ},{VOCAB}] fp32, trimmed"
    record(case, name, nbytes, fp.scatter, src, src_shape, "fp32", "fp32", [1] * 8, shapes)


LARGE = (1, 4096, 4096)  # 64 MiB of fp32
LARGE_BYTES = int(np.prod(LARGE)) * 4


@pytest.fixture(scope="module")
def large_source() -> np.ndarray:
    return np.random.default_rng(3).standard_normal(LARGE, dtype=np.float32)


@pytest.fixture(params=[COMPILED, TWIN, "np.copyto"], ids=str)
def copier(request: pytest.FixtureRequest) -> tuple[str, ModuleType | None]:
    chosen = request.param
    return str(chosen), None if chosen == "np.copyto" else _load(chosen)


def _copyto(dst: np.ndarray, src: np.ndarray) -> None:
    np.copyto(dst, src)


@pytest.mark.benchmark(group="gather 64 MiB")
def test_bench_gather_one_64mib_tensor(
    copier: tuple[str, ModuleType | None], large_source: np.ndarray, record: Callable[..., None]
) -> None:
    name, fp = copier
    dst = staging(LARGE_BYTES)
    case = "gather one [1,4096,4096] fp32 (64 MiB)"
    if fp is None:
        record(case, name, LARGE_BYTES, _copyto, dst.view(np.float32).reshape(LARGE), large_source)
    else:
        args: tuple[Any, ...] = (dst, LARGE, "fp32", [large_source], "fp32", 0)
        record(case, name, LARGE_BYTES, fp.gather, *args, bandwidth=COPY_BANDWIDTH)


@pytest.mark.benchmark(group="bf16 dlpack")
def test_bench_bf16_capsule_then_view_of_one_output(
    impl: tuple[str, ModuleType], record: Callable[..., None]
) -> None:
    """What a TYPE_BF16 request costs the backend on top of a numpy one: its input read through bf16_view, its
    output lent through bf16_capsule (here one round trip, the capsule consumed as Triton's stub does)."""
    name, fp = impl
    words = np.arange(8 * 64, dtype=np.uint16).reshape(8, 64)

    def round_trip() -> object:
        return fp.bf16_view(fp.bf16_capsule(words))

    record("bf16_capsule + bf16_view of [8,64]", name, words.nbytes, round_trip, speedup=SMALL_SPEEDUP)
