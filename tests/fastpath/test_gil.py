"""The compiled module releases the GIL while it moves or checks a large tensor, so that other Triton
instances and Python threads in the process keep running meanwhile; small calls keep it (letting go and
taking it back would cost more than the copy).

Counted, not raced: the module counts the sections it runs without the GIL (``_gil_releases``), so the
evidence does not depend on how fast this machine is or what else runs on it.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ge_plugin.fastpath import NO_EXTENSIONS

LARGE = 1 << 20
SMALL = 1 << 10

pytestmark = [
    pytest.mark.c_extension,
    pytest.mark.skipif(NO_EXTENSIONS, reason="GE_PLUGIN_NO_EXTENSIONS=1: no compiled module"),
]


def calls(fp: Any, size: int) -> dict[str, Callable[[], Any]]:
    dst = np.zeros(size, np.uint8)
    ones = np.ones(size, np.uint8)
    staging = np.zeros(size, np.uint8)
    spec = fp.TensorSpec("x", "uint8", (-1, -1), (1, size), value_range=(0, 1))
    return {
        "gather": lambda: fp.gather(dst, (1, size), "uint8", [ones[None]], "uint8", 0),
        "scatter": lambda: fp.scatter(staging, (1, size), "uint8", "uint8", [1], [(size,)]),
        "validate a range": lambda: fp.validate([spec], {"x": ones[None]}),
    }


@pytest.mark.parametrize("name", ["gather", "scatter", "validate a range"])
def test_large_work_runs_without_the_gil_and_small_work_keeps_it(name: str) -> None:
    compiled = importlib.import_module("ge_plugin._fastpath")
    large, small = calls(compiled, LARGE)[name], calls(compiled, SMALL)[name]
    before = compiled._gil_releases()
    small()
    assert compiled._gil_releases() == before
    large()
    assert compiled._gil_releases() == before + 1


@pytest.mark.parametrize("name", ["gather", "scatter", "validate a range"])
def test_every_call_draws_the_gil_line_at_the_same_size(name: str) -> None:
    """At the threshold every call lets the GIL go, one byte below it every call keeps it."""
    compiled = importlib.import_module("ge_plugin._fastpath")
    line = compiled._GIL_RELEASE_BYTES
    at, below = calls(compiled, line)[name], calls(compiled, line - 1)[name]
    before = compiled._gil_releases()
    below()
    assert compiled._gil_releases() == before
    at()
    assert compiled._gil_releases() == before + 1


#: a gather whose caller empties its list of sources from another thread while the copy runs without the GIL:
#: the list held the only reference to each source, so numpy hands their pages back to the OS mid-copy
_EMPTIED_MID_COPY = """
import threading
import numpy as np
from ge_plugin import _fastpath as fp

n, row = 4, 1 << 20  # 4 MiB of fp32 per source: each one its own mapping, unmapped when freed
srcs = [np.full((1, row), k + 1, np.float32) for k in range(n)]
dst = np.zeros(n * row * 4, np.uint8)
before = fp._gil_releases()

def empty_the_list_once_the_copy_runs():
    while fp._gil_releases() == before:
        pass
    srcs.clear()

thread = threading.Thread(target=empty_the_list_once_the_copy_runs)
thread.start()
fp.gather(dst, (n, row), "fp32", srcs, "fp32", 0)
thread.join()
print(" ".join(str(float(x)) for x in dst.view(np.float32).reshape(n, row)[:, -1]))
"""


def test_gather_holds_its_sources_while_the_caller_changes_the_list() -> None:
    """The pointers gather copies from without the GIL are its own references, not the caller's list's."""
    run = subprocess.run(
        [sys.executable, "-c", _EMPTIED_MID_COPY], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, f"gather crashed (exit {run.returncode}): {run.stderr[-2000:]}"
    assert run.stdout.split() == ["1.0", "2.0", "3.0", "4.0"]
