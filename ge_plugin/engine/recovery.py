"""Lanes a device failure hit: rebuilt in place, and when a rebuild fails, tried again later.

A rebuild (stream + model load) can fail as well, for a while: the device may be resetting, or out of
memory until another process lets go. Giving up would leave an instance that Triton still reports ready
failing every request for good; retrying at once would spend the instance on loads that fail. So each
failed rebuild doubles the wait before the next (bounded), and requests meanwhile get an answer saying
why and for how long.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import attrs

from ge_plugin.engine.lane import Lane
from ge_plugin.engine.stats import EngineStats
from ge_plugin.errors import GePluginError, UnavailableError

log = logging.getLogger("ge_plugin.engine")

#: the first wait after a failed rebuild, doubling with every failure up to the cap
RECOVERY_FIRST_S = 0.1
RECOVERY_MAX_S = 10.0


@attrs.define
class Recovery:
    """A lane that could not be rebuilt: how often it failed, why last, and when to try again."""

    failures: int
    reason: str
    retry_at: float


class Recoveries:
    """Lane index -> its Recovery, shared by the thread that runs requests and the one that completes them."""

    def __init__(self, clock: Callable[[], float]):
        self.clock = clock
        self._lock = threading.Lock()
        self._down: dict[int, Recovery] = {}

    def __len__(self) -> int:
        return len(self._down)

    def __getitem__(self, index: int) -> Recovery:
        return self._down[index]

    def failed(self, index: int, reason: str) -> Recovery:
        """Record a failed rebuild of lane ``index``; the Recovery says when to try next."""
        with self._lock:
            recovery = self._down.get(index) or Recovery(0, "", 0.0)
            recovery.failures += 1
            recovery.reason = reason
            recovery.retry_at = self.clock() + self.delay(recovery.failures)
            self._down[index] = recovery
            return recovery

    def recovered(self, index: int) -> Recovery | None:
        """Lane ``index`` is back; its Recovery if it had one."""
        with self._lock:
            return self._down.pop(index, None)

    def due(self) -> list[int]:
        """Lanes whose wait has passed."""
        now = self.clock()
        with self._lock:
            return [index for index, r in self._down.items() if now >= r.retry_at]

    def soonest(self) -> tuple[Recovery, float] | None:
        """The lane that comes back first, and the seconds until its next attempt."""
        with self._lock:
            if not self._down:
                return None
            recovery = min(self._down.values(), key=lambda r: r.retry_at)
            return recovery, max(0.0, recovery.retry_at - self.clock())

    @staticmethod
    def delay(failures: int) -> float:
        return min(RECOVERY_MAX_S, RECOVERY_FIRST_S * 2.0 ** (failures - 1))


class Rebuilder:
    """Rebuilds the lanes a device failure hit, keeps retrying those it could not, and says why requests
    wait meanwhile. ``lanes`` is the engine's list (a lane's place in it names it in logs and metrics);
    ``mutex`` the engine's, held while a lane is reopened so that no job takes it half-built."""

    def __init__(
        self,
        name: str,
        device_id: int,
        lanes: list[Lane],
        stats: EngineStats,
        mutex: threading.RLock,
        clock: Callable[[], float],
    ):
        self.name = name
        self.device_id = device_id
        self.lanes = lanes
        self.stats = stats
        self.mutex = mutex
        #: lanes a device failure left unusable, with when to try each again
        self.down = Recoveries(clock)

    def rebuild(self, lane: Lane) -> None:
        """Close the lane a device failure hit and load it again (it stays its job's); see ``reopen``."""
        try:
            lane.close()
        except GePluginError as exc:
            log.warning("model %s: closing the failed lane: %s", self.name, exc)
        with self.mutex:
            self.reopen(lane)

    def reopen_due(self) -> None:
        """Try again the lanes whose wait has passed."""
        for index in self.down.due():
            with self.mutex:
                self.reopen(self.lanes[index])

    def reopen(self, lane: Lane) -> None:
        """Load a closed lane again; a failure is retried with a doubling wait. Called with the mutex."""
        index = next(k for k, candidate in enumerate(self.lanes) if candidate is lane)
        stats = self.stats
        try:
            lane.open()
        except GePluginError as exc:
            recovery = self.down.failed(index, str(exc))
            stats.lane_rebuild_failures += 1
            log.error(
                "model %s: lane %d could not be rebuilt (attempt %d: %s); trying again in %.1f s",
                self.name,
                index,
                recovery.failures,
                recovery.reason,
                self.down.delay(recovery.failures),
            )
        else:
            stats.lane_rebuilds += 1
            was_down = self.down.recovered(index)
            if was_down is not None:
                log.warning(
                    "model %s: lane %d is back after %d failed rebuilds", self.name, index, was_down.failures
                )
        stats.lanes_down = len(self.down)

    def unavailable(self) -> UnavailableError:
        """What requests get while no lane can run: why, and when the next attempt is."""
        soonest = self.down.soonest()
        if soonest is None:
            return UnavailableError(f"model {self.name!r}: no lane of the instance can run requests")
        recovery, wait = soonest
        return UnavailableError(
            f"model {self.name!r}: the instance on device {self.device_id} is recovering from a device "
            f"failure: rebuilding its model failed {recovery.failures} time(s), last with: {recovery.reason}; "
            f"the next attempt is in {wait:.1f} s"
        )
