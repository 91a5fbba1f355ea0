"""What streams, events and callbacks guarantee, whether the simulator computes or only keeps time.

Every test runs in both modes (the ``mode`` fixture). Orderings are asserted through events (status,
elapsed time), compute windows and counters, never through wall-clock upper bounds; a lower bound on wall
time shows the host waited the device time.
"""

from __future__ import annotations

import json
import os
import threading
import time

import numpy as np
import pytest

from ge_plugin import acl_constants as C
from ge_plugin.sim import _codes as K
from ge_plugin.sim import device_time, faults, sanitizer, snapshot
from ge_plugin.sim.device_time import LatencyProfile

NOT_READY, COMPLETE = K.ACL_EVENT_RECORDED_STATUS_NOT_READY, K.ACL_EVENT_RECORDED_STATUS_COMPLETE
BLOCK, NO_BLOCK = K.ACL_CALLBACK_BLOCK, K.ACL_CALLBACK_NO_BLOCK


@pytest.fixture(autouse=True)
def both_modes(mode):
    """Every test here, computing and timing only."""


def _static(load, oms):
    model = load(oms["static"])
    model.feed([np.ones((2, 3, 4), np.float32)])
    return model


def _execute(acl, model, stream) -> None:
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], stream) == 0


def _event(acl) -> int:
    event, ret = acl.rt.create_event()
    assert ret == 0
    return event


def _windows(device: int = 0) -> list[tuple[float, float]]:
    return [tuple(w) for w in snapshot()["devices"][device]["compute_intervals"]]


def test_an_event_orders_work_across_streams(acl, ready, load, oms):
    """B waits for A's record: B's execute starts after A's ends, B's record completes after A's."""
    first, second = _static(load, oms), load(oms["batch"])
    assert acl.mdl.set_dynamic_batch_size(second.id, second.inputs[0], second.mbatch, 1) == 0
    other, _ = acl.rt.create_stream()
    a_done, b_done = _event(acl), _event(acl)
    device_time.set_profile(LatencyProfile({"static": 150.0, "1": 50.0}))
    _execute(acl, first, ready)
    assert acl.rt.record_event(a_done, ready) == 0
    assert acl.rt.stream_wait_event(other, a_done) == 0
    _execute(acl, second, other)
    assert acl.rt.record_event(b_done, other) == 0
    assert acl.rt.query_event_status(b_done) == (NOT_READY, 0)
    assert acl.rt.synchronize_stream(other) == 0
    assert acl.rt.query_event_status(a_done) == (COMPLETE, 0), "B finished before the record it waits for"
    ms, ret = acl.rt.event_elapsed_time(a_done, b_done)
    assert ret == 0 and ms >= 50.0
    (a_start, a_end), (b_start, b_end) = sorted(_windows())
    assert a_end - a_start >= 0.150 and b_start >= a_end and b_end - b_start >= 0.050
    assert acl.rt.synchronize_stream(ready) == 0


def test_stream_wait_event_waits_for_the_record_made_before_it_only(acl, ready, load, oms):
    """A later record of the same event (after a long execute) does not hold the waiting stream."""
    model = _static(load, oms)
    other, _ = acl.rt.create_stream()
    event, b_done = _event(acl), _event(acl)
    assert acl.rt.record_event(event, ready) == 0
    assert acl.rt.stream_wait_event(other, event) == 0
    assert acl.rt.record_event(b_done, other) == 0
    faults.set_execute_latency_ms(400)
    _execute(acl, model, ready)
    assert acl.rt.record_event(event, ready) == 0  # a newer record, behind the execute
    assert acl.rt.synchronize_event(b_done) == 0
    assert acl.rt.query_event_status(event) == (NOT_READY, 0), "the wait took the later record"
    assert acl.rt.synchronize_stream(ready) == 0
    assert acl.rt.query_event_status(event) == (COMPLETE, 0)


def test_query_event_before_and_after_its_record_completes(acl, ready, load, oms):
    model = _static(load, oms)
    event = _event(acl)
    assert acl.rt.query_event(event) == (
        K.ACL_EVENT_STATUS_COMPLETE,
        0,
    )  # never recorded: nothing to wait for
    assert acl.rt.query_event_status(event) == (NOT_READY, 0)
    faults.set_execute_latency_ms(200)
    _execute(acl, model, ready)
    assert acl.rt.record_event(event, ready) == 0
    assert acl.rt.query_event(event) == (K.ACL_EVENT_STATUS_NOT_READY, 0)
    assert acl.rt.query_event_status(event) == (NOT_READY, 0)
    assert acl.rt.event_elapsed_time(event, event)[1] == K.ACL_ERROR_RT_EVENT_NOT_COMPLETE
    assert acl.rt.synchronize_event(event) == 0
    assert acl.rt.query_event(event) == (K.ACL_EVENT_STATUS_COMPLETE, 0)
    assert acl.rt.query_event_status(event) == (COMPLETE, 0)
    assert acl.rt.event_elapsed_time(event, event) == (0.0, 0)


def test_a_record_completes_once_its_time_has_passed_without_a_synchronize(acl, ready, load, oms):
    """Polling is enough: query_event_status reports COMPLETE once the work before the record is done."""
    model = _static(load, oms)
    event = _event(acl)
    faults.set_execute_latency_ms(50)
    _execute(acl, model, ready)
    assert acl.rt.record_event(event, ready) == 0
    deadline = time.monotonic() + 60
    while acl.rt.query_event_status(event) != (COMPLETE, 0):
        assert time.monotonic() < deadline, "the record never completed"
        time.sleep(0.005)
    assert snapshot()["devices"][0]["executes"] == 1


class _ReportThread:
    """A thread that runs ``process_report`` until stopped, as the pyACL samples' callback thread does."""

    def __init__(self, acl):
        self.acl = acl
        self.running = True
        context, _ = acl.rt.get_context()
        self.id, ret = acl.util.start_thread(self._loop, [context])
        assert ret == 0

    def _loop(self, args):
        assert self.acl.rt.set_context(args[0]) == 0
        while self.running:
            self.acl.rt.process_report(20)

    def stop(self):
        self.running = False
        assert self.acl.util.stop_thread(self.id) == 0


def test_callbacks_run_in_launch_order_in_their_thread(acl, ready, load, oms):
    model = _static(load, oms)
    other, _ = acl.rt.create_stream()
    ran: list[tuple[str, int]] = []
    after_block = _event(acl)

    def note(name):
        ran.append((name, threading.get_ident()))

    reports = _ReportThread(acl)
    try:
        assert acl.rt.subscribe_report(reports.id, ready) == 0
        assert acl.rt.subscribe_report(reports.id, other) == 0
        faults.set_execute_latency_ms(30)
        assert acl.rt.launch_callback(note, "a1", NO_BLOCK, ready) == 0
        _execute(acl, model, ready)
        assert acl.rt.launch_callback(note, "a2", BLOCK, ready) == 0
        assert acl.rt.record_event(after_block, ready) == 0
        assert acl.rt.launch_callback(note, "a3", NO_BLOCK, ready) == 0
        assert acl.rt.launch_callback(note, "b1", BLOCK, other) == 0
        assert acl.rt.launch_callback(note, "b2", NO_BLOCK, other) == 0
        assert acl.rt.synchronize_event(after_block) == 0
        assert ("a2", reports.id) in ran, (
            "an event recorded after a blocking callback completed before it ran"
        )
        assert acl.rt.synchronize_stream(ready) == 0
        assert acl.rt.synchronize_stream(other) == 0
        deadline = time.monotonic() + 60
        while len(ran) < 5:  # the non-blocking ones may still be on their way
            assert time.monotonic() < deadline
            time.sleep(0.005)
    finally:
        reports.stop()
    assert {thread for _, thread in ran} == {reports.id}
    names = [name for name, _ in ran]
    assert [n for n in names if n[0] == "a"] == ["a1", "a2", "a3"]
    assert [n for n in names if n[0] == "b"] == ["b1", "b2"]


def test_process_report_waits_for_a_callback_behind_work(acl, ready, load, oms):
    """The callback thread is already waiting when the callback is launched behind a long execute."""
    model = _static(load, oms)
    tid = threading.get_ident()
    assert acl.rt.subscribe_report(tid, ready) == 0
    ran = []
    faults.set_execute_latency_ms(150)
    start = time.monotonic()
    _execute(acl, model, ready)
    assert acl.rt.launch_callback(ran.append, "after", NO_BLOCK, ready) == 0
    assert acl.rt.process_report(10) == K.ACL_ERROR_RT_REPORT_TIMEOUT  # the execute is not done
    assert ran == []
    assert acl.rt.process_report(-1) == 0
    assert ran == ["after"] and time.monotonic() - start >= 0.15
    assert acl.rt.synchronize_stream(ready) == 0


def test_synchronize_device_waits_for_every_stream_and_reports_the_first_error(acl, ready, load, oms):
    slow, broken, third = _static(load, oms), _static(load, oms), _static(load, oms)
    other, _ = acl.rt.create_stream()
    on_default = _event(acl)
    ptr, _, buf = broken.inputs[1][0]
    assert acl.update_data_buffer(buf, ptr, 8) == 0  # smaller than the model's input
    faults.set_execute_latency_ms(100)
    start = time.monotonic()
    _execute(acl, slow, ready)
    _execute(acl, broken, other)
    _execute(acl, third, 0)
    assert acl.rt.record_event(on_default, 0) == 0
    assert acl.rt.synchronize_device() == C.ACL_ERROR_GE_PARAM_INVALID
    assert time.monotonic() - start >= 0.2, "two executes of 100 ms on one device"
    assert "needs 96 bytes" in acl.get_recent_err_msg()
    assert acl.rt.query_event_status(on_default) == (COMPLETE, 0)
    assert snapshot()["devices"][0]["executes"] == 2
    for stream in (ready, other, 0):
        assert acl.rt.synchronize_stream(stream) == 0, "an error is reported once"


def test_an_execute_error_is_reported_by_its_own_stream_only(acl, ready, load, oms):
    good, broken = _static(load, oms), _static(load, oms)
    other, _ = acl.rt.create_stream()
    assert acl.mdl.set_dynamic_batch_size(good.id, good.inputs[0], 0, 1) == C.ACL_ERROR_MODEL_NOT_DYNAMIC
    acl.get_recent_err_msg()
    _, _, buf = broken.outputs[1][0]
    ptr = broken.outputs[1][0][0]
    assert acl.update_data_buffer(buf, ptr, 4) == 0  # too small for the output
    faults.set_execute_latency_ms(40)
    _execute(acl, broken, ready)
    _execute(acl, good, other)
    assert acl.rt.synchronize_stream(other) == 0
    assert acl.rt.synchronize_stream(ready) == C.ACL_ERROR_GE_PARAM_INVALID
    assert "produces 72 bytes" in acl.get_recent_err_msg()
    assert acl.rt.synchronize_stream(ready) == 0
    windows = _windows()
    assert len(windows) == 2, "an output too small is found after the device time, as when computing"
    assert all(end - start >= 0.040 for start, end in windows)


def test_a_gear_never_set_is_reported_at_synchronize(acl, ready, load, oms):
    model = load(oms["batch"])
    _execute(acl, model, ready)
    assert acl.rt.synchronize_stream(ready) == C.ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID
    assert "set_dynamic_batch_size" in acl.get_recent_err_msg()
    assert snapshot()["devices"][0]["executes"] == 0 and _windows() == []


def test_a_copy_queued_behind_work_fails_if_its_memory_is_freed_first(acl, ready, load, oms):
    model = _static(load, oms)
    dev, _ = acl.rt.malloc(128, 0)
    host, _ = acl.rt.malloc_host(128)
    faults.set_execute_latency_ms(300)
    _execute(acl, model, ready)
    assert acl.rt.memcpy_async(dev, 128, host, 128, C.ACL_MEMCPY_HOST_TO_DEVICE, ready) == 0
    assert acl.rt.free(dev) == 0  # while the execute ahead of the copy still runs
    assert acl.rt.synchronize_stream(ready) == C.ACL_ERROR_RT_MEMORY_FREE
    assert "freed before it ran" in acl.get_recent_err_msg()


def test_counters_count_executes_by_gear_copies_and_device_time(acl, ready, load, oms):
    model = load(oms["batch"])
    host, _ = acl.rt.malloc_host(4 * 3 * 4 * 4)
    in_ptr = model.inputs[1][0][0]
    device_time.set_profile(LatencyProfile({"1": 20.0, "4": 40.0}))
    before = snapshot()["devices"][0]
    for batch in (1, 4, 4):
        # the gear is in device memory, which the setter writes now: the execute before must be done
        assert acl.mdl.set_dynamic_batch_size(model.id, model.inputs[0], model.mbatch, batch) == 0
        assert acl.rt.memcpy_async(in_ptr, 192, host, batch * 48, C.ACL_MEMCPY_HOST_TO_DEVICE, ready) == 0
        _execute(acl, model, ready)
        assert acl.rt.synchronize_stream(ready) == 0
    device = snapshot()["devices"][0]
    assert device["executes"] == 3 and device["executes_by_gear"] == {"1": 1, "4": 2}
    assert device["memcpy_calls"]["h2d"] - before["memcpy_calls"]["h2d"] == 3
    assert device["memcpy_bytes"]["h2d"] - before["memcpy_bytes"]["h2d"] == 48 * 9
    assert device["busy_ms"] >= 100.0 and len(device["compute_intervals"]) == 3
    assert device["mallocs"] == before["mallocs"], "no allocation per execute"


def test_finalize_waits_for_queued_work_and_reports_it(acl, model_class, oms, tmp_path, monkeypatch):
    monkeypatch.setenv("GE_PLUGIN_SIM_REPORT_DIR", str(tmp_path))
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    ready, _ = acl.rt.create_stream()
    model = model_class(acl, oms["static"])
    faults.set_execute_latency_ms(100)
    _execute(acl, model, ready)
    _execute(acl, model, ready)
    start = time.monotonic()
    assert acl.finalize() == 0
    assert time.monotonic() - start >= 0.15
    (report,) = tmp_path.glob(f"sim-{os.getpid()}-*.json")
    device = json.loads(report.read_text())["devices"][0]
    assert device["executes"] == 2 and device["busy_ms"] >= 200.0


def test_the_sanitizer_checks_datasets_and_copies_at_the_call(acl, ready, load, oms, checking):
    model = _static(load, oms)
    ptr, size, buf = model.inputs[1][0]
    assert acl.update_data_buffer(buf, ptr, size + 64) == 0  # claims more than its allocation holds
    ret = acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready)
    assert ret == C.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID
    assert "past the end" in acl.get_recent_err_msg()
    host, _ = acl.rt.malloc_host(256)
    assert (
        acl.rt.memcpy_async(ptr, 256, host, 256, C.ACL_MEMCPY_HOST_TO_DEVICE, ready)
        == C.ACL_ERROR_INVALID_PARAM
    )
    assert "past the end" in acl.get_recent_err_msg()
    assert acl.rt.synchronize_stream(ready) == 0
    kinds = [f.kind for f in sanitizer.findings() if f.severity == sanitizer.ERROR]
    assert kinds == [sanitizer.OUT_OF_BOUNDS, sanitizer.OUT_OF_BOUNDS]
