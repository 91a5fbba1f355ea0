"""Picks the fast-path implementation: the compiled ``_fastpath`` or its pure-Python twin.

``GE_PLUGIN_NO_EXTENSIONS=1`` (or a non-CPython interpreter) forces the twin; a missing or broken build
falls back to it. Both expose the same names and signatures, so nothing else knows which one runs:
``IMPLEMENTATION`` says ("c" or "py").
"""

from __future__ import annotations

import os
import platform
from typing import TYPE_CHECKING

NO_EXTENSIONS = os.environ.get("GE_PLUGIN_NO_EXTENSIONS", "") not in ("", "0") or (
    platform.python_implementation() != "CPython"
)

if TYPE_CHECKING or NO_EXTENSIONS:  # type checkers read the twin, whose surface _fastpath.pyi mirrors
    from ge_plugin._fastpath_py import *  # noqa: F403
else:
    try:
        from ge_plugin._fastpath import *  # noqa: F403
    except ImportError:  # pragma: no cover - only without a build
        from ge_plugin._fastpath_py import *  # noqa: F403
