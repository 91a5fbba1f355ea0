"""The compiled module releases the GIL while it moves or checks a large tensor, so that other Triton
instances and Python threads in the process keep running meanwhile; small calls keep it (letting go and
taking it back would cost more than the copy).

Counted, not raced: the module counts the sections it runs without the GIL (``_gil_releases``), so the
evidence does not depend on how fast this machine is or what else runs on it.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

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
