"""acl.rt events: what a record captures, waits on streams and on the host, status, elapsed time, codes.

Call forms as pyACL's rt/rt_synchronize.cpp builds them; orderings are asserted through what a stream has
done when an event completes, never through wall-clock upper bounds. Every test runs with the simulator
computing and timing only (the ``mode`` fixture); outputs are checked when computing.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ge_plugin import acl_constants as C
from ge_plugin.sim import _codes as K
from ge_plugin.sim import faults, snapshot

NOT_READY, COMPLETE = K.ACL_EVENT_RECORDED_STATUS_NOT_READY, K.ACL_EVENT_RECORDED_STATUS_COMPLETE


@pytest.fixture(autouse=True)
def both_modes(mode):
    """Events mean the same whether the simulator computes or only keeps time."""


@pytest.fixture
def event(acl, ready):
    handle, ret = acl.rt.create_event()
    assert ret == 0 and handle
    return handle


def _static(load, oms, value: float = 1.0):
    model = load(oms["static"])
    x = np.full((2, 3, 4), value, np.float32)
    model.feed([x])
    return model, x


def test_create_event_needs_a_context(acl):
    assert acl.init() == 0
    assert acl.rt.create_event() == (0, C.ACL_ERROR_RT_CONTEXT_NULL)


def test_destroy_event_twice_is_an_invalid_handle(acl, event):
    assert acl.rt.destroy_event(event) == 0
    assert acl.rt.destroy_event(event) == C.ACL_ERROR_INVALID_PARAM
    assert "not a live event" in acl.get_recent_err_msg()


def test_event_handles_are_not_other_handles(acl, event, ready):
    assert acl.rt.record_event(acl.mdl.create_dataset(), ready) == C.ACL_ERROR_INVALID_PARAM
    assert "dataset handle, not an event" in acl.get_recent_err_msg()


def test_an_event_never_recorded_is_not_ready_and_waits_return_at_once(acl, event, ready):
    assert acl.rt.query_event_status(event) == (NOT_READY, 0)
    assert acl.rt.synchronize_event(event) == 0
    assert acl.rt.stream_wait_event(ready, event) == 0
    assert acl.rt.synchronize_stream(ready) == 0


def test_a_record_completes_after_the_work_queued_before_it(acl, ready, event, load, oms, graphs, computing):
    model, x = _static(load, oms)
    faults.set_execute_latency_ms(200)
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    assert acl.rt.record_event(event, ready) == 0
    assert acl.rt.query_event_status(event) == (NOT_READY, 0)
    assert acl.rt.synchronize_event(event) == 0
    assert acl.rt.query_event_status(event) == (COMPLETE, 0)
    assert snapshot()["devices"][0]["executes"] == 1
    if computing:
        np.testing.assert_allclose(model.fetch([np.float32])[0], x @ graphs.W + graphs.B, rtol=1e-6)


def test_synchronize_event_releases_the_gil(acl, ready, event, load, oms, spinning):
    model, _ = _static(load, oms)
    faults.set_execute_latency_ms(300)
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    assert acl.rt.record_event(event, ready) == 0
    with spinning() as counts:
        assert acl.rt.synchronize_event(event) == 0
    assert counts[0] > 10_000, "the spinning thread made no progress while synchronize_event waited"


def test_stream_wait_event_holds_the_other_stream_until_the_record_completes(
    acl, ready, event, load, oms, graphs, computing
):
    """Stream B copies stream A's output back: without the wait it would read the output buffer before A's
    execute wrote it (the 0xA5 fill of fresh device memory). An event recorded on B after the copy
    completes after A's record, and once B is synchronized A's record has completed too."""
    model, x = _static(load, oms, 2.0)
    other, _ = acl.rt.create_stream()
    copied, _ = acl.rt.create_event()
    out_ptr, out_size, _ = model.outputs[1][0]
    host, _ = acl.rt.malloc_host(out_size)
    faults.set_execute_latency_ms(200)
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    assert acl.rt.record_event(event, ready) == 0
    assert acl.rt.stream_wait_event(other, event) == 0
    assert (
        acl.rt.memcpy_async(host, out_size, out_ptr, 2 * 3 * 3 * 4, C.ACL_MEMCPY_DEVICE_TO_HOST, other) == 0
    )
    assert acl.rt.record_event(copied, other) == 0
    assert acl.rt.synchronize_stream(other) == 0
    assert acl.rt.query_event_status(event) == (COMPLETE, 0)
    ms, ret = acl.rt.event_elapsed_time(event, copied)
    assert ret == 0 and ms >= 0.0
    if computing:
        got = np.frombuffer(acl.util.ptr_to_bytes(host, 2 * 3 * 3 * 4), np.float32).reshape(2, 3, 3)
        np.testing.assert_allclose(got, x @ graphs.W + graphs.B, rtol=1e-6)


def test_stream_wait_event_waits_for_the_record_made_before_it_not_later_ones(acl, ready, event):
    other, _ = acl.rt.create_stream()
    assert acl.rt.record_event(event, ready) == 0
    assert acl.rt.synchronize_stream(ready) == 0
    assert acl.rt.stream_wait_event(other, event) == 0  # the completed record: no wait
    assert acl.rt.synchronize_stream(other) == 0


def test_event_elapsed_time_measures_the_device_time_between_two_records(acl, ready, load, oms):
    model, _ = _static(load, oms)
    start, _ = acl.rt.create_event()
    end, _ = acl.rt.create_event()
    faults.set_execute_latency_ms(100)
    assert acl.rt.record_event(start, ready) == 0
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    assert acl.rt.record_event(end, ready) == 0
    assert acl.rt.synchronize_stream(ready) == 0
    ms, ret = acl.rt.event_elapsed_time(start, end)
    assert ret == 0 and isinstance(ms, float) and ms >= 100.0
    assert np.float32(ms) == ms, "pyACL returns a C float"


def test_event_elapsed_time_codes(acl, ready, load, oms):
    model, _ = _static(load, oms)
    start, _ = acl.rt.create_event()
    end, _ = acl.rt.create_event()
    assert acl.rt.event_elapsed_time(start, end) == (0.0, K.ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID)
    assert "never recorded" in acl.get_recent_err_msg()
    assert acl.rt.record_event(end, ready) == 0
    assert acl.rt.record_event(start, ready) == 0  # end before start
    assert acl.rt.synchronize_stream(ready) == 0
    assert acl.rt.event_elapsed_time(start, end)[1] == K.ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL
    faults.set_execute_latency_ms(300)
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    assert acl.rt.record_event(end, ready) == 0
    assert acl.rt.event_elapsed_time(start, end) == (0.0, K.ACL_ERROR_RT_EVENT_NOT_COMPLETE)
    assert acl.rt.synchronize_stream(ready) == 0


def test_reset_event_makes_it_not_recorded_again(acl, ready, event):
    assert acl.rt.record_event(event, ready) == 0
    assert acl.rt.synchronize_stream(ready) == 0
    assert acl.rt.query_event_status(event) == (COMPLETE, 0)
    assert acl.rt.reset_event(event, ready) == 0
    assert acl.rt.synchronize_stream(ready) == 0
    assert acl.rt.query_event_status(event) == (NOT_READY, 0)


def test_synchronize_event_with_timeout_expires(acl, ready, event, load, oms):
    model, _ = _static(load, oms)
    faults.set_execute_latency_ms(300)
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    assert acl.rt.record_event(event, ready) == 0
    assert acl.rt.synchronize_event_with_timeout(event, 10) == K.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT
    assert acl.rt.synchronize_event_with_timeout(event, -1) == 0
    assert acl.rt.synchronize_event_with_timeout(event, -2) == C.ACL_ERROR_INVALID_PARAM


def test_record_on_a_stream_of_another_context_is_refused(acl, ready, event):
    assert acl.rt.create_context(0)[1] == 0  # now current: `ready` belongs to the default context
    assert acl.rt.record_event(event, ready) == C.ACL_ERROR_RT_STREAM_CONTEXT


def test_event_calls_parse_like_pyacl(acl, ready, event):
    with pytest.raises(TypeError):
        acl.rt.record_event(event, None)
    with pytest.raises(TypeError):
        acl.rt.create_event(0)  # stricter: pyACL ignores the argument
    with pytest.raises(TypeError):
        acl.rt.event_elapsed_time(np.uint64(event), event)


def test_finalize_does_not_hang_on_a_stream_waiting_for_a_record_that_never_comes(acl, ready, event):
    other, _ = acl.rt.create_stream()
    tid = threading.get_ident()
    assert acl.rt.subscribe_report(tid, ready) == 0
    assert acl.rt.launch_callback(lambda _: None, None, K.ACL_CALLBACK_BLOCK, ready) == 0  # never processed
    assert acl.rt.record_event(event, ready) == 0
    assert acl.rt.stream_wait_event(other, event) == 0
    assert acl.rt.synchronize_stream_with_timeout(other, 50) == C.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
    assert acl.finalize() == 0
