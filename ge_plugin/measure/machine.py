"""What the numbers were measured on, and the label every figure carries: the CPU simulator, never an NPU."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def cores() -> int:
    """CPUs this process may run on (a container's limit, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def memory_gib(meminfo: Path = Path("/proc/meminfo")) -> float | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def describe(
    *, tritonserver: str, perf_analyzer: str, load_average: tuple[float, float, float] | None = None
) -> dict[str, Any]:
    """The machine and the software versions; ``load_average`` (1, 5, 15 min) as it was when the run began,
    because other users of a shared host move the numbers."""
    import numpy
    import onnxruntime

    from ge_plugin import __version__, fastpath

    return {
        "cpu": cpu_model(),
        "cores": cores(),
        "memory_gib": memory_gib(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "onnxruntime": onnxruntime.__version__,
        "ge_plugin": __version__,
        "fastpath": fastpath.IMPLEMENTATION,
        "tritonserver": tritonserver,
        "perf_analyzer": perf_analyzer,
        "load_average": [round(x, 2) for x in load_average] if load_average else None,
    }


def label(core_count: int) -> str:
    """``CPU simulator (timing-only), 2 cores``: on every table, plot and JSON file, so no figure passes for
    NPU time."""
    return f"CPU simulator (timing-only), {core_count} cores"
