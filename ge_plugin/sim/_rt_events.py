"""``acl.rt`` events and callbacks (re-exported by ``ge_plugin.sim.rt``), shaped like pyACL's wrappers.

Call forms and return shapes follow hicann/runtime ``python/pyACL/rt/rt_synchronize.cpp``:
``create_event()`` and ``create_event_with_flag(flag)`` ("I") -> ``(event, ret)``; ``record_event`` / ``reset_event(event, stream)``,
``stream_wait_event(stream, event)``, ``synchronize_event(event)``, ``destroy_event(event)`` -> ``ret``;
``query_event_status(event)`` and the deprecated ``query_event(event)`` -> ``(status, ret)``; ``event_elapsed_time(start, end)`` -> ``(ms, ret)`` with
``ms`` a C float; ``subscribe_report`` / ``unsubscribe_report(thread_id, stream)`` ("Kk") -> ``ret``;
``launch_callback(fn, user_data, block_type, stream)`` ("OOik", ``fn`` must be callable) -> ``ret``;
``process_report(timeout_ms)`` -> ``ret``. ``synchronize_event``, ``stream_wait_event`` and
``process_report`` release the GIL, as their wrappers do. The semantics live in ``ge_plugin.sim.events``;
in timing-only mode each of these is a record on its stream's clock (``ge_plugin.sim.streams``), defined
here.
"""

import struct as _struct
import threading as _threading
from collections.abc import Callable as _Callable

from ge_plugin import acl_constants as _C
from ge_plugin.sim import _args as _a
from ge_plugin.sim import _codes as _K
from ge_plugin.sim import _state as _s
from ge_plugin.sim import device_time as _device_time
from ge_plugin.sim import events as _ev
from ge_plugin.sim._api import acl_call as _acl_call
from ge_plugin.sim._api import value_and_ret as _value_and_ret
from ge_plugin.sim._fail import Fail as _Fail
from ge_plugin.sim._objects import lookup as _lookup
from ge_plugin.sim.streams import Record as _Record

__all__ = [
    "create_event",
    "create_event_with_flag",
    "destroy_event",
    "event_elapsed_time",
    "launch_callback",
    "process_report",
    "query_event",
    "query_event_status",
    "record_event",
    "reset_event",
    "stream_wait_event",
    "subscribe_report",
    "synchronize_event",
    "synchronize_event_with_timeout",
    "unsubscribe_report",
]

_SIM = _s.SIM
_TIMING = _device_time.STATE


# -- timing-only records --------------------------------------------------------------------------------


class _EventRecord(_Record):
    """record_event: the event's record ``number`` completes at this record's end, its timestamp."""

    __slots__ = ("event", "number")

    def __init__(self, event: "_ev.Event", number: int):
        self.event = event
        self.number = number
        # findable through the event before it is queued: a wait for it must see it as not placed yet
        self.done = False
        self.start = self.end = None

    def settle(self) -> None:
        event = self.event
        event.lazy.pop(self.number, None)
        if self.number > event.completed:
            event.completed = self.number
            event.timestamp = self.end
        _ev.CHANGED.notify_all()


class _ResetRecord(_Record):
    """reset_event: back to "not recorded", unless a newer record was made meanwhile."""

    __slots__ = ("event", "number")

    def __init__(self, event: "_ev.Event", number: int):
        self.event = event
        self.number = number

    def settle(self) -> None:
        event = self.event
        if event.recorded == self.number:
            event.recorded = event.completed = 0
            event.timestamp = None
            event.lazy.clear()
        _ev.CHANGED.notify_all()


class _WaitRecord(_Record):
    """stream_wait_event: the stream goes on once the event's record ``number`` (as of the call) ends."""

    __slots__ = ("dep", "error", "event", "number")

    def __init__(self, event: "_ev.Event", number: int):
        self.event = event
        self.number = number
        self.dep = event.lazy.get(number)  #: that record, if it is a timing-only one not settled yet
        self.error: _Fail | None = None

    def place(self, ready: float) -> None:
        self.start = ready
        self.end = None
        self.find_end(ready)

    def find_end(self, now: float) -> None:
        dep = self.dep
        end: float | None
        if dep is not None:
            if dep.end is None:
                dep.stream.resolve(now)
            end = dep.end
        elif self.number == 0 or self.event.completed >= self.number:
            end = self.event.timestamp if self.number else None
            end = end if end is not None else self.start
        else:  # a record on a computing stream, not complete yet
            end = None
        if end is None:
            if not _ev.aborted():
                return
            self.error = _ev.abort_fail("the wait")
            end = now
        start = self.start
        assert start is not None
        self.end = end if end > start else start

    def settle(self) -> None:
        if self.error is not None:
            raise self.error


class _CallbackRecord(_Record):
    """launch_callback: at its start the callback goes to the subscribed thread; a blocking one ends when
    that thread has run it."""

    __slots__ = ("block", "error", "handed", "queue", "report")

    def __init__(self, queue: "_ev.ReportQueue", report: "_ev.Report", block: bool):
        self.queue = queue
        self.report = report
        self.block = block
        self.handed = False
        self.error: _Fail | None = None

    def place(self, ready: float) -> None:
        self.start = ready
        self.end = None if self.block else ready

    def find_end(self, now: float) -> None:
        report, start = self.report, self.start
        assert start is not None
        if report.done:
            self.end = report.done_at if report.done_at > start else start
        elif _ev.aborted():
            self.error = _ev.abort_fail("the callback")
            self.end = now if now > start else start

    def begin(self) -> None:
        if not self.handed:
            self.handed = True
            queue, stream = self.queue, self.stream
            left = queue.lazy.get(stream, 1) - 1
            if left:
                queue.lazy[stream] = left
            else:
                queue.lazy.pop(stream, None)
            _ev.hand_over(queue, self.report)

    def settle(self) -> None:
        self.begin()
        if self.error is not None:
            raise self.error


def _event(handle: int) -> "_ev.Event":
    event: _ev.Event = _lookup("events", handle, "event")
    return event


def timeout_ms(call: str, pos: int, value: object) -> int:
    """A ``"i"`` timeout in ms: -1 (wait forever) or >= 0; the runtime refuses others before anything else."""
    timeout = _a.i(call, pos, value)
    if timeout < -1:
        raise _Fail(_C.ACL_ERROR_INVALID_PARAM, f"timeout {timeout} ms; use -1 (wait forever) or >= 0")
    return timeout


def seconds(timeout: int) -> "float | None":
    """A timeout_ms in seconds; None (forever) for -1."""
    return None if timeout == -1 else timeout / 1000


# -- events ---------------------------------------------------------------------------------------------


@_acl_call("acl.rt.create_event", failure=_value_and_ret(0))
def create_event() -> tuple[int, int]:
    """``event, ret``: an event of the current context, not recorded yet."""
    return _new_event(), 0


def _new_event() -> int:
    event = _ev.Event(_s.new_handle(), _s.current_context())
    _SIM.events[event.handle] = event
    return event.handle


@_acl_call("acl.rt.create_event_with_flag", _a.u32, failure=_value_and_ret(0))
def create_event_with_flag(flag: int, /) -> tuple[int, int]:
    """``event, ret``: create_event with aclrtEventFlag bits (ACL_EVENT_SYNC 0x1, ACL_EVENT_CAPTURE_STREAM_PROGRESS
    0x2, ACL_EVENT_TIME_LINE 0x8). Every simulated event is synchronisable and keeps timestamps, so the flags
    change nothing here; other bits are ACL_ERROR_INVALID_PARAM."""
    if flag & ~_K.ACL_EVENT_FLAGS:
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"flag 0x{flag:x} has bits that are not aclrtEventFlag values (0x1 sync, 0x2 capture stream "
            "progress, 0x8 time line)",
        )
    return _new_event(), 0


@_acl_call("acl.rt.destroy_event", _a.k)
def destroy_event(event: int, /) -> int:
    """``ret``; records still queued complete harmlessly."""
    _event(event)
    del _SIM.events[event]
    return 0


@_acl_call("acl.rt.record_event", _a.k, _a.k)
def record_event(event: int, stream: int, /) -> int:
    """``ret``: queues the event on ``stream``; it completes when everything queued before it has run."""
    obj = _event(event)
    target = _s.stream(stream, _s.current_context())
    if not _TIMING.timing_only:
        target.submit(_ev.complete_record, obj, obj.record())
        return 0
    record = _EventRecord(obj, 0)
    record.stream = target
    with _ev.CHANGED:  # numbered and findable at once: a wait for it settles its stream
        record.number = obj.recorded = obj.recorded + 1
        obj.lazy[record.number] = record
    target.enqueue(record)
    with _ev.CHANGED:
        _ev.CHANGED.notify_all()  # a wait that found it before it was queued looks again
    return 0


@_acl_call("acl.rt.reset_event", _a.k, _a.k)
def reset_event(event: int, stream: int, /) -> int:
    """``ret``: queues a reset on ``stream``; once it runs the event is "not recorded" again."""
    obj = _event(event)
    target = _s.stream(stream, _s.current_context())
    if _TIMING.timing_only:
        target.enqueue(_ResetRecord(obj, obj.latest()))
    else:
        target.submit(_ev.reset_record, obj, obj.latest())
    return 0


@_acl_call("acl.rt.query_event_status", _a.k, failure=_value_and_ret(_K.ACL_EVENT_RECORDED_STATUS_NOT_READY))
def query_event_status(event: int, /) -> tuple[int, int]:
    """``status, ret``: ACL_EVENT_RECORDED_STATUS_COMPLETE (1) once the latest record completed, else 0."""
    return _event(event).status(), 0


@_acl_call("acl.rt.query_event", _a.k, failure=_value_and_ret(_K.ACL_EVENT_STATUS_COMPLETE))
def query_event(event: int, /) -> tuple[int, int]:
    """``status, ret`` (deprecated; aclrtEventStatus): ACL_EVENT_STATUS_NOT_READY (1) while the latest
    record has not completed, else ACL_EVENT_STATUS_COMPLETE (0), also for an event never recorded (the rule
    synchronize_event follows: there is nothing to wait for)."""
    record = _event(event).completed_at()
    if record.state != _ev.NEVER_RECORDED and record.timestamp is None:
        return _K.ACL_EVENT_STATUS_NOT_READY, 0
    return _K.ACL_EVENT_STATUS_COMPLETE, 0


def _synchronize_event(event: int, timeout_s: "float | None") -> int:
    obj = _event(event)
    if not obj.wait(obj.latest(), timeout_s):
        raise _Fail(_K.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, "the event did not complete within the timeout")
    return 0


@_acl_call("acl.rt.synchronize_event", _a.k)
def synchronize_event(event: int, /) -> int:
    """``ret``: waits (without the GIL) for the event's latest record; at once if it was never recorded."""
    return _synchronize_event(event, None)


@_acl_call("acl.rt.synchronize_event_with_timeout", _a.k, timeout_ms)
def synchronize_event_with_timeout(event: int, timeout: int, /) -> int:
    """``ret``; ``timeout`` in ms, -1 waits forever; ACL_ERROR_RT_EVENT_SYNC_TIMEOUT (507047) when it expires."""
    return _synchronize_event(event, seconds(timeout))


def _completed_at(handle: int, name: str) -> float:
    """When the latest record of event ``handle`` (the ``name`` of the pair) completed; raises Fail."""
    record = _event(handle).completed_at()
    if record.state == _ev.NEVER_RECORDED:
        raise _Fail(_K.ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID, f"the {name} event was never recorded")
    if record.timestamp is None:
        raise _Fail(
            _K.ACL_ERROR_RT_EVENT_NOT_COMPLETE,
            f"the {name} event's record has not completed; synchronize its stream first",
        )
    return record.timestamp


@_acl_call("acl.rt.event_elapsed_time", _a.k, _a.k, failure=_value_and_ret(0.0))
def event_elapsed_time(start: int, end: int, /) -> tuple[float, int]:
    """``ms, ret``: milliseconds (a C float) between two completed records."""
    started = _completed_at(start, "start")
    ms = (_completed_at(end, "end") - started) * 1000.0
    if ms < 0:
        raise _Fail(
            _K.ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL,
            f"the end event completed {-ms:.3f} ms before the start",
        )
    return _struct.unpack("<f", _struct.pack("<f", ms))[0], 0


@_acl_call("acl.rt.stream_wait_event", _a.k, _a.k)
def stream_wait_event(stream: int, event: int, /) -> int:
    """``ret``: ``stream``'s later tasks wait for the event's latest record (as of this call)."""
    obj = _event(event)
    target = _s.stream(stream, _s.current_context())
    if _TIMING.timing_only:
        with _ev.CHANGED:
            record = _WaitRecord(obj, obj.recorded)
        target.enqueue(record)
    else:
        target.submit(_ev.wait_task, obj, obj.latest())
    return 0


# -- callbacks ------------------------------------------------------------------------------------------


@_acl_call("acl.rt.subscribe_report", _a.k, _a.k)
def subscribe_report(thread_id: int, stream: int, /) -> int:
    """``ret``: the thread ``thread_id`` handles ``stream``'s callbacks (one thread per stream)."""
    ctx = _s.current_context()
    _ev.subscribe(thread_id, _s.stream(stream, ctx), ctx.device)
    return 0


@_acl_call("acl.rt.unsubscribe_report", _a.k, _a.k)
def unsubscribe_report(thread_id: int, stream: int, /) -> int:
    """``ret``: ``stream``'s callbacks are no longer handled by ``thread_id``."""
    target = _s.stream(stream, _s.current_context())
    if target.subscriber != thread_id:
        raise _Fail(
            _K.ACL_ERROR_RT_STREAM_SUBSCRIBE,
            f"stream 0x{stream:x} is not subscribed by thread {thread_id}"
            + (f" (thread {target.subscriber} handles it)" if target.subscriber is not None else ""),
        )
    _ev.unsubscribe(target)
    return 0


def _callback_args(
    call: str, fn: object, user_data: object, block_type: object, stream: object
) -> "tuple[_Callable[[object], object], object, int, int]":
    """``"OOik"``, then ``fn`` must be callable (TypeError otherwise), as pyACL's wrapper checks."""
    block = _a.i(call, 3, block_type)
    handle = _a.k(call, 4, stream)
    if not callable(fn):
        raise TypeError(f"{call}: parameter must be callable, not {type(fn).__name__}")
    return fn, user_data, block, handle


@_acl_call("acl.rt.launch_callback", parse=_callback_args)
def launch_callback(
    fn: "_Callable[[object], object]", user_data: object, block_type: int, stream: int, /
) -> int:
    """``ret``: queues ``fn(user_data)`` on ``stream``, run by the subscribed thread in process_report.

    ``block_type`` 1 (ACL_CALLBACK_BLOCK) holds the stream's later tasks until the callback has run; 0 does
    not. The stream must be subscribed (else ACL_ERROR_RT_STREAM_NO_CB_REG, 107015).
    """
    target = _s.stream(stream, _s.current_context())
    if block_type not in (_K.ACL_CALLBACK_NO_BLOCK, _K.ACL_CALLBACK_BLOCK):
        raise _Fail(_C.ACL_ERROR_INVALID_PARAM, f"block_type {block_type}; use 0 (no block) or 1 (block)")
    queue = _ev.subscribed_queue(target)
    if queue is None:
        raise _Fail(
            _K.ACL_ERROR_RT_STREAM_NO_CB_REG,
            f"no thread handles the callbacks of stream 0x{stream:x}; call acl.rt.subscribe_report first",
        )
    report, block = _ev.Report(fn, user_data), block_type == _K.ACL_CALLBACK_BLOCK
    if _TIMING.timing_only:
        with _ev.CHANGED:
            queue.lazy[target] = queue.lazy.get(target, 0) + 1
        target.enqueue(_CallbackRecord(queue, report, block))
        with _ev.CHANGED:
            _ev.CHANGED.notify_all()  # a process_report waiting for its streams looks again
    else:
        target.submit(_ev.callback_task, queue, report, block)
    return 0


@_acl_call("acl.rt.process_report", _a.i)
def process_report(timeout: int, /) -> int:
    """``ret``: in a subscribed thread, waits up to ``timeout`` ms (-1: forever) and runs the callbacks due.

    Callbacks run in this thread, in launch order. A callback's exception propagates out of this call (the
    callbacks after it stay queued for the next call). ACL_ERROR_RT_REPORT_TIMEOUT (507012) when nothing
    came; ACL_ERROR_RT_THREAD_SUBSCRIBE (107012) in a thread subscribed to no stream.
    """
    if timeout == 0 or timeout < -1:
        raise _Fail(_C.ACL_ERROR_RT_PARAM_INVALID, f"timeout {timeout} ms; use -1 (forever) or > 0")
    thread_id = _threading.get_ident()
    reports = _ev.take_reports(thread_id, seconds(timeout))
    if reports is None:
        raise _Fail(_K.ACL_ERROR_RT_REPORT_TIMEOUT, f"no callback arrived within {timeout} ms")
    for n, report in enumerate(reports):
        try:
            report.fn(report.args)
        except BaseException:
            _ev.requeue(thread_id, reports[n + 1 :])
            raise
        finally:
            _ev.finish(report)
    return 0
