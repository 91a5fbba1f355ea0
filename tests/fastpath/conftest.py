"""Every fast-path test runs on both implementations, the compiled module and its pure-Python twin.

The implementations are ``ge_plugin.fastpath.COMPILED`` and ``TWIN`` (multidict-style: each imports its
module lazily), so that a missing build fails only the ``c`` tests (marked ``c_extension``), never the
collection; the micro-benchmarks run on the same two.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from ge_plugin import fastpath
from ge_plugin.fastpath import NO_EXTENSIONS, Implementation

C_IMPL = fastpath.COMPILED
PY_IMPL = fastpath.TWIN


@pytest.fixture(
    scope="session",
    params=[pytest.param(C_IMPL, marks=pytest.mark.c_extension), PY_IMPL],
    ids=str,
)
def impl(request: pytest.FixtureRequest) -> Implementation:
    """The implementation under test; the compiled one is left out when GE_PLUGIN_NO_EXTENSIONS is set."""
    chosen: Implementation = request.param
    if chosen is C_IMPL and NO_EXTENSIONS:
        pytest.skip("GE_PLUGIN_NO_EXTENSIONS=1: only the pure-Python twin is under test")
    return chosen


@pytest.fixture(scope="session")
def fp(impl: Implementation) -> ModuleType:
    """The fast-path module under test (``ge_plugin._fastpath`` or ``ge_plugin._fastpath_py``)."""
    return impl.load()


@pytest.fixture(scope="session")
def both() -> tuple[ModuleType, ModuleType]:
    """The compiled module and the twin together, for tests that compare them byte for byte."""
    if NO_EXTENSIONS:
        pytest.skip("GE_PLUGIN_NO_EXTENSIONS=1: there is no compiled module to compare the twin with")
    return C_IMPL.load(), PY_IMPL.load()


#: the byte staging buffers start with in tests: no test writes it, so a gap or an overrun shows
UNTOUCHED = 0xAB


@pytest.fixture
def staging():
    """Makes stand-ins for pinned staging buffers: writable uint8 arrays pre-filled with UNTOUCHED."""

    def make(nbytes: int) -> np.ndarray:
        return np.full(nbytes, UNTOUCHED, dtype=np.uint8)

    return make


def _as_numpy_float(values: np.ndarray) -> np.ndarray:
    """numpy's own float types as they are; bfloat16 (ml_dtypes) widened to fp32, which is exact."""
    return values if values.dtype.kind == "f" else values.astype(np.float32)


@pytest.fixture(scope="session")
def assert_same_floats():
    """Compares float tensors bit for bit, except that a NaN may stand for any NaN of the same sign: NaN
    payloads differ between numpy's F16C and software casts, so no reference pins them down."""

    def check(got: np.ndarray, expected: np.ndarray, bits: type) -> None:
        got_float, expected_float = _as_numpy_float(got), _as_numpy_float(expected)
        got_nan, expected_nan = np.isnan(got_float), np.isnan(expected_float)
        np.testing.assert_array_equal(got_nan, expected_nan)
        np.testing.assert_array_equal(
            np.signbit(got_float[got_nan]), np.signbit(expected_float[expected_nan])
        )
        np.testing.assert_array_equal(got.view(bits)[~got_nan], expected.view(bits)[~expected_nan])

    return check
