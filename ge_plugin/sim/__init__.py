"""A CPU simulator of pyACL: ``from ge_plugin.sim import acl`` behaves like ``import acl`` on an Ascend host.

Its models are sim OM files that ``ge-plugin atc`` builds from ONNX with ATC's own flags; onnxruntime
computes them. ``python -m ge_plugin.sim run SCRIPT`` runs an unmodified pyACL program against it, and
``run --check`` runs it under the simulator's sanitizer (``ge_plugin.sim.sanitizer``). Tests read what it
did through :func:`snapshot` (see ``ge_plugin.sim.counters``) and make calls fail on purpose through
``ge_plugin.sim.faults``. What is simulated and what is not: docs/simulator.md.

Importing this package imports neither onnxruntime nor the simulated ``acl`` module.
"""

from __future__ import annotations

import sys
from types import ModuleType

from ge_plugin.sim.counters import reset as reset_counters
from ge_plugin.sim.counters import snapshot

__all__ = ["install", "reset_counters", "snapshot"]


def install() -> ModuleType:
    """Make ``import acl`` resolve to the simulator in this process; returns the module."""
    from ge_plugin.sim import acl

    sys.modules["acl"] = acl
    return acl
