"""The compiled module releases the GIL while it moves a large tensor, so that other Triton instances and
Python threads in the process keep running during a long copy.

The evidence is deterministic: while a thread writes a large buffer, this thread samples it. If it ever
sees the buffer half written, it ran in the middle of the write, which only a released GIL allows.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import sys
import threading
from typing import Any, Callable

import numpy as np
import pytest

NO_EXTENSIONS = os.environ.get("GE_PLUGIN_NO_EXTENSIONS", "") not in ("", "0")
SIZE = 256 << 20  # large enough that a write takes tens of ms, page faults included


def saw_half_written(dst: np.ndarray, write: Callable[[], Any]) -> bool:
    """Runs write (which sets every byte of the zeroed dst to 1) in a thread, sampling dst meanwhile."""
    samples = dst[:: SIZE // 512]
    started = threading.Event()
    seen = False

    def worker() -> None:
        started.set()
        write()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    try:
        thread = threading.Thread(target=worker)
        thread.start()
        started.wait()
        while thread.is_alive():
            if samples.any() and not samples.all():
                seen = True
        thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert samples.all(), "the write did not finish"
    return seen


@pytest.fixture
def ones() -> np.ndarray:
    return np.ones(SIZE, np.uint8)


def _writes(fp: Any, dst: np.ndarray, ones: np.ndarray) -> dict[str, Callable[[], Any]]:
    return {
        "fill": lambda: fp.fill(dst, "uint8", 1),
        "copy_bytes": lambda: fp.copy_bytes(dst, ones),
        "gather": lambda: fp.gather(dst, (1, SIZE), "uint8", [ones[None]], "uint8", 0),
    }


@pytest.mark.c_extension
@pytest.mark.skipif(NO_EXTENSIONS, reason="GE_PLUGIN_NO_EXTENSIONS=1: no compiled module")
@pytest.mark.parametrize("name", ["fill", "copy_bytes", "gather"])
def test_large_write_releases_the_gil(name: str, ones: np.ndarray) -> None:
    compiled = importlib.import_module("ge_plugin._fastpath")
    dst = np.zeros(SIZE, np.uint8)
    assert saw_half_written(dst, _writes(compiled, dst, ones)[name])


def test_saw_half_written_misses_a_write_that_holds_the_gil() -> None:
    # The control: memset called through ctypes.pythonapi (a PyDLL) keeps the GIL for the whole write.
    memset = ctypes.pythonapi.memset
    memset.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t)
    dst = np.zeros(SIZE, np.uint8)
    assert not saw_half_written(dst, lambda: memset(dst.ctypes.data, 1, SIZE))
