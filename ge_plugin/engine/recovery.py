"""Lanes a device failure left unusable, and when to try rebuilding each again.

A rebuild (stream + model load) can fail as well, for a while: the device may be resetting, or out of
memory until another process lets go. Giving up would leave an instance that Triton still reports ready
failing every request for good; retrying at once would spend the instance on loads that fail. So each
failed rebuild doubles the wait before the next (bounded), and requests meanwhile get an answer saying
why and for how long.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import attrs

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
        return min(RECOVERY_MAX_S, RECOVERY_FIRST_S * 2 ** (failures - 1))
