"""What the simulator has done, per device and for pinned host memory, so tests can prove resource claims.

"No leak after unload" is ``live_bytes`` back where it was; "no allocation per request after warm-up" is
``mallocs`` unchanged across requests. Counters are plain attributes bumped without locks (the GIL keeps an
integer ``+=`` whole in practice); allocation counters are updated under the arena lock anyway.

``live_*`` describe memory that exists, so :func:`reset` keeps them (and restarts ``peak_bytes`` from them);
every other counter restarts at 0. ``reclaimed_*`` count allocations the user never freed that
``acl.rt.reset_device`` or ``acl.finalize`` released on their behalf: a clean program keeps them at 0.

With ``GE_PLUGIN_SIM_REPORT_DIR=DIR`` the simulator writes ``DIR/sim-<pid>-<seq>.json`` holding
:func:`snapshot` when ``acl.finalize()`` runs (taken before finalize releases anything), or at interpreter
exit if the process initialised pyACL and never finalized, so a test can inspect a process it cannot reach
(a Triton Python-backend stub).
"""

from __future__ import annotations

import collections
import itertools
import json
import os
from pathlib import Path
from typing import Any

DIRECTIONS = ("h2h", "h2d", "d2h", "d2d")
#: how many of the latest compute windows a device keeps (for tests and utilisation plots; busy_ms has all)
COMPUTE_INTERVALS = 256


class MemoryCounters:
    """Allocation accounting: of pinned host memory (``acl.rt.malloc_host``, which belongs to no device), and
    the part of a device's counters about its memory. Memory freed by a teardown (reset_device, finalize)
    rather than by the user is *reclaimed*."""

    __slots__ = (
        "frees",
        "live_allocations",
        "live_bytes",
        "mallocs",
        "peak_bytes",
        "reclaimed_allocations",
        "reclaimed_bytes",
    )

    def __init__(self) -> None:
        self.live_bytes = 0
        self.live_allocations = 0
        self.clear()

    def clear(self) -> None:
        """Restart the counts; live memory stays counted."""
        self.mallocs = 0
        self.frees = 0
        self.peak_bytes = self.live_bytes
        self.reclaimed_allocations = 0
        self.reclaimed_bytes = 0

    def allocated(self, nbytes: int) -> None:
        self.mallocs += 1
        self.live_allocations += 1
        self.live_bytes += nbytes
        if self.live_bytes > self.peak_bytes:
            self.peak_bytes = self.live_bytes

    def freed(self, nbytes: int, *, reclaimed: bool = False) -> None:
        self.live_allocations -= 1
        self.live_bytes -= nbytes
        if reclaimed:
            self.reclaimed_allocations += 1
            self.reclaimed_bytes += nbytes
        else:
            self.frees += 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "mallocs": self.mallocs,
            "frees": self.frees,
            "live_bytes": self.live_bytes,
            "live_allocations": self.live_allocations,
            "reclaimed_allocations": self.reclaimed_allocations,
            "reclaimed_bytes": self.reclaimed_bytes,
        }


class DeviceCounters(MemoryCounters):
    """Counters of one simulated device: its memory, copies, executes and model loads."""

    __slots__ = (
        "busy_s",
        "compute_intervals",
        "device",
        "executes",
        "executes_by_gear",
        "loads",
        "memcpy_bytes",
        "memcpy_calls",
        "model_bytes",
        "unloads",
    )

    def __init__(self, device: int):
        self.device = device
        self.model_bytes = 0
        super().__init__()

    def clear(self) -> None:
        super().clear()
        self.memcpy_calls = dict.fromkeys(DIRECTIONS, 0)
        self.memcpy_bytes = dict.fromkeys(DIRECTIONS, 0)
        self.executes = 0
        self.executes_by_gear: dict[str, int] = {}
        self.busy_s = 0.0
        self.compute_intervals: collections.deque[tuple[float, float]] = collections.deque(
            maxlen=COMPUTE_INTERVALS
        )
        self.loads = 0
        self.unloads = 0

    def copied(self, direction: str, nbytes: int) -> None:
        self.memcpy_calls[direction] += 1
        self.memcpy_bytes[direction] += nbytes

    def model_memory(self, nbytes: int) -> None:
        """Work and weight memory the runtime holds for loaded models (``load_from_file``; the parts of
        ``load_from_file_with_mem`` given as 0); negative when a model is unloaded."""
        self.model_bytes = max(0, self.model_bytes + nbytes)

    def computed(self, start: float, end: float) -> None:
        """One execute held the device from ``start`` to ``end`` (``time.monotonic()``)."""
        self.busy_s += end - start
        self.compute_intervals.append((start, end))

    def executed(self, gear: str) -> None:
        self.executes += 1
        self.executes_by_gear[gear] = self.executes_by_gear.get(gear, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            **super().as_dict(),
            "peak_bytes": self.peak_bytes,
            "memcpy_calls": dict(self.memcpy_calls),
            "memcpy_bytes": dict(self.memcpy_bytes),
            "executes": self.executes,
            "executes_by_gear": dict(self.executes_by_gear),
            "loads": self.loads,
            "unloads": self.unloads,
            "model_bytes": self.model_bytes,
            "busy_ms": self.busy_s * 1000.0,
            "compute_intervals": [list(window) for window in self.compute_intervals],
        }


_devices: list[DeviceCounters] = []
host_pinned = MemoryCounters()
_report_seq = itertools.count()


def device(index: int) -> DeviceCounters:
    """The counters of device ``index``, created on first use (they outlive acl.finalize)."""
    while len(_devices) <= index:
        _devices.append(DeviceCounters(len(_devices)))
    return _devices[index]


def snapshot() -> dict[str, Any]:
    """``{"devices": [per-device dict, ...], "host_pinned": {...}}``, a deep copy safe to keep."""
    return {"devices": [d.as_dict() for d in _devices], "host_pinned": host_pinned.as_dict()}


def reset() -> None:
    """Restart every cumulative counter at 0; live memory stays counted (it still exists)."""
    for d in _devices:
        d.clear()
    host_pinned.clear()


def forget() -> None:
    """Drop every counter, live ones included; only for ``_state.reset_for_tests`` after it freed everything."""
    _devices.clear()
    host_pinned.live_bytes = 0
    host_pinned.live_allocations = 0
    host_pinned.clear()


def write_report(directory: str | os.PathLike[str], data: dict[str, Any] | None = None) -> Path:
    """Write ``data`` (default: a fresh snapshot) to ``directory/sim-<pid>-<seq>.json``; returns the path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"sim-{os.getpid()}-{next(_report_seq)}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(snapshot() if data is None else data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path
