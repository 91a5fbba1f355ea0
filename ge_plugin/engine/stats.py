"""In-process counters of one engine, read by whoever publishes metrics.

Publishing a Triton metric is a synchronous IPC (~100 µs) from the Python stub, so the engine only bumps
plain integers here; the backend flushes the differences on a timer, never once per request.
"""

from __future__ import annotations

import bisect
import threading
import time

import attrs

#: upper bounds (µs) of the execute-time histogram buckets; the last bucket is +Inf
EXECUTE_BUCKETS_US = (100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000)


@attrs.define
class EngineStats:
    requests: int = 0
    request_errors: int = 0
    device_errors: int = 0
    executes: int = 0
    #: rows the requests brought, and rows added to reach a gear (padding waste)
    rows: int = 0
    padded_rows: int = 0
    #: input elements computed on padding (all inputs)
    padded_elements: int = 0
    #: extra executes run to find which request of a failed multi-request execute fails on its own
    isolation_executes: int = 0
    #: lanes rebuilt after a device failure, rebuilds that failed, and lanes waiting to be retried
    lane_rebuilds: int = 0
    lane_rebuild_failures: int = 0
    lanes_down: int = 0
    h2d_bytes: int = 0
    d2h_bytes: int = 0
    executes_by_gear: dict[str, int] = attrs.Factory(dict)
    #: cumulative-free bucket counts (one per EXECUTE_BUCKETS_US bound, plus +Inf), their sum and count
    execute_buckets: list[int] = attrs.Factory(lambda: [0] * (len(EXECUTE_BUCKETS_US) + 1))
    execute_us_sum: float = 0.0
    device_bytes: int = 0
    pinned_bytes: int = 0

    #: wall time during which at least one execute of the instance was on the device
    busy: BusyClock = attrs.Factory(lambda: BusyClock())

    def observe_execute(self, micros: float) -> None:
        self.execute_buckets[bisect.bisect_left(EXECUTE_BUCKETS_US, micros)] += 1
        self.execute_us_sum += micros


class BusyClock:
    """The time during which at least one execute was on the device, from launch until its outputs were
    back: the union over the instance's lanes, so two lanes in flight at once count once.

    It is what the instance can say about its device's load from the device time of its executes; the
    instances sharing a device add up to that device's busy fraction (less when they wait for each other)."""

    def __init__(self, clock=time.perf_counter):
        self._clock = clock
        self._lock = threading.Lock()
        self._on_device = 0
        self._since = 0.0
        self._total = 0.0

    def enter(self) -> None:
        with self._lock:
            if self._on_device == 0:
                self._since = self._clock()
            self._on_device += 1

    def leave(self) -> None:
        with self._lock:
            self._on_device -= 1
            if self._on_device == 0:
                self._total += self._clock() - self._since

    def seconds(self) -> float:
        """Busy seconds so far, the execute in flight included."""
        with self._lock:
            open_part = self._clock() - self._since if self._on_device else 0.0
            return self._total + open_part
