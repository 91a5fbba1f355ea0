"""acl.rt callbacks (subscribe_report, launch_callback, process_report, unsubscribe_report) and
acl.util.start_thread / stop_thread, as pyACL's rt/rt_synchronize.cpp and util/thread.cpp shape them.

Blocking is asserted by ordering: an event recorded after a blocking callback cannot complete before the
callback ran, one recorded after a non-blocking callback can. Every test runs with the simulator computing
and timing only (the ``mode`` fixture); outputs are checked when computing.
"""

from __future__ import annotations

import errno
import threading

import numpy as np
import pytest

from ge_plugin import acl_constants as C
from ge_plugin.sim import _codes as K
from ge_plugin.sim import faults, snapshot

BLOCK, NO_BLOCK = K.ACL_CALLBACK_BLOCK, K.ACL_CALLBACK_NO_BLOCK


@pytest.fixture(autouse=True)
def both_modes(mode):
    """Callbacks mean the same whether the simulator computes or only keeps time."""


def test_launch_callback_on_a_stream_nobody_subscribed_is_refused(acl, ready):
    assert acl.rt.launch_callback(print, None, BLOCK, ready) == K.ACL_ERROR_RT_STREAM_NO_CB_REG
    assert "subscribe_report" in acl.get_recent_err_msg()


def test_launch_callback_needs_a_callable(acl, ready):
    with pytest.raises(TypeError, match="callable"):
        acl.rt.launch_callback("print", None, BLOCK, ready)
    with pytest.raises(TypeError):
        acl.rt.launch_callback(print, None, BLOCK, None)


def test_process_report_in_a_thread_that_subscribed_nothing(acl, ready):
    assert acl.rt.process_report(10) == K.ACL_ERROR_RT_THREAD_SUBSCRIBE


def test_process_report_timeout_must_be_minus_one_or_positive(acl, ready):
    assert acl.rt.subscribe_report(threading.get_ident(), ready) == 0
    assert acl.rt.process_report(0) == C.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.process_report(-2) == C.ACL_ERROR_RT_PARAM_INVALID


def test_process_report_times_out_when_no_callback_comes(acl, ready):
    assert acl.rt.subscribe_report(threading.get_ident(), ready) == 0
    assert acl.rt.process_report(20) == K.ACL_ERROR_RT_REPORT_TIMEOUT


def _callback_then_event(acl, stream, user_data, block_type) -> tuple[list, int]:
    """This thread subscribed to ``stream``, a callback ``ran.append(user_data)`` queued on it, then an event
    recorded after it; returns ``(ran, event)``."""
    ran: list = []
    event, _ = acl.rt.create_event()
    assert acl.rt.subscribe_report(threading.get_ident(), stream) == 0
    assert acl.rt.launch_callback(ran.append, user_data, block_type, stream) == 0
    assert acl.rt.record_event(event, stream) == 0
    return ran, event


def test_a_blocking_callback_holds_its_stream_until_the_subscribed_thread_ran_it(acl, ready):
    ran, event = _callback_then_event(acl, ready, "first", BLOCK)
    assert acl.rt.synchronize_event_with_timeout(event, 100) == K.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT
    assert ran == []
    assert acl.rt.process_report(1000) == 0
    assert ran == ["first"]
    assert acl.rt.synchronize_event(event) == 0
    assert acl.rt.synchronize_stream(ready) == 0


def test_a_non_blocking_callback_lets_its_stream_go_on(acl, ready):
    ran, event = _callback_then_event(acl, ready, "later", NO_BLOCK)
    assert acl.rt.synchronize_event(event) == 0
    assert ran == []
    assert acl.rt.process_report(1000) == 0
    assert ran == ["later"]


def test_callbacks_run_in_the_subscribed_thread_after_the_work_before_them(
    acl, ready, load, oms, graphs, computing
):
    """The pyACL sample flow: a thread loops on process_report, the main thread queues execute + callback."""
    model = load(oms["static"])
    x = np.full((2, 3, 4), 3.0, np.float32)
    model.feed([x])
    context, _ = acl.rt.get_context()
    out_ptr = model.outputs[1][0][0]
    seen = {}
    running = [True]

    def loop(args):
        ctx, timeout = args
        assert acl.rt.set_context(ctx) == 0
        while running[0]:
            acl.rt.process_report(timeout)

    def post_process(user_data):
        out = np.empty((2, 3, 3), np.float32)
        assert (
            acl.rt.memcpy(out.ctypes.data, out.nbytes, out_ptr, out.nbytes, C.ACL_MEMCPY_DEVICE_TO_HOST) == 0
        )
        seen.update(thread=threading.get_ident(), out=out, user_data=user_data)

    tid, ret = acl.util.start_thread(loop, [context, 50])
    assert ret == 0
    try:
        assert acl.rt.subscribe_report(tid, ready) == 0
        faults.set_execute_latency_ms(100)
        assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
        assert acl.rt.launch_callback(post_process, ["request", 7], BLOCK, ready) == 0
        assert acl.rt.synchronize_stream(ready) == 0
        assert seen["thread"] == tid and seen["user_data"] == ["request", 7]
        assert snapshot()["devices"][0]["executes"] == 1
        if computing:
            np.testing.assert_allclose(seen["out"], x @ graphs.W + graphs.B, rtol=1e-6)
        assert acl.rt.unsubscribe_report(tid, ready) == 0
    finally:
        running[0] = False  # the loop must end even when an assertion failed
    assert acl.util.stop_thread(tid) == 0


def test_subscription_rules(acl, ready):
    tid = threading.get_ident()
    assert acl.rt.subscribe_report(tid, ready) == 0
    assert acl.rt.subscribe_report(tid + 1, ready) == K.ACL_ERROR_RT_STREAM_SUBSCRIBE
    assert "already subscribed by thread" in acl.get_recent_err_msg()
    assert acl.rt.unsubscribe_report(tid + 1, ready) == K.ACL_ERROR_RT_STREAM_SUBSCRIBE
    other, _ = acl.rt.create_stream()
    assert acl.rt.subscribe_report(tid, other) == 0  # one thread may serve several streams of a device
    assert acl.rt.subscribe_report(tid, 0) == 0  # the default stream
    assert acl.rt.unsubscribe_report(tid, ready) == 0
    assert acl.rt.unsubscribe_report(tid, ready) == K.ACL_ERROR_RT_STREAM_SUBSCRIBE


def test_one_thread_id_may_not_serve_two_devices(acl, ready):
    tid = threading.get_ident()
    assert acl.rt.subscribe_report(tid, ready) == 0
    assert acl.rt.set_device(1) == 0
    stream1, _ = acl.rt.create_stream()
    assert acl.rt.subscribe_report(tid, stream1) == K.ACL_ERROR_RT_THREAD_SUBSCRIBE


def test_a_callback_that_raises_raises_from_process_report_and_the_rest_stay_queued(acl, ready):
    tid = threading.get_ident()
    ran = []

    def boom(_):
        raise ValueError("callback failed")

    assert acl.rt.subscribe_report(tid, ready) == 0
    assert acl.rt.launch_callback(boom, None, NO_BLOCK, ready) == 0
    assert acl.rt.launch_callback(ran.append, 2, NO_BLOCK, ready) == 0
    assert acl.rt.synchronize_stream(ready) == 0
    with pytest.raises(ValueError, match="callback failed"):
        acl.rt.process_report(1000)
    assert ran == []
    assert acl.rt.process_report(1000) == 0
    assert ran == [2]


def test_destroying_a_subscribed_stream_unsubscribes_it(acl, ready):
    tid = threading.get_ident()
    other, _ = acl.rt.create_stream()
    assert acl.rt.subscribe_report(tid, other) == 0
    assert acl.rt.destroy_stream(other) == 0
    assert acl.rt.process_report(10) == K.ACL_ERROR_RT_THREAD_SUBSCRIBE


def test_start_thread_calls_fn_with_args_and_its_id_is_the_threads_ident(acl):
    seen = []
    tid, ret = acl.util.start_thread(lambda args: seen.append((threading.get_ident(), args)), [1, 2])
    assert ret == 0
    assert acl.util.stop_thread(tid) == 0
    assert seen == [(tid, [1, 2])]


def test_start_thread_with_none_calls_fn_without_arguments(acl):
    seen = []
    tid, _ = acl.util.start_thread(lambda: seen.append("called"), None)
    assert acl.util.stop_thread(tid) == 0
    assert seen == ["called"]


def test_stop_thread_raises_what_the_thread_raised(acl, capsys):
    def fail(_):
        raise ValueError("bad")

    tid, _ = acl.util.start_thread(fail, [])
    with pytest.raises(RuntimeError, match=r"exception=ValueError,msg=thread call failed;"):
        acl.util.stop_thread(tid)
    assert "ValueError: bad" in capsys.readouterr().err


def test_stop_thread_of_an_unknown_id_is_esrch(acl):
    assert acl.util.stop_thread(12345) == errno.ESRCH


def test_start_thread_parses_like_pyacl(acl):
    with pytest.raises(TypeError, match="callable"):
        acl.util.start_thread(1, None)
    with pytest.raises(TypeError):
        acl.util.start_thread(print)
    with pytest.raises(TypeError):
        acl.util.stop_thread(np.uint64(1))
