"""What the engine does when an execute fails: rebuild the lane, then find which requests fail on their own.

A failed execute's requests are taken back (from their arrays while the caller still holds them, else out
of the lane's staging, gathered there and untouched since: in Triton the request memory may already be
gone, and rebuilding frees the staging), the lane is rebuilt (``recovery``), and ``isolation`` runs them
again by halves until each failure is pinned on one request (counted in ``EngineStats.isolation_executes``). Errors handed to requests are detached from
their tracebacks (``detached``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from ge_plugin.engine.isolation import Isolation
from ge_plugin.engine.lane import InFlight, Lane
from ge_plugin.engine.planner import Entry, Planner
from ge_plugin.engine.recovery import Rebuilder
from ge_plugin.engine.stats import EngineStats
from ge_plugin.errors import GePluginError

log = logging.getLogger("ge_plugin.engine")

_E = TypeVar("_E", bound=BaseException)


def detached(exc: _E) -> _E:
    """``exc`` without its traceback and chained exceptions.

    Results outlive the call that produced them; a traceback would keep every frame of that call alive, and
    with them the request arrays (views of Triton's shared memory) and the results list itself, in a cycle
    only the garbage collector can break."""
    exc.__traceback__ = None
    exc.__context__ = None
    exc.__cause__ = None
    return exc


def as_error(exc: BaseException) -> GePluginError:
    """What a failed execute hands its requests: the GePluginError itself (an ACL error, say) or one that
    carries the message of anything else (a ValueError from a copy), detached."""
    return detached(exc if isinstance(exc, GePluginError) else GePluginError(str(exc)))


class Failures:
    """One engine's failed executes. ``run(lane, job)`` stages, launches and waits for ``job`` on ``lane``
    and answers it (the engine's own path); ``mutex`` guards ``stats`` against the completion thread."""

    def __init__(
        self,
        name: str,
        planner: Planner,
        rebuilder: Rebuilder,
        stats: EngineStats,
        mutex: threading.RLock,
        run: Callable[[Lane, InFlight], None],
    ):
        self.name = name
        self.planner = planner
        self.rebuilder = rebuilder
        self.stats = stats
        self.mutex = mutex
        self.run = run

    def failed(self, lane: Lane, job: InFlight, exc: BaseException) -> None:
        """A job failed on ``lane``: rebuild the lane, then find which of its requests fail on their own."""
        error = as_error(exc)
        chunk = job.chunk
        log.warning(
            "model %s: an execute of %d request(s) failed (%s); rebuilding the lane",
            self.name,
            len(chunk.indices),
            error,
        )
        if len(chunk.indices) == 1:
            self.rebuilder.rebuild(lane)
            self.fail_all(job, error)
            return
        entries: list[Entry]
        if chunk.arrays is not None and all(arrays is not None for arrays in chunk.arrays):
            entries, staged = list(enumerate(chunk.arrays)), chunk.staged
        else:
            entries, staged = self.planner.unstage(chunk, lane.in_arrays), True
        self.rebuilder.rebuild(lane)

        def rerun(group: Sequence[Entry]) -> GePluginError | None:
            """Run ``group`` now on ``lane`` (rebuilt) and wait for it; why it failed (the lane rebuilt
            again), or None."""
            with self.mutex:
                self.stats.isolation_executes += 1
            members = [member for member, _ in group]
            wanted = chunk.wanted
            if wanted is not None:
                wanted = [wanted[member] for member in members]
            try:
                part = self.planner.chunk(members, [arrays for _, arrays in group], wanted, staged=staged)
                self.run(lane, InFlight(part, job.deliver, job.lifetime))
            except (GePluginError, ValueError) as exc:
                self.rebuilder.rebuild(lane)
                return as_error(exc)
            return None

        Isolation(
            entries,
            rerun=rerun,
            blocked=lambda: None if lane.usable else self.rebuilder.unavailable(),
            fail=lambda failure, members: self.fail_all(job, failure, members),
        ).search(error)

    def fail_all(self, job: InFlight, error: GePluginError, members: Sequence[int] | None = None) -> None:
        """``error`` to the requests at these places of the job's chunk (all of them by default)."""
        members = range(len(job.chunk.indices)) if members is None else members
        with self.mutex:
            self.stats.device_errors += len(members)
        for member in members:
            job.deliver(member, error)
