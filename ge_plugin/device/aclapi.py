"""Resolves pyACL once: the real ``acl`` of CANN on an Ascend host, or ge-plugin's CPU simulator.

``GE_PLUGIN_DEVICE`` chooses: ``ascend`` (real ``acl``, an error if it is missing), ``sim`` (the simulator)
or ``auto`` (default: real ``acl`` if it imports, else the simulator). The choice is logged once. This
module is the only place in ge-plugin's serving path that imports ``acl``; everything above the device layer
talks to the objects in ``ge_plugin.device``. (The bench's naive baseline imports it itself, as the
hand-written Python-backend code it stands for does.)
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from types import ModuleType

from ge_plugin.errors import ConfigError

log = logging.getLogger("ge_plugin.device")

CHOICES = ("auto", "ascend", "sim")

_lock = threading.Lock()
_acl: ModuleType | None = None
_kind = ""
#: how the choice came about, for ge-plugin doctor and the logs
_detail = ""


def acl() -> ModuleType:
    """The pyACL module in use (imported on first call)."""
    if _acl is None:
        _resolve()
    return _acl  # type: ignore[return-value]


def kind() -> str:
    """``"ascend"`` or ``"sim"``: which pyACL :func:`acl` returns."""
    if _acl is None:
        _resolve()
    return _kind


def describe() -> str:
    """``"ascend: ..."`` or ``"sim: ..."``: which pyACL runs, where from, and why."""
    kind()
    return f"{_kind}: {_detail}"


def _resolve() -> None:
    global _acl, _kind, _detail
    with _lock:
        if _acl is not None:
            return
        choice = os.environ.get("GE_PLUGIN_DEVICE", "auto").strip().lower() or "auto"
        if choice not in CHOICES:
            raise ConfigError(f"GE_PLUGIN_DEVICE={choice!r}: expected one of {', '.join(CHOICES)}")
        module = None
        missing = ""
        if choice in ("auto", "ascend"):
            try:
                module = importlib.import_module("acl")
                kind = "ascend"
            except ImportError as exc:
                missing = str(exc)
                if choice == "ascend":
                    raise ConfigError(
                        "GE_PLUGIN_DEVICE=ascend but pyACL cannot be imported "
                        f"({exc}); source the CANN set_env.sh first"
                    ) from exc
        simulated = getattr(module, "__name__", "") == "ge_plugin.sim.acl"
        if choice == "ascend" and simulated:  # `python -m ge_plugin.sim run` puts the simulator under `acl`
            raise ConfigError(
                "GE_PLUGIN_DEVICE=ascend but `import acl` gives ge-plugin's simulator, not CANN's pyACL"
            )
        if module is None or simulated:
            module = importlib.import_module("ge_plugin.sim.acl")
            kind = "sim"
        _acl, _kind = module, kind
        if kind == "ascend":
            _detail = f"CANN's pyACL from {getattr(module, '__file__', '?')} (GE_PLUGIN_DEVICE={choice})"
        elif choice == "sim":
            _detail = "the ge-plugin CPU simulator, as GE_PLUGIN_DEVICE=sim asks"
        else:
            _detail = (
                f"the ge-plugin CPU simulator: `import acl` failed ({missing or 'it is the simulator'}); on an "
                "Ascend host, source CANN's set_env.sh so that pyACL imports"
            )
        if kind == "sim":
            log.info("pyACL: using the ge-plugin CPU simulator (GE_PLUGIN_DEVICE=%s)", choice)
        else:
            log.info("pyACL: using CANN's acl from %s", getattr(module, "__file__", "?"))
