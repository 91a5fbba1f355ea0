"""``acl.rt`` events and callbacks (re-exported by ``ge_plugin.sim.rt``), shaped like pyACL's wrappers.

Call forms and return shapes follow hicann/runtime ``python/pyACL/rt/rt_synchronize.cpp``:
``create_event()`` -> ``(event, ret)``; ``record_event`` / ``reset_event(event, stream)``,
``stream_wait_event(stream, event)``, ``synchronize_event(event)``, ``destroy_event(event)`` -> ``ret``;
``query_event_status(event)`` -> ``(status, ret)``; ``event_elapsed_time(start, end)`` -> ``(ms, ret)`` with
``ms`` a C float; ``subscribe_report`` / ``unsubscribe_report(thread_id, stream)`` ("Kk") -> ``ret``;
``launch_callback(fn, user_data, block_type, stream)`` ("OOik", ``fn`` must be callable) -> ``ret``;
``process_report(timeout_ms)`` -> ``ret``. ``synchronize_event``, ``stream_wait_event`` and
``process_report`` release the GIL, as their wrappers do. The semantics live in ``ge_plugin.sim.events``.
"""

import struct as _struct
import threading as _threading

from ge_plugin import acl_constants as _C
from ge_plugin.sim import _args as _a
from ge_plugin.sim import _codes as _K
from ge_plugin.sim import _state as _s
from ge_plugin.sim import events as _ev
from ge_plugin.sim import faults as _faults
from ge_plugin.sim._fail import Fail as _Fail
from ge_plugin.sim._objects import lookup as _lookup

__all__ = [
    "create_event",
    "destroy_event",
    "event_elapsed_time",
    "launch_callback",
    "process_report",
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


def _fault(api: str) -> None:
    if _faults.RULES:
        _s.check_fault(api)


def _event(handle: int) -> "_ev.Event":
    return _lookup("events", handle, "event")


def _timeout_s(timeout: int) -> "float | None":
    if timeout < -1:
        raise _Fail(_C.ACL_ERROR_INVALID_PARAM, f"timeout {timeout} ms; use -1 (wait forever) or >= 0")
    return None if timeout == -1 else timeout / 1000


# -- events ---------------------------------------------------------------------------------------------


def create_event() -> tuple[int, int]:
    """``event, ret``: an event of the current context, not recorded yet."""
    try:
        _fault("rt.create_event")
        _s.require_init()
        event = _ev.Event(_s.new_handle(), _s.current_context())
        _SIM.events[event.handle] = event
        return event.handle, 0
    except _Fail as fail:
        return 0, _s.failed("acl.rt.create_event", fail)


def destroy_event(event: int, /) -> int:
    """``ret``; records still queued complete harmlessly."""
    call = "acl.rt.destroy_event"
    event = _a.k(call, 1, event)
    try:
        _fault("rt.destroy_event")
        _s.require_init()
        _event(event)
        del _SIM.events[event]
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


def record_event(event: int, stream: int, /) -> int:
    """``ret``: queues the event on ``stream``; it completes when everything queued before it has run."""
    call = "acl.rt.record_event"
    event = _a.k(call, 1, event)
    stream = _a.k(call, 2, stream)
    try:
        _fault("rt.record_event")
        _s.require_init()
        obj = _event(event)
        target = _s.stream(stream, _s.current_context())
        target.submit(_ev.complete_record, obj, obj.record())
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


def reset_event(event: int, stream: int, /) -> int:
    """``ret``: queues a reset on ``stream``; once it runs the event is "not recorded" again."""
    call = "acl.rt.reset_event"
    event = _a.k(call, 1, event)
    stream = _a.k(call, 2, stream)
    try:
        _fault("rt.reset_event")
        _s.require_init()
        obj = _event(event)
        _s.stream(stream, _s.current_context()).submit(_ev.reset_record, obj, obj.latest())
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


def query_event_status(event: int, /) -> tuple[int, int]:
    """``status, ret``: ACL_EVENT_RECORDED_STATUS_COMPLETE (1) once the latest record completed, else 0."""
    call = "acl.rt.query_event_status"
    event = _a.k(call, 1, event)
    try:
        _fault("rt.query_event_status")
        _s.require_init()
        return _event(event).status(), 0
    except _Fail as fail:
        return _K.ACL_EVENT_RECORDED_STATUS_NOT_READY, _s.failed(call, fail)


def _synchronize_event(call: str, api: str, event: int, timeout_s: "float | None") -> int:
    try:
        _fault(api)
        _s.require_init()
        obj = _event(event)
        if not obj.wait(obj.latest(), timeout_s):
            raise _Fail(_K.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, "the event did not complete within the timeout")
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


def synchronize_event(event: int, /) -> int:
    """``ret``: waits (without the GIL) for the event's latest record; at once if it was never recorded."""
    call = "acl.rt.synchronize_event"
    return _synchronize_event(call, "rt.synchronize_event", _a.k(call, 1, event), None)


def synchronize_event_with_timeout(event: int, timeout: int, /) -> int:
    """``ret``; ``timeout`` in ms, -1 waits forever; ACL_ERROR_RT_EVENT_SYNC_TIMEOUT (507047) when it expires."""
    call = "acl.rt.synchronize_event_with_timeout"
    event = _a.k(call, 1, event)
    timeout = _a.i(call, 2, timeout)
    try:
        timeout_s = _timeout_s(timeout)
    except _Fail as fail:
        return _s.failed(call, fail)
    return _synchronize_event(call, "rt.synchronize_event_with_timeout", event, timeout_s)


def event_elapsed_time(start: int, end: int, /) -> tuple[float, int]:
    """``ms, ret``: milliseconds (a C float) between two completed records."""
    call = "acl.rt.event_elapsed_time"
    start = _a.k(call, 1, start)
    end = _a.k(call, 2, end)
    try:
        _fault("rt.event_elapsed_time")
        _s.require_init()
        stamps = []
        for name, handle in (("start", start), ("end", end)):
            state, stamp = _event(handle).completed_at()
            if state == 0:
                raise _Fail(_K.ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID, f"the {name} event was never recorded")
            if state == 1:
                raise _Fail(
                    _K.ACL_ERROR_RT_EVENT_NOT_COMPLETE,
                    f"the {name} event's record has not completed; synchronize its stream first",
                )
            stamps.append(stamp)
        ms = (stamps[1] - stamps[0]) * 1000.0
        if ms < 0:
            raise _Fail(
                _K.ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL,
                f"the end event completed {-ms:.3f} ms before the start",
            )
        return _struct.unpack("<f", _struct.pack("<f", ms))[0], 0
    except _Fail as fail:
        return 0.0, _s.failed(call, fail)


def stream_wait_event(stream: int, event: int, /) -> int:
    """``ret``: ``stream``'s later tasks wait for the event's latest record (as of this call)."""
    call = "acl.rt.stream_wait_event"
    stream = _a.k(call, 1, stream)
    event = _a.k(call, 2, event)
    try:
        _fault("rt.stream_wait_event")
        _s.require_init()
        obj = _event(event)
        _s.stream(stream, _s.current_context()).submit(_ev.wait_task, obj, obj.latest())
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


# -- callbacks ------------------------------------------------------------------------------------------


def subscribe_report(thread_id: int, stream: int, /) -> int:
    """``ret``: the thread ``thread_id`` handles ``stream``'s callbacks (one thread per stream)."""
    call = "acl.rt.subscribe_report"
    thread_id = _a.k(call, 1, thread_id)
    stream = _a.k(call, 2, stream)
    try:
        _fault("rt.subscribe_report")
        _s.require_init()
        ctx = _s.current_context()
        target = _s.stream(stream, ctx)
        with _ev.CHANGED:
            if target.subscriber is not None:
                raise _Fail(
                    _K.ACL_ERROR_RT_STREAM_SUBSCRIBE,
                    f"stream 0x{stream:x} is already subscribed by thread {target.subscriber}; a stream has one "
                    "callback thread",
                )
            queue = _ev.QUEUES.get(thread_id)
            if queue is not None and queue.device not in (ctx.device, -1):
                raise _Fail(
                    _K.ACL_ERROR_RT_THREAD_SUBSCRIBE,
                    f"thread {thread_id} handles callbacks of device {queue.device}; one thread id may not serve "
                    f"two devices (this stream is on device {ctx.device})",
                )
            if queue is None:
                if len(_ev.QUEUES) >= _ev.MAX_REPORT_THREADS:
                    raise _Fail(
                        _K.ACL_ERROR_RT_THREAD_SUBSCRIBE,
                        f"{_ev.MAX_REPORT_THREADS} threads already handle callbacks in this process",
                    )
                queue = _ev.QUEUES[thread_id] = _ev.ReportQueue(thread_id, ctx.device)
            queue.device = ctx.device
            queue.streams.add(target)
            target.subscriber = thread_id
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


def unsubscribe_report(thread_id: int, stream: int, /) -> int:
    """``ret``: ``stream``'s callbacks are no longer handled by ``thread_id``."""
    call = "acl.rt.unsubscribe_report"
    thread_id = _a.k(call, 1, thread_id)
    stream = _a.k(call, 2, stream)
    try:
        _fault("rt.unsubscribe_report")
        _s.require_init()
        target = _s.stream(stream, _s.current_context())
        if target.subscriber != thread_id:
            raise _Fail(
                _K.ACL_ERROR_RT_STREAM_SUBSCRIBE,
                f"stream 0x{stream:x} is not subscribed by thread {thread_id}"
                + (f" (thread {target.subscriber} handles it)" if target.subscriber is not None else ""),
            )
        _s.unsubscribe(target)
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


def launch_callback(fn: object, user_data: object, block_type: int, stream: int, /) -> int:
    """``ret``: queues ``fn(user_data)`` on ``stream``, run by the subscribed thread in process_report.

    ``block_type`` 1 (ACL_CALLBACK_BLOCK) holds the stream's later tasks until the callback has run; 0 does
    not. The stream must be subscribed (else ACL_ERROR_RT_STREAM_NO_CB_REG, 107015).
    """
    call = "acl.rt.launch_callback"
    block_type = _a.i(call, 3, block_type)
    stream = _a.k(call, 4, stream)
    if not callable(fn):
        raise TypeError(f"{call}: parameter must be callable, not {type(fn).__name__}")
    try:
        _fault("rt.launch_callback")
        _s.require_init()
        target = _s.stream(stream, _s.current_context())
        if block_type not in (_K.ACL_CALLBACK_NO_BLOCK, _K.ACL_CALLBACK_BLOCK):
            raise _Fail(_C.ACL_ERROR_INVALID_PARAM, f"block_type {block_type}; use 0 (no block) or 1 (block)")
        with _ev.CHANGED:
            thread_id = target.subscriber
            queue = _ev.QUEUES.get(thread_id) if thread_id is not None else None
        if queue is None:
            raise _Fail(
                _K.ACL_ERROR_RT_STREAM_NO_CB_REG,
                f"no thread handles the callbacks of stream 0x{stream:x}; call acl.rt.subscribe_report first",
            )
        report = _ev.Report(fn, user_data)  # type: ignore[arg-type]
        target.submit(_ev.callback_task, queue, report, block_type == _K.ACL_CALLBACK_BLOCK)
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


def process_report(timeout: int, /) -> int:
    """``ret``: in a subscribed thread, waits up to ``timeout`` ms (-1: forever) and runs the callbacks due.

    Callbacks run in this thread, in launch order. A callback's exception propagates out of this call (the
    callbacks after it stay queued for the next call). ACL_ERROR_RT_REPORT_TIMEOUT (507012) when nothing
    came; ACL_ERROR_RT_THREAD_SUBSCRIBE (107012) in a thread subscribed to no stream.
    """
    call = "acl.rt.process_report"
    timeout = _a.i(call, 1, timeout)
    try:
        _fault("rt.process_report")
        _s.require_init()
        if timeout == 0 or timeout < -1:
            raise _Fail(_C.ACL_ERROR_RT_PARAM_INVALID, f"timeout {timeout} ms; use -1 (forever) or > 0")
        thread_id = _threading.get_ident()
        reports = _ev.take_reports(thread_id, None if timeout == -1 else timeout / 1000)
        if reports is None:
            raise _Fail(_K.ACL_ERROR_RT_REPORT_TIMEOUT, f"no callback arrived within {timeout} ms")
    except _Fail as fail:
        return _s.failed(call, fail)
    for n, report in enumerate(reports):
        try:
            report.fn(report.args)
        except BaseException:
            _ev.requeue(thread_id, reports[n + 1 :])
            raise
        finally:
            _ev.finish(report)
    return 0
