"""Streams: work queued in order, run by a worker thread (computing) or settled by the clock (timing only).

**Computing** (the default). A worker thread per stream, started with the stream's first task, runs its
tasks in submission order. Submitting costs a lock and a deque append. Tasks run under the stream's
execution lock, in order, by whoever holds it: the worker as soon as it is scheduled, or a thread that calls
``synchronize`` and finds tasks not started yet. That second path stands in for hardware that starts work
at once: without it every execute would pay two host thread hand-offs (tens of microseconds, more on a busy
2-core machine) that an NPU does not have. ``synchronize`` waits for a task the worker is running on a
lock, which drops the GIL the way ``aclrtSynchronizeStream`` does; an idle stream returns at once.

**Timing only** (``device_time.timing_only()``). Nothing is computed or moved, so nothing needs a thread:
the stream is a queue of :class:`Record` objects (a copy, an execute, an event record, a wait, a callback),
each with the window it takes on the device's clock (``time.monotonic()``), fixed when it is queued. A
record starts when the one before it on the stream ends; an execute also not before its device is free
(its window is booked on the device's clock, shared by every process, by ``device_time.reserve``); a wait
not before the event's record ends. Nothing happens until the host looks: ``synchronize`` sleeps (no CPU,
no GIL) until the stream's last record ends, then *settles* the records in order: an event completes with
its record's end as timestamp, a callback goes to its thread, an error is kept for synchronize, the
counters count. ``query_event`` / ``process_report`` settle what is due by now. A record whose end depends
on the host (a blocking callback until its thread ran it, a wait for such a record) leaves the windows
after it open until then; those waits sleep on ``events.CHANGED``, which guards every record.

In both modes a task that fails records the first error since the last synchronize, and that synchronize
returns it, as a device fault surfaces on real hardware. Later tasks still run. A stream switched between
the modes with work queued waits for that work first.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ge_plugin import acl_constants as C
from ge_plugin.sim import events
from ge_plugin.sim._fail import Fail

log = logging.getLogger("ge_plugin.sim")

#: what ``synchronize`` returns when its timeout expires
TIMEOUT = Fail(C.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, "the stream's tasks did not finish within the timeout")

_CHANGED = events.CHANGED
_LOCK = events.LOCK
_monotonic = time.monotonic


class Record:
    """One piece of timing-only work on a stream, and its window ``[start, end]`` on the device's clock.

    Subclasses say what the record does; every method runs with ``events.CHANGED`` held. The fields are
    set by :meth:`Stream.enqueue` (``submitted``: when the host queued it, ``stream``, ``done`` once
    settled) and :meth:`place` (``start``, ``end``: None until known), not by a constructor, which would
    cost every copy and execute one more call."""

    __slots__ = ("done", "end", "start", "stream", "submitted")

    done: bool
    start: float | None
    end: float | None
    stream: Stream
    submitted: float

    def place(self, ready: float) -> None:
        """Fix the window, the stream being ready for this record at ``ready``: by default no time at all."""
        self.start = self.end = ready

    def find_end(self, now: float) -> None:
        """For a record placed without an end (it waits for the host): set ``end`` once it is known."""

    def begin(self) -> None:
        """The record's start has passed but not its end (a blocking callback goes to its thread now)."""

    def settle(self) -> None:
        """The record's end has passed: its effects; Fail for the error synchronize reports."""


class FailedRecord(Record):
    """Work that fails when it runs, taking no time (an injected fault of a copy or memset)."""

    __slots__ = ("fail",)

    def __init__(self, fail: Fail):
        self.fail = fail

    def settle(self) -> None:
        raise self.fail


class Stream:
    __slots__ = (
        "_done",
        "_error",
        "_exec",
        "_ready",
        "_records",
        "_settled_end",
        "_stopping",
        "_tasks",
        "_thread",
        "completed",
        "context",
        "destroyed",
        "handle",
        "name",
        "submitted",
        "subscriber",
    )

    def __init__(self, handle: int, context: Any, name: str):
        self.handle = handle
        self.context = context
        self.name = name
        self.destroyed = False
        self.submitted = 0  #: worker tasks queued
        self.completed = 0  #: worker tasks done
        self.subscriber: int | None = None  #: the thread id handling this stream's callbacks
        self._error: Fail | None = None
        self._tasks: collections.deque[tuple[Callable[..., Any], Any]] = collections.deque()
        self._ready = threading.Condition(threading.Lock())  # guards _tasks; wakes the worker
        self._exec = threading.Lock()  # held while tasks run: one runner at a time, in order
        self._done = threading.Condition(threading.Lock())  # notified as tasks complete (timed waits)
        self._stopping = False
        self._thread: threading.Thread | None = None  # started with the first task
        self._records: collections.deque[Record] = collections.deque()  # timing only, not settled yet
        self._settled_end = 0.0  #: the end of the last record settled

    @property
    def idle(self) -> bool:
        return self.completed == self.submitted and not self._records

    def _keep(self, fail: Fail) -> None:
        if self._error is None:
            # kept until a synchronize reports it: without its traceback, which would hold the frames of
            # whoever ran the task (a synchronize runs queued tasks in the caller's thread)
            self._error = fail.with_traceback(None)

    def _take_error(self) -> Fail | None:
        error, self._error = self._error, None
        return error

    # -- computing: a worker thread -------------------------------------------------------------------

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        """Queue ``fn(*args)`` for the worker; it may raise Fail to report a device-side error."""
        if self._records:
            self._finish_records()
        with self._ready:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self.name, daemon=True)
                self._thread.start()
            self.submitted += 1
            self._tasks.append((fn, args))
            self._ready.notify()

    def _work(self) -> None:
        ready = self._ready
        while True:
            with ready:
                while not self._tasks and not self._stopping:
                    ready.wait()
                if self._stopping and not self._tasks:
                    return
            with self._exec:
                self._run_queued()

    def _run_queued(self) -> None:
        """Run tasks until none is queued; the caller holds ``_exec``."""
        tasks = self._tasks
        while True:
            with self._ready:
                if not tasks:
                    return
                fn, args = tasks.popleft()
            try:
                fn(*args)
            except Fail as fail:
                self._keep(fail)
            except Exception as exc:  # a simulator bug: report it like a device fault, keep the stream alive
                log.exception("simulated stream task %r failed", fn)
                self._keep(Fail(C.ACL_ERROR_RT_INTERNAL_ERROR, f"simulator task failed: {exc!r}"))
            with self._done:
                self.completed += 1
                self._done.notify_all()

    def _drain_tasks(self) -> None:
        if self.completed != self.submitted:
            with self._exec:
                self._run_queued()

    # -- timing only: records settled by the clock ------------------------------------------------------

    def enqueue(self, record: Record) -> None:
        """Queue ``record``: its window starts when the stream's last record ends (or now)."""
        if self.completed != self.submitted:
            self._drain_tasks()
        now = _monotonic()
        record.submitted = now
        record.stream = self
        record.done = False
        with _LOCK:
            records = self._records
            if records:
                end = records[-1].end
                if end is None:  # the stream waits for the host: placed once that is over
                    record.start = record.end = None
                    records.append(record)
                    return
                if end > now:
                    now = end
            record.place(now)
            records.append(record)

    def resolve(self, now: float) -> None:
        """Place the records whose window was left open, as far as what they wait for is known."""
        ready = self._settled_end
        for record in self._records:
            if record.start is None:
                record.place(record.submitted if record.submitted > ready else ready)
            if record.end is None:
                record.find_end(now)
                if record.end is None:
                    return
            ready = record.end

    def settle(self, now: float) -> None:
        """Settle, in order, every record that ended by ``now``; begin the one whose start has passed."""
        records = self._records
        if records and records[-1].end is None:
            self.resolve(now)
        while records:
            record = records[0]
            end = record.end
            if end is None or end > now:
                start = record.start
                if start is not None and start <= now:
                    record.begin()
                return
            records.popleft()
            self._settled_end = end
            record.done = True
            try:
                record.settle()
            except Fail as fail:
                self._keep(fail)
            except Exception as exc:  # a simulator bug, as for a worker task
                log.exception("simulated stream record %r failed", record)
                self._keep(Fail(C.ACL_ERROR_RT_INTERNAL_ERROR, f"simulator task failed: {exc!r}"))

    def catch_up(self) -> None:
        """Settle what is due by now."""
        if self._records:
            with _LOCK:
                self.settle(_monotonic())

    def next_change(self, now: float) -> float | None:
        """When the record at the head of the queue ends, or begins if that is still to come; None when
        that is not known (it waits for the host, which notifies CHANGED). CHANGED held."""
        if not self._records:
            return None
        head = self._records[0]
        if head.end is not None:
            return head.end
        return head.start if head.start is not None and head.start > now else None

    def wait_for(self, record: Record, deadline: float | None) -> bool:
        """Settle until ``record`` (of this stream) is settled, sleeping off the CPU and without the GIL until
        its end, or waiting on CHANGED while its end is not known. False once ``deadline`` passed first.
        CHANGED is held (and let go while waiting)."""
        while not record.done:
            now = _monotonic()
            self.settle(now)
            if record.done:
                break
            if deadline is not None and now >= deadline:
                return False
            end = record.end
            if end is None:
                if events.aborted():  # finalize: what waits for the host fails now, and ends
                    self.resolve(now)
                    if record.end is None:
                        _CHANGED.wait(0.01)  # a record that does not end on abort: poll, never hang
                    continue
                _CHANGED.wait(None if deadline is None else deadline - now)
                continue
            until = end if deadline is None or end < deadline else deadline
            _CHANGED.release()
            try:
                time.sleep(until - now)
            finally:
                _CHANGED.acquire()
        return True

    def _finish_records(self) -> None:
        with _CHANGED:
            if self._records:
                self.wait_for(self._records[-1], None)

    # -- both ---------------------------------------------------------------------------------------

    def synchronize(self, timeout_s: float | None = None) -> Fail | None:
        """Wait for all work queued so far; the first error since the last synchronize, or TIMEOUT."""
        records = self._records
        if records:
            now = _monotonic()
            with _LOCK:
                if records:
                    end = records[-1].end
                    if end is not None and end <= now:  # all of it is over: settle, no wait
                        self.settle(now)
                    elif not self.wait_for(records[-1], None if timeout_s is None else now + timeout_s):
                        return TIMEOUT
        if self.completed == self.submitted:
            return self._take_error()
        if timeout_s is not None:  # a deadline: the caller waits for the worker and never runs work itself
            target = self.submitted
            with self._done:
                if not self._done.wait_for(lambda: self.completed >= target, timeout_s):
                    return TIMEOUT
            return self._take_error()
        with self._exec:
            self._run_queued()
        return self._take_error()

    def drain(self) -> None:
        """Wait for the work queued so far, leaving its error for the next synchronize."""
        if self._records:
            self._finish_records()
        self._drain_tasks()

    def stop(self) -> None:
        """Finish queued work, then end the worker."""
        if self._records:
            self._finish_records()
        with self._ready:
            self._stopping = True
            self._ready.notify()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
