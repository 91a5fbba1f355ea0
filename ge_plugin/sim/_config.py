"""The simulator's knobs, read once by ``acl.init`` from the environment and the init JSON's own section.

Environment (all optional): ``GE_PLUGIN_SIM_DEVICES`` (8), ``GE_PLUGIN_SIM_DEVICE_MEMORY_MB`` (32768, per
device, accounted, never pre-allocated), ``GE_PLUGIN_SIM_SOC`` (Ascend910B3), ``GE_PLUGIN_SIM_THREADS``
(onnxruntime intra-op threads per model, 1), ``GE_PLUGIN_SIM_REPORT_DIR``, ``GE_PLUGIN_SIM_FAULTS`` (see
``faults``), and the device-time model (see ``device_time``): ``GE_PLUGIN_SIM_EXECUTE_LATENCY_MS`` (device
milliseconds per execute: ``5``, ``1=78;4=145;8=220`` by gear, ``40+18*rows``, or a table plus one of those),
``GE_PLUGIN_SIM_TIMING_ONLY`` (``1``: skip computing outputs), ``GE_PLUGIN_SIM_RUN_MODE`` (``ACL_HOST``, a PCIe
card in a server, or ``ACL_DEVICE``, the RC boards where the program runs on the device and its memory is
host memory; by default ``ACL_DEVICE`` for the SoCs of those boards, ``Ascend310B*``, else ``ACL_HOST``), ``GE_PLUGIN_SIM_DEVICE_LOCK_DIR`` (where the
per-device lock files that serialise executes across processes live) and ``GE_PLUGIN_SIM_CHECK`` (``1``: the
sanitizer reports, see ``sanitizer``). The JSON passed to ``acl.init`` may carry a ``"ge_plugin_sim"``
object with the same settings (``devices``, ``device_memory_mb``, ``soc_version``, ``threads``,
``report_dir``, ``faults``, ``execute_latency_ms``, ``timing_only``, ``device_lock_dir``, ``check``,
``run_mode``); it
wins over the environment. Real CANN ignores that section.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ge_plugin.sim import device_time, faults
from ge_plugin.sim.device_time import LatencyProfile

SECTION = "ge_plugin_sim"
MAX_DEVICES = 64
#: the run modes by aclrtRunMode value: ACL_DEVICE (0), ACL_HOST (1)
RUN_MODES = ("ACL_DEVICE", "ACL_HOST")
#: the SoCs of the boards where programs run on the device (Atlas 200I/500 A2)
RC_SOCS = ("Ascend310B",)


@attrs.frozen
class SimConfig:
    devices: int = 8
    device_memory_bytes: int = 32768 << 20
    soc_version: str = "Ascend910B3"
    threads: int = 1
    report_dir: str | None = None
    faults: tuple[Mapping[str, Any], ...] = ()
    #: device time per execute; None: not configured (a profile set from Python stays)
    execute_latency: LatencyProfile | None = None
    #: skip computing outputs; None: not configured
    timing_only: bool | None = None
    device_lock_dir: str = attrs.field(factory=device_time.default_lock_dir)
    #: the sanitizer's reporting; None: not configured (as enabled from Python, or by the environment)
    check: bool | None = None
    #: "ACL_HOST" or "ACL_DEVICE"; None: as the SoC says (see :attr:`device_run_mode`)
    run_mode: str | None = None

    @property
    def device_run_mode(self) -> bool:
        """Whether the program runs on the device (pyACL's RC mode, ``ACL_DEVICE``): the Atlas 200I/500 A2
        boards' SoCs (``Ascend310B*``) unless ``run_mode`` says otherwise."""
        if self.run_mode is not None:
            return self.run_mode == RUN_MODES[0]
        return self.soc_version.startswith(RC_SOCS)


def _int(name: str, value: object, lo: int, hi: int) -> int:
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError
        number = int(value) if not isinstance(value, float) or value.is_integer() else None
        if number is None:
            raise ValueError
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r}: expected an integer from {lo} to {hi}") from None
    if not lo <= number <= hi:
        raise ValueError(f"{name}={value!r}: expected an integer from {lo} to {hi}")
    return number


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _flag(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"{name}={value!r}: expected true or false (1/0)")


def _directory(name: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a directory path")
    return os.path.abspath(value.strip())


def _non_empty_str(name: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string")
    return value


def _str(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string")
    return value


def _bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false")
    return value


def _run_mode(name: str, value: object) -> str:
    text = str(value).strip().upper() if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    aliases = {"0": "ACL_DEVICE", "DEVICE": "ACL_DEVICE", "1": "ACL_HOST", "HOST": "ACL_HOST"}
    text = aliases.get(text, text)
    if text not in RUN_MODES:
        raise ValueError(f"{name}={value!r}: expected ACL_HOST (1) or ACL_DEVICE (0)")
    return text


def _env_faults(name: str, text: str) -> tuple[Any, ...]:
    try:
        return tuple(faults.parse_env(text))
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _json_faults(name: str, rules: object) -> tuple[Any, ...]:
    if not isinstance(rules, list):
        raise ValueError(f"{name} must be a list of {{'api', 'code', 'nth'|'every'}} objects")
    return tuple(rules)


def _memory_bytes(name: str, value: object) -> int:
    return _int(name, value, 1, 1 << 30) << 20


@attrs.frozen
class _Knob:
    """One setting: the SimConfig field it sets, its environment variable, and how each form is read
    (``(variable or "section.key", value) -> value``, ValueError naming it)."""

    field: str
    env: str
    from_env: Callable[[str, str], Any]
    from_json: Callable[[str, Any], Any]


#: the ``ge_plugin_sim`` key of each setting
_KNOBS: dict[str, _Knob] = {
    "devices": _Knob(
        "devices",
        "GE_PLUGIN_SIM_DEVICES",
        functools.partial(_int, lo=1, hi=MAX_DEVICES),
        functools.partial(_int, lo=1, hi=MAX_DEVICES),
    ),
    "device_memory_mb": _Knob(
        "device_memory_bytes", "GE_PLUGIN_SIM_DEVICE_MEMORY_MB", _memory_bytes, _memory_bytes
    ),
    "soc_version": _Knob(
        "soc_version", "GE_PLUGIN_SIM_SOC", lambda _name, text: text.strip(), _non_empty_str
    ),
    "threads": _Knob(
        "threads",
        "GE_PLUGIN_SIM_THREADS",
        functools.partial(_int, lo=1, hi=256),
        functools.partial(_int, lo=1, hi=256),
    ),
    "report_dir": _Knob("report_dir", "GE_PLUGIN_SIM_REPORT_DIR", lambda _name, text: text, _str),
    "faults": _Knob("faults", "GE_PLUGIN_SIM_FAULTS", _env_faults, _json_faults),
    "execute_latency_ms": _Knob(
        "execute_latency",
        "GE_PLUGIN_SIM_EXECUTE_LATENCY_MS",
        lambda name, text: device_time.parse_text(text, name),
        lambda name, value: device_time.parse_json(value, name),
    ),
    "timing_only": _Knob("timing_only", "GE_PLUGIN_SIM_TIMING_ONLY", _flag, _bool),
    "device_lock_dir": _Knob("device_lock_dir", "GE_PLUGIN_SIM_DEVICE_LOCK_DIR", _directory, _directory),
    "check": _Knob("check", "GE_PLUGIN_SIM_CHECK", _flag, _bool),
    "run_mode": _Knob("run_mode", "GE_PLUGIN_SIM_RUN_MODE", _run_mode, _run_mode),
}


def load(environ: Mapping[str, str], section: object | None) -> SimConfig:
    """The configuration for one ``acl.init``; ValueError names the variable or key that is wrong."""
    fields: dict[str, Any] = {}
    for knob in _KNOBS.values():
        text = environ.get(knob.env, "")
        if text.strip():
            fields[knob.field] = knob.from_env(knob.env, text)
    if section is not None:
        fields.update(_section(section))
    return SimConfig(**fields)


def _section(section: object) -> dict[str, Any]:
    where = f'"{SECTION}"'
    if not isinstance(section, Mapping):
        raise ValueError(f"{where} must be an object, not {type(section).__name__}")
    unknown = set(section) - set(_KNOBS)
    if unknown:
        raise ValueError(
            f"{where}: unknown keys {', '.join(sorted(unknown))}; known: {', '.join(sorted(_KNOBS))}"
        )
    return {
        knob.field: knob.from_json(f"{where}.{key}", section[key])
        for key, knob in _KNOBS.items()
        if key in section
    }
