"""The simulated device's time: how long an execute keeps the device busy, and one compute queue per device.

On an Ascend host the NPU computes beside the CPU: an execute costs the host only its copies and the
synchronize, and two model instances (or two Triton stub processes) on one card share its AI cores, so their
executes run one after the other. The simulator models that:

- **Latency per gear.** A profile gives each execute's device time from its gear: a table by gear label
  (``{"1": 78, "4": 145, "8": 220}``, labels as ``executes_by_gear`` names them: the batch, the dims gear's
  values joined by commas, ``static``), a formula ``a + b·rows`` (rows: the first dim of the first input at
  that gear) for gears the table does not list, or one constant. The execute holds the device for that long,
  waiting without the GIL; the simulator's own computation (onnxruntime) runs inside that window, and only
  if it takes longer does the execute take longer.
- **Timing only.** The simulator can skip computing and every data movement: outputs are not written,
  copies and memsets move nothing, streams are queues of records settled by this clock (``streams``), so an
  execute costs the host a few microseconds of calls whatever its tensors. Off by default; numerics need
  it off.
- **One compute queue per device.** Executes on one device id run one at a time across streams, model
  instances and processes, first come, first served. The device's clock is a small file,
  ``<lock dir>/device-<id>.lock`` (default ``/dev/shm/ge-plugin-sim-<uid>/``), mapped into memory: when
  the device is busy until, in ``time.monotonic()`` seconds (one clock for every process of the host). A
  timing-only execute books its window there under ``flock`` when it is queued (:func:`reserve`), so no
  lock is held while the device is busy; a computing one holds the file's ``flock`` (and an in-process
  lock) while it computes, after the windows already booked, and books its own when it ends
  (:func:`occupy`). Copies and everything else overlap; other device ids do not wait.

Each execute's window is counted per device (``busy_ms``, the recent ``compute_intervals`` in monotonic
seconds: one clock for every process of the host), so utilisation can be derived from the counters.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import math
import mmap
import os
import re
import struct
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping

import attrs

from ge_plugin.sim import counters

log = logging.getLogger("ge_plugin.sim")

_LABEL = re.compile(r"^(static|\d+(,\d+)*)$")
_FORMULA = re.compile(
    r"^(?:(?P<a>[0-9.]+(?:[eE][-+]?\d+)?)\s*\+\s*)?(?P<b>[0-9.]+(?:[eE][-+]?\d+)?)\s*\*\s*rows$"
)


def _own_copy(table: Mapping[str, float]) -> dict[str, float]:
    return dict(table)


@attrs.frozen
class LatencyProfile:
    """Device milliseconds per execute: ``by_gear[label]``, else ``base_ms + per_row_ms * rows``, else 0."""

    by_gear: Mapping[str, float] = attrs.field(factory=dict, converter=_own_copy)
    base_ms: float | None = None
    per_row_ms: float = 0.0
    #: host<->device copy bandwidth in GB/s (the card's PCIe link); None: copies cost no device time
    pcie_gbps: float | None = None
    #: device<->device copy bandwidth in GB/s (the card's memory); None: free, as before
    memory_gbps: float | None = None

    @property
    def empty(self) -> bool:
        return not self.by_gear and self.base_ms is None

    def ms(self, label: str, rows: int) -> float | None:
        """The gear's device time, or None when neither the table nor a fallback covers it."""
        if label in self.by_gear:
            return self.by_gear[label]
        if self.base_ms is not None:
            return self.base_ms + self.per_row_ms * rows
        return None

    def describe(self) -> str:
        parts = [f"{label}={ms:g}" for label, ms in self.by_gear.items()]
        if self.base_ms is not None:
            parts.append(
                f"{self.base_ms:g}+{self.per_row_ms:g}*rows" if self.per_row_ms else f"{self.base_ms:g}"
            )
        for key in BANDWIDTHS:
            value = getattr(self, key)
            if value is not None:
                parts.append(f"{key}={value:g}")
        return ";".join(parts) or "0"


#: the profile's copy bandwidths, as its text and JSON forms name them (``pcie_gbps=24;memory_gbps=800``)
BANDWIDTHS = ("pcie_gbps", "memory_gbps")


def _gbps(where: str, value: object) -> float:
    try:
        if isinstance(value, bool):
            raise ValueError
        gbps = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{where}={value!r}: expected GB/s > 0") from None
    if not (gbps > 0 and math.isfinite(gbps)):
        raise ValueError(f"{where}={value!r}: expected GB/s > 0")
    return gbps


def _ms(where: str, value: object) -> float:
    try:
        if isinstance(value, bool):
            raise ValueError
        ms = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{where}={value!r}: expected milliseconds >= 0") from None
    if not (ms >= 0 and math.isfinite(ms)):
        raise ValueError(f"{where}={value!r}: expected milliseconds >= 0")
    return ms


def _label(where: str, label: str) -> str:
    label = label.replace(" ", "")
    if not _LABEL.match(label):
        raise ValueError(
            f'{where}: {label!r} is not a gear label; use the batch ("4"), a dims gear\'s values ("1,16") or '
            '"static", as executes_by_gear names them'
        )
    return label


def parse_text(text: str, where: str) -> LatencyProfile:
    """``"5"``, ``"1=78;4=145;8=220"``, ``"40+18*rows"``, or table entries plus one fallback, ``;``-separated."""
    by_gear: dict[str, float] = {}
    base: float | None = None
    per_row = 0.0
    fallbacks = 0
    bandwidths: dict[str, float] = {}
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        key, _, value = part.partition("=")
        if key.strip() in BANDWIDTHS:
            bandwidths[key.strip()] = _gbps(f"{where} {key.strip()}", value.strip())
            continue
        if "=" in part:
            label, _, ms = part.partition("=")
            label = _label(where, label)
            if label in by_gear:
                raise ValueError(f"{where}: gear {label} is listed twice")
            by_gear[label] = _ms(f"{where} gear {label}", ms.strip())
            continue
        fallbacks += 1
        formula = _FORMULA.match(part.replace(" ", ""))
        if formula:
            base = _ms(where, formula["a"] or 0)
            per_row = _ms(where, formula["b"])
        elif "rows" in part:
            raise ValueError(f'{where}: {part!r} is not a formula like "40+18*rows"')
        else:
            base = _ms(where, part)
    if fallbacks > 1:
        raise ValueError(f"{where}: give at most one constant or formula besides the gear table")
    return LatencyProfile(by_gear, base, per_row, **bandwidths)


def parse_json(value: object, where: str) -> LatencyProfile:
    """A number, a string in the environment's form, or ``{"<gear>": ms, ..., "base_ms": a, "per_row_ms": b}``."""
    if isinstance(value, str):
        return parse_text(value, where)
    if not isinstance(value, Mapping):
        return LatencyProfile(base_ms=_ms(where, value))
    by_gear = {}
    base = per_row = None
    bandwidths: dict[str, float] = {}
    for key, ms in value.items():
        if key in BANDWIDTHS:
            bandwidths[key] = _gbps(f"{where}.{key}", ms)
        elif key == "base_ms":
            base = _ms(f"{where}.base_ms", ms)
        elif key == "per_row_ms":
            per_row = _ms(f"{where}.per_row_ms", ms)
        else:
            by_gear[_label(where, str(key))] = _ms(f"{where}.{key}", ms)
    if per_row is not None and base is None:
        base = 0.0
    return LatencyProfile(by_gear, base, per_row or 0.0, **bandwidths)


def default_lock_dir() -> str:
    base = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    return os.path.join(base, f"ge-plugin-sim-{os.getuid()}")


# -- process state: set by acl.init from the configuration, or by tests ----------------------------------


class _State:
    def __init__(self) -> None:
        self.profile = LatencyProfile()
        self.timing_only = False
        self.lock_dir = ""
        self.warned: set[str] = set()


_STATE = _State()
#: read on every call that queues work (``device_time.STATE.timing_only``): an attribute, not a call
STATE = _STATE


def configure(profile: LatencyProfile, timing_only: bool, lock_dir: str) -> None:
    """Install the device profile for this process (acl.init); OSError if the lock directory is unusable."""
    os.makedirs(lock_dir, exist_ok=True)
    if not os.access(lock_dir, os.W_OK | os.X_OK):
        raise PermissionError(f"{lock_dir} is not writable")
    if lock_dir != _STATE.lock_dir:
        _close_lock_files()
    _STATE.profile = profile
    _STATE.timing_only = timing_only
    _STATE.lock_dir = lock_dir
    _STATE.warned.clear()


def set_profile(profile: LatencyProfile) -> None:
    _STATE.profile = profile
    _STATE.warned.clear()


def profile() -> LatencyProfile:
    return _STATE.profile


def set_timing_only(on: bool) -> None:
    """Skip (True) or do (False) the computation of outputs from now on."""
    _STATE.timing_only = bool(on)


def timing_only() -> bool:
    return _STATE.timing_only


def reset() -> None:
    """No device time, computing, the default lock directory (the tests' reset)."""
    _STATE.profile = LatencyProfile()
    _STATE.timing_only = False
    _STATE.warned.clear()


def latency_s(label: str, rows: int) -> float:
    """Seconds an execute of gear ``label`` holds the device."""
    prof = _STATE.profile
    if prof.empty:
        return 0.0
    ms = prof.ms(label, rows)
    if ms is None:
        if label not in _STATE.warned:
            _STATE.warned.add(label)
            log.warning(
                "ge-plugin simulator: gear %s has no device time in the profile %s (GE_PLUGIN_SIM_EXECUTE_LATENCY_MS "
                "or execute_latency_ms); its executes take none",
                label,
                prof.describe(),
            )
        return 0.0
    return ms / 1000.0


def copy_s(direction: str, nbytes: int) -> float:
    """Seconds a copy of ``nbytes`` takes on its stream: bytes over the profile's PCIe bandwidth (h2d, d2h)
    or memory bandwidth (d2d); 0 when the profile names none (copies stay free, as profiles written before
    these keys expect) and for host-to-host."""
    prof = _STATE.profile
    gbps = prof.memory_gbps if direction == "d2d" else None if direction == "h2h" else prof.pcie_gbps
    return nbytes / (gbps * 1e9) if gbps else 0.0


def hold_copy(direction: str, nbytes: int) -> None:
    """A computing stream's copy taking its time (the stream's next task waits, as on the card)."""
    seconds = copy_s(direction, nbytes)
    if seconds > 0:
        time.sleep(seconds)


# -- one compute queue per device -------------------------------------------------------------------------

#: the device file's layout: this boot's id (a file left from before a reboot holds monotonic times of another
#: clock, so its "busy until" means nothing), then the device's busy-until time as a float64
_BOOT_ID = slice(0, 16)
_BUSY_AT = 16
_FILE_BYTES = 64
_F64 = struct.Struct("<d")


def _boot_id() -> bytes:
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as f:
            return uuid.UUID(f.read().strip().decode()).bytes
    except (OSError, ValueError):  # not Linux: the clock's zero stands for the boot
        return _F64.pack(time.monotonic() - time.time()) * 2


_THIS_BOOT = _boot_id()


class _DeviceQueue:
    __slots__ = ("clock", "fd", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()  #: one compute or reservation at a time in this process
        self.fd: int | None = None  #: the device's file, flock-ed for one at a time across processes
        self.clock: mmap.mmap | None = (
            None  #: the file, mapped: when the device is busy until, for every process
        )


_QUEUES: dict[int, _DeviceQueue] = {}
_queues_lock = threading.Lock()


def _queue(device: int) -> _DeviceQueue:
    queue = _QUEUES.get(device)
    if queue is None:
        with _queues_lock:
            queue = _QUEUES.setdefault(device, _DeviceQueue())
    return queue


def _close_lock_files() -> None:
    with _queues_lock:
        for queue in _QUEUES.values():
            with queue.lock:
                if queue.clock is not None:
                    queue.clock.close()
                    queue.clock = None
                if queue.fd is not None:
                    os.close(queue.fd)
                    queue.fd = None


def lock_path(device: int) -> str:
    return os.path.join(_STATE.lock_dir or default_lock_dir(), f"device-{device}.lock")


def _open(queue: _DeviceQueue, device: int) -> tuple[int, mmap.mmap]:
    """The device's file and its mapping, opened once per process; the caller holds ``queue.lock``."""
    if queue.fd is None or queue.clock is None:
        path = lock_path(device)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.fstat(fd).st_size < _FILE_BYTES:
                os.ftruncate(fd, _FILE_BYTES)
            clock = mmap.mmap(fd, _FILE_BYTES)
            if clock[_BOOT_ID] != _THIS_BOOT:  # new, or left from before a reboot
                clock[_BOOT_ID] = _THIS_BOOT
                _F64.pack_into(clock, _BUSY_AT, 0.0)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        queue.fd, queue.clock = fd, clock
    return queue.fd, queue.clock


def busy_until(device: int) -> float:
    """When the last execute reserved on device ``device`` (by any process) ends, ``time.monotonic()``."""
    queue = _queue(device)
    clock = queue.clock
    if clock is None:
        with queue.lock:
            clock = _open(queue, device)[1]
    busy_until: float = _F64.unpack_from(clock, _BUSY_AT)[0]
    return busy_until


def reserve(device: int, ready: float, seconds: float) -> tuple[float, float]:
    """Book device ``device`` for ``seconds`` from ``ready`` or, when it is busy then, from the end of the
    last execute any process booked on it (first come, first served); returns the window ``(start, end)``.

    Timing-only executes take their device time this way when they are queued, so nothing waits on the
    host: the stream is synchronized by sleeping until the window's end. A window of 0 seconds books
    nothing (it starts once the device is free)."""
    if seconds <= 0:
        busy = busy_until(device)
        start = ready if ready > busy else busy
        return start, start
    queue = _queue(device)
    with queue.lock:
        fd, clock = _open(queue, device)
        fcntl.flock(fd, fcntl.LOCK_EX)
        busy = _F64.unpack_from(clock, _BUSY_AT)[0]
        start = ready if ready > busy else busy
        end = start + seconds
        while end - start < seconds:  # the window's length, as its ends give it, is never short of the time
            end = math.nextafter(end, math.inf)
        _F64.pack_into(clock, _BUSY_AT, end)
        fcntl.flock(fd, fcntl.LOCK_UN)
    return start, end


@contextlib.contextmanager
def occupy(device: int) -> Iterator[float]:
    """Hold device ``device`` for one compute (yields its start, ``time.monotonic()``); counts the window.

    A compute takes its turn after every window already booked on the device (timing-only executes of any
    process), holds the device's locks while it runs, and books its own window when it ends."""
    queue = _queue(device)
    with queue.lock:  # waiting here or on flock below releases the GIL
        fd, clock = _open(queue, device)
        fcntl.flock(fd, fcntl.LOCK_EX)
        busy = _F64.unpack_from(clock, _BUSY_AT)[0]
        wait = busy - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        start = time.monotonic()
        try:
            yield start
        finally:
            end = time.monotonic()
            if end > _F64.unpack_from(clock, _BUSY_AT)[0]:
                _F64.pack_into(clock, _BUSY_AT, end)
            fcntl.flock(fd, fcntl.LOCK_UN)
            counters.device(device).computed(start, end)


def hold(start: float, seconds: float) -> None:
    """Keep the device busy until ``start + seconds`` (a sleep: no CPU, no GIL)."""
    if seconds > 0:
        left = start + seconds - time.monotonic()
        if left > 0:
            time.sleep(left)
