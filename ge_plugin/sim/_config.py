"""The simulator's knobs, read once by ``acl.init`` from the environment and the init JSON's own section.

Environment (all optional): ``GE_PLUGIN_SIM_DEVICES`` (8), ``GE_PLUGIN_SIM_DEVICE_MEMORY_MB`` (32768, per
device, accounted, never pre-allocated), ``GE_PLUGIN_SIM_SOC`` (Ascend910B3), ``GE_PLUGIN_SIM_THREADS``
(onnxruntime intra-op threads per model, 1), ``GE_PLUGIN_SIM_REPORT_DIR``, ``GE_PLUGIN_SIM_FAULTS`` (see
``faults``), and the device-time model (see ``device_time``): ``GE_PLUGIN_SIM_EXECUTE_LATENCY_MS`` (device
milliseconds per execute: ``5``, ``1=78;4=145;8=220`` by gear, ``40+18*rows``, or a table plus one of those),
``GE_PLUGIN_SIM_TIMING_ONLY`` (``1``: skip computing outputs) and ``GE_PLUGIN_SIM_DEVICE_LOCK_DIR`` (where the
per-device lock files that serialise executes across processes live). The JSON passed to ``acl.init`` may
carry a ``"ge_plugin_sim"`` object with the same settings (``devices``, ``device_memory_mb``,
``soc_version``, ``threads``, ``report_dir``, ``faults``, ``execute_latency_ms``, ``timing_only``,
``device_lock_dir``); it wins over the environment. Real CANN ignores that section.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import attrs

from ge_plugin.sim import device_time, faults
from ge_plugin.sim.device_time import LatencyProfile

SECTION = "ge_plugin_sim"
MAX_DEVICES = 64


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


def load(environ: Mapping[str, str], section: object | None) -> SimConfig:
    """The configuration for one ``acl.init``; ValueError names the variable or key that is wrong."""
    fields: dict[str, Any] = {}
    env = {k: v for k, v in environ.items() if k.startswith("GE_PLUGIN_SIM_") and v.strip() != ""}
    if "GE_PLUGIN_SIM_DEVICES" in env:
        fields["devices"] = _int("GE_PLUGIN_SIM_DEVICES", env["GE_PLUGIN_SIM_DEVICES"], 1, MAX_DEVICES)
    if "GE_PLUGIN_SIM_DEVICE_MEMORY_MB" in env:
        mb = _int("GE_PLUGIN_SIM_DEVICE_MEMORY_MB", env["GE_PLUGIN_SIM_DEVICE_MEMORY_MB"], 1, 1 << 30)
        fields["device_memory_bytes"] = mb << 20
    if "GE_PLUGIN_SIM_SOC" in env:
        fields["soc_version"] = env["GE_PLUGIN_SIM_SOC"].strip()
    if "GE_PLUGIN_SIM_THREADS" in env:
        fields["threads"] = _int("GE_PLUGIN_SIM_THREADS", env["GE_PLUGIN_SIM_THREADS"], 1, 256)
    if "GE_PLUGIN_SIM_REPORT_DIR" in env:
        fields["report_dir"] = env["GE_PLUGIN_SIM_REPORT_DIR"]
    if "GE_PLUGIN_SIM_FAULTS" in env:
        try:
            fields["faults"] = tuple(faults.parse_env(env["GE_PLUGIN_SIM_FAULTS"]))
        except ValueError as exc:
            raise ValueError(f"GE_PLUGIN_SIM_FAULTS: {exc}") from None
    if "GE_PLUGIN_SIM_EXECUTE_LATENCY_MS" in env:
        fields["execute_latency"] = device_time.parse_text(
            env["GE_PLUGIN_SIM_EXECUTE_LATENCY_MS"], "GE_PLUGIN_SIM_EXECUTE_LATENCY_MS"
        )
    if "GE_PLUGIN_SIM_TIMING_ONLY" in env:
        fields["timing_only"] = _flag("GE_PLUGIN_SIM_TIMING_ONLY", env["GE_PLUGIN_SIM_TIMING_ONLY"])
    if "GE_PLUGIN_SIM_DEVICE_LOCK_DIR" in env:
        fields["device_lock_dir"] = _directory(
            "GE_PLUGIN_SIM_DEVICE_LOCK_DIR", env["GE_PLUGIN_SIM_DEVICE_LOCK_DIR"]
        )
    if section is not None:
        fields.update(_section(section))
    return SimConfig(**fields)


def _section(section: object) -> dict[str, Any]:
    where = f'"{SECTION}"'
    if not isinstance(section, Mapping):
        raise ValueError(f"{where} must be an object, not {type(section).__name__}")
    known = {
        "devices",
        "device_memory_mb",
        "soc_version",
        "threads",
        "report_dir",
        "faults",
        "execute_latency_ms",
        "timing_only",
        "device_lock_dir",
    }
    unknown = set(section) - known
    if unknown:
        raise ValueError(
            f"{where}: unknown keys {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}"
        )
    fields: dict[str, Any] = {}
    if "devices" in section:
        fields["devices"] = _int(f"{where}.devices", section["devices"], 1, MAX_DEVICES)
    if "device_memory_mb" in section:
        fields["device_memory_bytes"] = (
            _int(f"{where}.device_memory_mb", section["device_memory_mb"], 1, 1 << 30) << 20
        )
    if "soc_version" in section:
        if not isinstance(section["soc_version"], str) or not section["soc_version"]:
            raise ValueError(f"{where}.soc_version must be a non-empty string")
        fields["soc_version"] = section["soc_version"]
    if "threads" in section:
        fields["threads"] = _int(f"{where}.threads", section["threads"], 1, 256)
    if "report_dir" in section:
        if not isinstance(section["report_dir"], str):
            raise ValueError(f"{where}.report_dir must be a string")
        fields["report_dir"] = section["report_dir"]
    if "faults" in section:
        rules = section["faults"]
        if not isinstance(rules, list):
            raise ValueError(f"{where}.faults must be a list of {{'api', 'code', 'nth'|'every'}} objects")
        fields["faults"] = tuple(rules)
    if "execute_latency_ms" in section:
        fields["execute_latency"] = device_time.parse_json(
            section["execute_latency_ms"], f"{where}.execute_latency_ms"
        )
    if "timing_only" in section:
        if not isinstance(section["timing_only"], bool):
            raise ValueError(f"{where}.timing_only must be true or false")
        fields["timing_only"] = section["timing_only"]
    if "device_lock_dir" in section:
        fields["device_lock_dir"] = _directory(f"{where}.device_lock_dir", section["device_lock_dir"])
    return fields


def from_process() -> SimConfig:
    """Environment only; for ``get_soc_name`` and friends before a config exists."""
    try:
        return load(os.environ, None)
    except ValueError:
        return SimConfig()
