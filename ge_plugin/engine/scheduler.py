"""Which lane runs the next chunk, and which lane holds a chunk open for the requests still coming.

Lanes are taken in turn. A lane is a job's from ``take`` until ``release``; whoever waits for one (a
submit while every lane is busy, ``wait_idle``) sleeps on one condition, notified only when someone waits.
While the device is busy with a submitted execute, a freshly staged chunk may be held open instead of
launched (``hold``), so that requests Triton hands over meanwhile join it: without that, a lane freed by
one answered batch takes whatever is queued at that instant, before the clients it answered have sent
again, and the device runs part-empty batches.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ge_plugin.engine.lane import InFlight, Lane


class Scheduler:
    """The lanes of one engine, with who owns each (``Lane.pending``) and the one held open.

    ``mutex`` guards lane ownership and the engine's stats between the caller's thread and the completion
    thread; the request path takes it as the RLock itself (a Condition's own ``with`` is two Python calls
    more)."""

    def __init__(self) -> None:
        self.lanes: list[Lane] = []
        self.mutex = threading.RLock()
        self._freed = threading.Condition(self.mutex)
        self._next = 0
        #: threads waiting on ``_freed`` for a lane (``release`` notifies only when there are)
        self._waiting = 0
        #: submitted executes on the device, and the lane holding a staged chunk open meanwhile
        self.running = 0
        self.open: Lane | None = None

    def take(self, job: InFlight, finish: Callable[[Lane], None] | None) -> Lane | None:
        """The next usable lane, now ``job``'s (``pending``, until ``release``); None if no lane is usable.

        With ``finish`` (a synchronous call), a lane still running is finished first, in this thread.
        Otherwise this waits until the completion thread frees one."""
        lanes = self.lanes
        with self.mutex:
            while True:
                for _ in range(len(lanes)):
                    lane = lanes[self._next]
                    self._next = (self._next + 1) % len(lanes)
                    if lane.pending is not None and finish is not None:
                        finish(lane)
                    if lane.pending is None and lane.usable:
                        lane.pending = job
                        return lane
                if finish is not None or all(lane.pending is None for lane in lanes):
                    return None  # no lane is usable, and none is about to be freed
                self._waiting += 1
                try:
                    self._freed.wait()
                finally:
                    self._waiting -= 1

    def release(self, lane: Lane) -> None:
        """The lane is free for the next job: wake whoever waits for one (``take``, ``wait_idle``)."""
        with self.mutex:
            lane.pending = None
            if self._waiting:
                self._freed.notify_all()

    def wait_idle(self) -> None:
        """Until no lane has a job."""
        with self.mutex:
            self._waiting += 1
            try:
                self._freed.wait_for(lambda: all(lane.pending is None for lane in self.lanes))
            finally:
                self._waiting -= 1

    def hold(self, lane: Lane, job: InFlight, max_rows: int) -> bool:
        """Keep ``job`` (staged on ``lane``) open instead of launching it, while a submitted execute keeps
        the device busy and no other lane is held open; a chunk of ``max_rows`` is full already and is not
        held. Called with the mutex held, by a model that batches."""
        if not self.running or self.open is not None or job.chunk.rows >= max_rows:
            return False
        self.open = lane
        return True

    def held(self) -> InFlight | None:
        """The job held open, if it is still waiting to be launched (called with the mutex held)."""
        lane = self.open
        return None if lane is None else lane.pending

    def unhold(self) -> Lane | None:
        """The lane held open, which is no longer held (called with the mutex held)."""
        lane, self.open = self.open, None
        return lane

    def launched(self) -> None:
        """A submitted execute went to the device (called with the mutex held)."""
        self.running += 1

    def landed(self) -> Lane | None:
        """A submitted execute is done on the device: the lane held open, no longer held, when no other
        execute is in flight (its chunk is launched now, having taken every request that came meanwhile).
        Called with the mutex held."""
        self.running -= 1
        return None if self.running else self.unhold()
