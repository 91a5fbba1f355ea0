"""The simulator's knobs, read once by ``acl.init`` from the environment and the init JSON's own section.

Environment (all optional): ``GE_PLUGIN_SIM_DEVICES`` (8), ``GE_PLUGIN_SIM_DEVICE_MEMORY_MB`` (32768, per
device, accounted, never pre-allocated), ``GE_PLUGIN_SIM_SOC`` (Ascend910B3), ``GE_PLUGIN_SIM_THREADS``
(onnxruntime intra-op threads per model, 1), ``GE_PLUGIN_SIM_REPORT_DIR``, ``GE_PLUGIN_SIM_FAULTS`` and
``GE_PLUGIN_SIM_EXECUTE_LATENCY_MS`` (see ``faults``). The JSON passed to ``acl.init`` may carry a
``"ge_plugin_sim"`` object with the same settings (``devices``, ``device_memory_mb``, ``soc_version``,
``threads``, ``report_dir``, ``faults``, ``execute_latency_ms``); it wins over the environment. Real CANN
ignores that section.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import attrs

from ge_plugin.sim import faults

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
    execute_latency_ms: float | None = None


def _int(name: str, value: object, lo: int, hi: int) -> int:
    try:
        if isinstance(value, bool):
            raise ValueError
        number = int(value) if not isinstance(value, float) or value.is_integer() else None
        if number is None:
            raise ValueError
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r}: expected an integer from {lo} to {hi}") from None
    if not lo <= number <= hi:
        raise ValueError(f"{name}={value!r}: expected an integer from {lo} to {hi}")
    return number


def _latency(name: str, value: object) -> float:
    try:
        ms = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r}: expected milliseconds >= 0") from None
    if isinstance(value, bool) or not ms >= 0:
        raise ValueError(f"{name}={value!r}: expected milliseconds >= 0")
    return ms


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
        fields["execute_latency_ms"] = _latency(
            "GE_PLUGIN_SIM_EXECUTE_LATENCY_MS", env["GE_PLUGIN_SIM_EXECUTE_LATENCY_MS"]
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
        fields["execute_latency_ms"] = _latency(f"{where}.execute_latency_ms", section["execute_latency_ms"])
    return fields


def from_process() -> SimConfig:
    """Environment only; for ``get_soc_name`` and friends before a config exists."""
    try:
        return load(os.environ, None)
    except ValueError:
        return SimConfig()
