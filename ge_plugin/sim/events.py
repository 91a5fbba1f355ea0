"""Events and host callbacks: the device-side waits of the simulated runtime, all woken by one condition.

An event is a marker recorded into a stream (``acl.rt.record_event``): it completes when the stream reaches
it (its worker, or in timing-only mode the record's place on the device's clock; see ``streams``), so it
captures everything queued on that stream before it. Its status, waits and timestamps are
about its **latest** record, as in CUDA and the CANN docs of ``aclrtQueryEventStatus``; an event never
recorded is "not ready" but waiting on it returns at once. ``stream_wait_event`` queues a task that holds a
stream until the event's record (as of that call) completes.

A callback (``acl.rt.launch_callback``) is a stream task that hands ``fn(user_data)`` to the thread subscribed
to the stream (``acl.rt.subscribe_report``); that thread runs it inside ``acl.rt.process_report``. A blocking
callback holds its stream until it has run, a non-blocking one does not.

Every wait here is a ``Condition.wait`` (the GIL is released) on :data:`CHANGED`, notified whenever an event
completes or a callback is queued or done; in timing-only mode a wait for a record whose end is known sleeps
until then instead, and settles the stream (``streams.Stream.wait_for``). :func:`abort` wakes every waiter for good, so that ``acl.finalize``
(and the tests' reset) never hangs on a stream waiting for an event nobody records or a callback nobody
processes; the waits then fail with ACL_ERROR_RT_STREAM_ABORT.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from ge_plugin.sim import _codes as C
from ge_plugin.sim._fail import Fail

#: notified (notify_all) on every completion; guards every Event and ReportQueue field below
LOCK = threading.Lock()
CHANGED = threading.Condition(LOCK)
#: ``with LOCK:`` is ``with CHANGED:`` without the Condition's Python-level ``__enter__`` (hot paths)
_aborted = False

#: aclrtSubscribeReport docs: at most 1024 threads per process may handle callbacks
MAX_REPORT_THREADS = 1024


def _abort_fail(what: str) -> Fail:
    return Fail(C.ACL_ERROR_RT_STREAM_ABORT, f"{what} was abandoned: acl.finalize ran")


def abort() -> None:
    """Wake every wait for good (finalize): blocked stream tasks fail, process_report returns."""
    global _aborted
    with CHANGED:
        _aborted = True
        CHANGED.notify_all()


def aborted() -> bool:
    """True after :func:`abort` until :func:`resume`: waits for the host end now."""
    return _aborted


def abort_fail(what: str) -> Fail:
    """The failure of ``what`` (a wait, a callback) that finalize abandoned."""
    return _abort_fail(what)


def resume() -> None:
    """A fresh acl.init after a reset: waits work again."""
    global _aborted
    with CHANGED:
        _aborted = False


def _wait(ready: Callable[[], bool], timeout_s: float | None) -> bool:
    """True once ``ready()``, False on timeout; the caller holds CHANGED. Raises when aborted."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while not ready():
        if _aborted:
            raise _abort_fail("the wait")
        if deadline is None:
            CHANGED.wait()
        else:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            CHANGED.wait(left)
    return True


# -- events ---------------------------------------------------------------------------------------------

#: where an event's latest record is (RecordState.state)
NEVER_RECORDED, PENDING, COMPLETE = 0, 1, 2


class RecordState(NamedTuple):
    """An event's latest record: NEVER_RECORDED, PENDING or COMPLETE, and when it completed."""

    state: int
    timestamp: float | None  #: time.monotonic() at completion; None until COMPLETE


class Event:
    """``aclrtEvent``: records are numbered; ``completed`` is the number of the latest one that completed.
    ``lazy`` holds the records made in timing-only mode that are not settled yet (``streams.Record``s, by
    number): whoever asks about them settles their stream first."""

    __slots__ = ("completed", "context", "handle", "lazy", "recorded", "timestamp")

    def __init__(self, handle: int, context: Any):
        self.handle = handle
        self.context = context
        self.recorded = 0  #: records submitted so far (the latest record's number)
        self.completed = 0  #: number of the latest record that completed
        self.timestamp: float | None = None  #: time.monotonic() at that completion
        self.lazy: dict[int, Any] = {}

    def _catch_up(self) -> None:
        """Settle the streams of this event's timing-only records (CHANGED held)."""
        if self.lazy:
            now = time.monotonic()
            for record in list(self.lazy.values()):
                record.stream.settle(now)

    def status(self) -> int:
        """aclrtEventRecordedStatus: COMPLETE once the latest record completed, else NOT_READY."""
        done = self.completed_at().state == COMPLETE
        return C.ACL_EVENT_RECORDED_STATUS_COMPLETE if done else C.ACL_EVENT_RECORDED_STATUS_NOT_READY

    def record(self) -> int:
        """A new record's number; the stream task :func:`complete_record` completes it."""
        with CHANGED:
            self.recorded += 1
            return self.recorded

    def latest(self) -> int:
        with CHANGED:
            return self.recorded

    def wait(self, record: int, timeout_s: float | None = None) -> bool:
        """Wait until record ``record`` (or a later one) completed; True, or False on timeout."""
        if record == 0:
            return True
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with CHANGED:
            while self.completed < record:
                lazy = self.lazy.get(record)
                if lazy is not None:
                    settled: bool = lazy.stream.wait_for(lazy, deadline)
                    return settled
                if _aborted:
                    raise _abort_fail("the wait")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                CHANGED.wait(left)
            return True

    def completed_at(self) -> RecordState:
        """Where the latest record is, and when it completed."""
        with CHANGED:
            self._catch_up()
            if not self.recorded:
                return RecordState(NEVER_RECORDED, None)
            if self.completed < self.recorded:
                return RecordState(PENDING, None)
            return RecordState(COMPLETE, self.timestamp)


def complete_record(event: Event, record: int) -> None:
    """Stream task: the event's record ``record`` is reached."""
    now = time.monotonic()
    with CHANGED:
        if record > event.completed:
            event.completed = record
            event.timestamp = now
        CHANGED.notify_all()


def reset_record(event: Event, record: int) -> None:
    """Stream task of reset_event: back to "not recorded", unless a newer record was made meanwhile."""
    with CHANGED:
        if event.recorded == record:
            event.recorded = event.completed = 0
            event.timestamp = None
        CHANGED.notify_all()


def wait_task(event: Event, record: int) -> None:
    """Stream task of stream_wait_event: hold the stream until the record completes."""
    event.wait(record)


# -- callbacks ------------------------------------------------------------------------------------------


class Report:
    """One launched callback on its way to the subscribed thread."""

    __slots__ = ("args", "done", "done_at", "fn")

    def __init__(self, fn: Callable[[Any], Any], args: Any):
        self.fn = fn
        self.args = args
        self.done = False
        self.done_at = 0.0  #: time.monotonic() once it ran


class ReportQueue:
    """The callbacks waiting for one subscribed thread (aclrtSubscribeReport's thread id). ``lazy`` counts,
    per stream, the timing-only callbacks launched for this thread and not handed over yet: process_report
    settles those streams to collect them when they are due."""

    __slots__ = ("device", "items", "lazy", "streams", "thread_id")

    def __init__(self, thread_id: int, device: int):
        self.thread_id = thread_id
        self.device = device
        self.streams: set[Any] = set()
        self.items: collections.deque[Report] = collections.deque()
        self.lazy: dict[Any, int] = {}


def hand_over(queue: ReportQueue, report: Report) -> None:
    """Give ``report`` to the thread of ``queue`` (CHANGED held), even if it unsubscribed since the launch."""
    QUEUES.setdefault(queue.thread_id, queue)
    queue.items.append(report)
    CHANGED.notify_all()


#: thread id -> its queue, while it has subscribed streams or undelivered callbacks
QUEUES: dict[int, ReportQueue] = {}


def callback_task(queue: ReportQueue, report: Report, block: bool) -> None:
    """Stream task of launch_callback: hand the callback over; a blocking one holds the stream until it ran."""
    with CHANGED:
        hand_over(queue, report)
        if block:
            _wait(lambda: report.done, None)


def take_reports(thread_id: int, timeout_s: float | None) -> list[Report] | None:
    """The callbacks queued for ``thread_id`` (at least one), or None on timeout. Raises Fail."""
    with CHANGED:
        queue = QUEUES.get(thread_id)
        if queue is None:
            raise Fail(
                C.ACL_ERROR_RT_THREAD_SUBSCRIBE,
                f"thread {thread_id} is subscribed to no stream; call acl.rt.subscribe_report(thread_id, stream) "
                "with this thread's id (threading.get_ident(), or the id acl.util.start_thread returned)",
            )
        if not _collect(queue, timeout_s):
            return None
        reports = list(queue.items)
        queue.items.clear()
        if not queue.streams:
            QUEUES.pop(thread_id, None)
        return reports


def _collect(queue: ReportQueue, timeout_s: float | None) -> bool:
    """Wait until callbacks are queued for ``queue``'s thread: True, or False on timeout (CHANGED held).
    Timing-only callbacks are collected from their streams when due, so the wait ends at the soonest time one
    of those streams changes."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while not queue.items:
        if _aborted:
            raise _abort_fail("the wait")
        now = time.monotonic()
        due = None
        for stream in list(queue.lazy):
            stream.settle(now)
            change = stream.next_change(now)
            if change is not None and (due is None or change < due):
                due = change
        if queue.items:
            break
        if deadline is not None and now >= deadline:
            return False
        until = deadline if due is None or (deadline is not None and deadline < due) else due
        CHANGED.wait(None if until is None else max(until - now, 0.0))
    return True


def subscribe(thread_id: int, stream: Any, device: int) -> None:
    """Thread ``thread_id`` handles the callbacks of ``stream`` (on ``device``) from now on; raises Fail."""
    with CHANGED:
        if stream.subscriber is not None:
            raise Fail(
                C.ACL_ERROR_RT_STREAM_SUBSCRIBE,
                f"stream 0x{stream.handle:x} is already subscribed by thread {stream.subscriber}; a stream has "
                "one callback thread",
            )
        queue = QUEUES.get(thread_id)
        if queue is not None and queue.device not in (device, -1):
            raise Fail(
                C.ACL_ERROR_RT_THREAD_SUBSCRIBE,
                f"thread {thread_id} handles callbacks of device {queue.device}; one thread id may not serve "
                f"two devices (this stream is on device {device})",
            )
        if queue is None:
            if len(QUEUES) >= MAX_REPORT_THREADS:
                raise Fail(
                    C.ACL_ERROR_RT_THREAD_SUBSCRIBE,
                    f"{MAX_REPORT_THREADS} threads already handle callbacks in this process",
                )
            queue = QUEUES[thread_id] = ReportQueue(thread_id, device)
        queue.device = device
        queue.streams.add(stream)
        stream.subscriber = thread_id


def subscribed_queue(stream: Any) -> ReportQueue | None:
    """The queue of the thread subscribed to ``stream``; None when no thread is."""
    with CHANGED:
        thread_id = stream.subscriber
        return QUEUES.get(thread_id) if thread_id is not None else None


def unsubscribe(stream: Any) -> None:
    """Detach ``stream`` from the thread handling its callbacks (unsubscribe_report, or the stream going
    away); the thread's queue goes once it has neither streams nor undelivered callbacks."""
    with CHANGED:
        thread_id, stream.subscriber = stream.subscriber, None
        queue = QUEUES.get(thread_id) if thread_id is not None else None
        if thread_id is not None and queue is not None:
            queue.streams.discard(stream)
            if not queue.streams and not queue.items:
                del QUEUES[thread_id]


def finish(report: Report) -> None:
    with CHANGED:
        report.done = True
        report.done_at = time.monotonic()
        CHANGED.notify_all()


def requeue(thread_id: int, reports: list[Report]) -> None:
    """Put callbacks not run yet (a callback before them raised) back at the front, for the next call."""
    if not reports:
        return
    with CHANGED:
        queue = QUEUES.get(thread_id)
        if queue is None:
            queue = QUEUES[thread_id] = ReportQueue(thread_id, -1)
        queue.items.extendleft(reversed(reports))
        CHANGED.notify_all()


def forget() -> None:
    """Drop every queue (the tests' reset)."""
    with CHANGED:
        QUEUES.clear()
