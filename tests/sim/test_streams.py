"""Streams are really asynchronous: ordered per stream, waited on without the GIL, errors at synchronize.

Tests taking ``mode`` run twice: with the simulator computing (a worker thread per stream) and timing only
(records settled by the clock, see ge_plugin.sim.streams). The others are about the computing mode's
worker and data."""

from __future__ import annotations

import faulthandler
import sys
import threading
import time

import numpy as np
import pytest

from ge_plugin import acl_constants as C
from ge_plugin.sim import _codes as K
from ge_plugin.sim import device_time, faults, snapshot

#: these tests use the deprecated acl.util.ptr_to_numpy on purpose (pyACL warns on every call)
pytestmark = pytest.mark.filterwarnings("ignore:acl.util.ptr_to_numpy will be deprecated")


def pinned(acl, array: np.ndarray) -> int:
    ptr, ret = acl.rt.malloc_host(array.nbytes)
    assert ret == 0
    acl.util.ptr_to_numpy(ptr, array.shape, {np.float32: 11, np.int64: 7}[array.dtype.type])[...] = array
    return ptr


def test_copy_execute_copy_on_one_stream_gives_the_right_numbers_only_after_sync(
    acl, ready, load, oms, graphs
):
    model = load(oms["static"])
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    host_in = pinned(acl, x)
    host_out = pinned(acl, np.zeros((2, 3, 3), np.float32))
    (in_ptr, in_size, _), (out_ptr, out_size, _) = model.inputs[1][0], model.outputs[1][0]
    faults.set_execute_latency_ms(100)
    assert acl.rt.memcpy_async(in_ptr, in_size, host_in, x.nbytes, 1, ready) == 0
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    assert acl.rt.memcpy_async(host_out, out_size, out_ptr, 2 * 3 * 3 * 4, 2, ready) == 0
    result = acl.util.ptr_to_numpy(host_out, (2, 3, 3), 11)
    assert not result.any(), "the results arrived before the stream could have run"
    assert acl.rt.synchronize_stream(ready) == 0
    np.testing.assert_allclose(result, x @ graphs.W + graphs.B, rtol=1e-6)


def test_tasks_on_a_stream_run_in_submission_order(acl, ready):
    size = 64
    a, _ = acl.rt.malloc(size, 0)
    b, _ = acl.rt.malloc(size, 0)
    host, _ = acl.rt.malloc_host(size)
    for value in range(1, 40):
        assert acl.rt.memset_async(a, size, value, size, ready) == 0
        assert acl.rt.memcpy_async(b, size, a, size, 3, ready) == 0
    assert acl.rt.memcpy_async(host, size, b, size, 2, ready) == 0
    assert acl.rt.synchronize_stream(ready) == 0
    assert acl.util.ptr_to_bytes(host, size) == bytes([39]) * size


def test_synchronize_releases_the_gil(acl, ready, load, oms):
    # Another thread holds the device, and lets it go only after running Python code once this thread has
    # entered synchronize_stream. With a one-second switch interval this thread hands the GIL over only when
    # it blocks without it: a synchronize that kept the GIL would never return (the watchdog then ends the
    # run with every thread's traceback).
    model = load(oms["static"])
    model.feed([np.ones((2, 3, 4), np.float32)])
    entering = threading.Event()
    order = []

    def holder():
        with device_time.occupy(0):
            held.set()
            entering.wait()
            order.append("the holder ran while synchronize waited")

    held = threading.Event()
    thread = threading.Thread(target=holder)
    interval = sys.getswitchinterval()
    faulthandler.dump_traceback_later(120, exit=True)
    try:
        thread.start()
        held.wait()
        assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
        sys.setswitchinterval(1.0)
        entering.set()
        assert acl.rt.synchronize_stream(ready) == 0
        order.append("synchronize returned")
    finally:
        sys.setswitchinterval(interval)
        faulthandler.cancel_dump_traceback_later()
        thread.join()
    assert order == ["the holder ran while synchronize waited", "synchronize returned"]


def test_execute_async_returns_before_its_device_time(acl, ready, load, oms, mode):
    """execute_async queues the work: an event recorded after it is not complete when the call returns, and
    the device time is taken before the stream's synchronize returns."""
    model = load(oms["static"])
    model.feed([np.ones((2, 3, 4), np.float32)])
    done, _ = acl.rt.create_event()
    faults.set_execute_latency_ms(300)
    start = time.monotonic()
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    assert acl.rt.record_event(done, ready) == 0
    assert acl.rt.query_event_status(done) == (K.ACL_EVENT_RECORDED_STATUS_NOT_READY, 0)
    assert acl.rt.synchronize_stream(ready) == 0
    assert time.monotonic() - start >= 0.3
    assert acl.rt.query_event_status(done) == (K.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)


def test_synchronize_sleeps_without_the_gil(acl, ready, load, oms, mode, spinning):
    model = load(oms["static"])
    model.feed([np.ones((2, 3, 4), np.float32)])
    faults.set_execute_latency_ms(300)
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1.0)  # the spinner runs only when synchronize lets the GIL go
    try:
        with spinning() as counts:
            assert acl.rt.synchronize_stream(ready) == 0
    finally:
        sys.setswitchinterval(interval)
    assert counts[0] > 10_000, "the spinning thread made no progress while synchronize_stream waited"


def test_execute_latency_runs_on_the_stream_not_in_the_caller(acl, ready, load, oms):
    # The device is held here, so the execute cannot run: execute_async must still return (it queued the
    # work), and the work completes only once the device is let go.
    model = load(oms["static"])
    model.feed([np.ones((2, 3, 4), np.float32)])
    done, ret = acl.rt.create_event()
    assert ret == 0
    order = []
    with device_time.occupy(0):
        assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
        assert acl.rt.record_event(done, ready) == 0
        order.append("execute_async returned")
        status, ret = acl.rt.query_event_status(done)
        assert (status, ret) == (K.ACL_EVENT_RECORDED_STATUS_NOT_READY, 0)
    order.append("device let go")
    assert acl.rt.synchronize_stream(ready) == 0
    assert acl.rt.query_event_status(done) == (K.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)
    assert order == ["execute_async returned", "device let go"]
    assert acl.rt.destroy_event(done) == 0


def test_synchronize_with_timeout_expires(acl, ready, load, oms, mode):
    model = load(oms["static"])
    model.feed([np.ones((2, 3, 4), np.float32)])
    faults.set_execute_latency_ms(300)
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    assert acl.rt.synchronize_stream_with_timeout(ready, 10) == C.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
    assert acl.rt.synchronize_stream(ready) == 0


def test_idle_synchronize_does_not_sleep(acl, ready, monkeypatch, mode):
    slept = []
    monkeypatch.setattr(time, "sleep", lambda seconds: slept.append(seconds))
    for _ in range(1000):
        assert acl.rt.synchronize_stream(ready) == 0
    assert slept == []


def test_destroy_stream_waits_for_pending_work(acl, ready, load, oms, graphs, computing):
    model = load(oms["static"])
    x = np.full((2, 3, 4), 2.0, np.float32)
    model.feed([x])
    faults.set_execute_latency_ms(100)
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    assert acl.rt.destroy_stream(ready) == 0
    ((start, end),) = snapshot()["devices"][0]["compute_intervals"]
    assert end - start >= 0.1 and end <= time.monotonic()
    if computing:
        np.testing.assert_allclose(model.fetch([np.float32])[0], x @ graphs.W + graphs.B, rtol=1e-6)


def test_execute_errors_surface_at_synchronize(acl, ready, load, oms, mode):
    model = load(oms["static"])
    ptr, _, buf = model.inputs[1][0]
    assert acl.update_data_buffer(buf, ptr, 8) == 0  # smaller than the model's input
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    assert acl.rt.synchronize_stream(ready) == C.ACL_ERROR_GE_PARAM_INVALID
    assert "needs 96 bytes" in acl.get_recent_err_msg()
    assert acl.rt.synchronize_stream(ready) == 0  # reported once


def test_one_model_may_not_run_on_two_streams_at_once(acl, ready, load, oms, mode):
    model = load(oms["static"])
    model.feed([np.ones((2, 3, 4), np.float32)])
    other, _ = acl.rt.create_stream()
    faults.set_execute_latency_ms(200)
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0  # same stream: fine
    assert (
        acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], other)
        == C.ACL_ERROR_RT_STREAM_MODEL
    )
    assert "two streams" in acl.get_recent_err_msg()
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == C.ACL_ERROR_RT_STREAM_MODEL
    assert acl.rt.synchronize_stream(ready) == 0
    faults.set_execute_latency_ms(0)
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], other) == 0
    assert acl.rt.synchronize_stream(other) == 0


def test_default_stream_runs_async_work(acl, ready, load, oms, graphs, computing):
    model = load(oms["static"])
    x = np.full((2, 3, 4), 0.5, np.float32)
    model.feed([x])
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], 0) == 0
    assert acl.rt.synchronize_stream(0) == 0
    assert snapshot()["devices"][0]["executes"] == 1
    if computing:
        np.testing.assert_allclose(model.fetch([np.float32])[0], x @ graphs.W + graphs.B, rtol=1e-6)


def test_synchronize_device_waits_for_every_stream(acl, ready, load, oms, mode):
    model = load(oms["static"])
    model.feed([np.ones((2, 3, 4), np.float32)])
    faults.set_execute_latency_ms(100)
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    start = time.perf_counter()
    assert acl.rt.synchronize_device() == 0
    assert time.perf_counter() - start >= 0.09
    assert snapshot()["devices"][0]["executes"] == 1


def test_unload_waits_for_queued_executes(acl, ready, load, oms, mode):
    model = load(oms["static"])
    model.feed([np.ones((2, 3, 4), np.float32)])
    faults.set_execute_latency_ms(100)
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    assert acl.mdl.unload(model.id) == 0
    assert acl.rt.synchronize_stream(ready) == 0
    assert snapshot()["devices"][0]["executes"] == 1
