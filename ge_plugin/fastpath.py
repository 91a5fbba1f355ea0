"""Picks the fast-path implementation: the compiled ``_fastpath`` or its pure-Python twin.

``GE_PLUGIN_NO_EXTENSIONS=1`` (or a non-CPython interpreter) forces the twin; a missing or broken build
falls back to it. Both expose the same names and signatures, so nothing else knows which one runs:
``IMPLEMENTATION`` says ("c" or "py"), and ``FALLBACK_REASON`` why the twin runs when the compiled module
was wanted. A broken build serves 20-49x slower on small requests, so the backend logs both at start-up,
the metrics carry them, and ``ge-plugin doctor`` checks them.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import platform
from types import ModuleType
from typing import TYPE_CHECKING

NO_EXTENSIONS = os.environ.get("GE_PLUGIN_NO_EXTENSIONS", "") not in ("", "0") or (
    platform.python_implementation() != "CPython"
)

#: why the twin runs although the compiled module was asked for ("" when the compiled module runs, or when
#: the twin was chosen on purpose)
FALLBACK_REASON = ""

if TYPE_CHECKING or NO_EXTENSIONS:  # type checkers read the twin, whose surface _fastpath.pyi mirrors
    from ge_plugin._fastpath_py import *  # noqa: F403
else:
    try:
        from ge_plugin._fastpath import *  # noqa: F403
    except ImportError as exc:  # a missing or broken build
        from ge_plugin._fastpath_py import *  # noqa: F403

        FALLBACK_REASON = f"the compiled ge_plugin._fastpath did not load ({exc})"


def describe() -> str:
    """One line for logs: which implementation runs, and why the twin does when it does."""
    if IMPLEMENTATION == "c":  # noqa: F405
        return "compiled (c)"
    if FALLBACK_REASON:
        return f"pure-Python twin (py), 20-49x slower on small requests: {FALLBACK_REASON}"
    if platform.python_implementation() != "CPython":
        return f"pure-Python twin (py): {platform.python_implementation()} runs only the twin"
    return "pure-Python twin (py): GE_PLUGIN_NO_EXTENSIONS is set"


@dataclasses.dataclass(frozen=True)
class Implementation:
    """One of the two implementations, by name, imported only when asked for.

    The property tests and the micro-benchmarks run every case on both; listing them must not import the
    compiled module, so that a missing build fails only what uses it, not the collection of the rest.
    """

    name: str  # "c" or "py", as IMPLEMENTATION says
    module_name: str

    def load(self) -> ModuleType:
        return importlib.import_module(self.module_name)

    def __str__(self) -> str:
        return self.name


COMPILED = Implementation("c", "ge_plugin._fastpath")
TWIN = Implementation("py", "ge_plugin._fastpath_py")
