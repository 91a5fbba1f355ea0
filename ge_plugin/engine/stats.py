"""In-process counters of one engine, read by whoever publishes metrics.

Publishing a Triton metric is a synchronous IPC (~100 µs) from the Python stub, so the engine only bumps
plain integers here; the backend flushes the differences on a timer, never once per request. The counters
of executes (how many, on which gears, rows, padding, bytes copied) are not even bumped in Python: the fast
path's Planner tallies each chunk it stages, and ``ExecuteTally`` works them out from that when read.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Sequence

import attrs

from ge_plugin.engine.gear_table import Gear

#: upper bounds (µs) of the execute-time histogram buckets; the last bucket is +Inf
EXECUTE_BUCKETS_US = (100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000)


class ExecuteTally:
    """Executes as the Planner tallied them (chunks per gear position, rows, input elements, D2H bytes),
    with what each gear costs: ``gears`` in the planner's order, ``h2d`` the bytes each one's H2D copies."""

    def __init__(
        self,
        source: Callable[[], tuple[list[int], int, int, int]] | None = None,
        gears: Sequence[Gear] = (),
        h2d: Sequence[int] = (),
    ):
        self._source = source
        self._gears = tuple(gears)
        self._h2d = tuple(h2d)

    def read(self) -> tuple[list[int], int, int, int]:
        return self._source() if self._source is not None else ([], 0, 0, 0)


@attrs.define
class EngineStats:
    requests: int = 0
    request_errors: int = 0
    device_errors: int = 0
    #: extra executes run to find which request of a failed multi-request execute fails on its own
    isolation_executes: int = 0
    #: lanes rebuilt after a device failure, rebuilds that failed, and lanes waiting to be retried
    lane_rebuilds: int = 0
    lane_rebuild_failures: int = 0
    lanes_down: int = 0
    #: cumulative-free bucket counts (one per EXECUTE_BUCKETS_US bound, plus +Inf), their sum and count
    execute_buckets: list[int] = attrs.Factory(lambda: [0] * (len(EXECUTE_BUCKETS_US) + 1))
    execute_us_sum: float = 0.0
    device_bytes: int = 0
    pinned_bytes: int = 0
    #: the executes staged so far (the engine sets it once its planner exists)
    tally: ExecuteTally = attrs.Factory(ExecuteTally)

    @property
    def executes(self) -> int:
        return sum(self.tally.read()[0])

    @property
    def executes_by_gear(self) -> dict[str, int]:
        counts = self.tally.read()[0]
        return {gear.label: n for gear, n in zip(self.tally._gears, counts) if n}

    @property
    def rows(self) -> int:
        """Rows the requests brought."""
        return self.tally.read()[1]

    @property
    def padded_rows(self) -> int:
        """Rows added to reach a gear (padding waste)."""
        counts, rows, _, _ = self.tally.read()
        return sum(gear.rows * n for gear, n in zip(self.tally._gears, counts)) - rows

    @property
    def padded_elements(self) -> int:
        """Input elements computed on padding (all inputs)."""
        counts, _, elements, _ = self.tally.read()
        return sum(gear.cost * n for gear, n in zip(self.tally._gears, counts)) - elements

    @property
    def h2d_bytes(self) -> int:
        counts = self.tally.read()[0]
        return sum(nbytes * n for nbytes, n in zip(self.tally._h2d, counts))

    @property
    def d2h_bytes(self) -> int:
        return self.tally.read()[3]

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

    def __init__(self, clock: Callable[[], float] = time.perf_counter):
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
