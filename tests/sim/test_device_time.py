"""The device-time model: device time per gear, timing-only executes, one compute queue per device.

Serialisation is asserted on the compute windows the simulator records (``compute_intervals``, monotonic
seconds, one clock for every process), never on wall-clock upper bounds: windows of one device never overlap,
windows of two devices do, copies finish while a compute is still running.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from ge_plugin import acl_constants as C
from ge_plugin.sim import _config, device_time, faults, reset_counters, snapshot
from ge_plugin.sim.device_time import LatencyProfile


def _windows(device: int = 0) -> list[tuple[float, float]]:
    return [tuple(w) for w in snapshot()["devices"][device]["compute_intervals"]]


def _disjoint(windows) -> bool:
    ordered = sorted(windows)
    return all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(ordered))


def _overlap(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _batch_model(load, oms, batch: int):
    model = load(oms["batch"])
    model.feed([np.ones((batch, 3, 4), np.float32)])
    return model


# -- the profile: parsing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "profile"),
    [
        ("5", LatencyProfile(base_ms=5.0)),
        ("1=78;4=145;8=220", LatencyProfile({"1": 78.0, "4": 145.0, "8": 220.0})),
        ("40+18*rows", LatencyProfile(base_ms=40.0, per_row_ms=18.0)),
        ("2.5 * rows", LatencyProfile(base_ms=0.0, per_row_ms=2.5)),
        ("1,16=30; 2,16=45; 10+1*rows", LatencyProfile({"1,16": 30.0, "2,16": 45.0}, 10.0, 1.0)),
        ("static=3", LatencyProfile({"static": 3.0})),
    ],
)
def test_latency_profile_forms_of_the_environment(text, profile):
    assert device_time.parse_text(text, "GE_PLUGIN_SIM_EXECUTE_LATENCY_MS") == profile


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fast", "expected milliseconds"),
        ("1=-3", "expected milliseconds"),
        ("batch4=3", "not a gear label"),
        ("5;6", "at most one constant or formula"),
        ("5*cols", "expected milliseconds"),
        ("1=2;1=3", "listed twice"),
        ("3+rows", "not a formula"),
    ],
)
def test_latency_profile_errors_name_the_problem(text, message):
    with pytest.raises(ValueError, match=message):
        device_time.parse_text(text, "GE_PLUGIN_SIM_EXECUTE_LATENCY_MS")


def test_latency_profile_forms_of_the_init_json():
    where = '"ge_plugin_sim".execute_latency_ms'
    assert device_time.parse_json(2.5, where) == LatencyProfile(base_ms=2.5)
    assert device_time.parse_json({"1": 78, "4": 145}, where) == LatencyProfile({"1": 78.0, "4": 145.0})
    assert device_time.parse_json({"8": 220, "base_ms": 40, "per_row_ms": 18}, where) == LatencyProfile(
        {"8": 220.0}, 40.0, 18.0
    )
    assert device_time.parse_json("1=7", where) == LatencyProfile({"1": 7.0})
    with pytest.raises(ValueError, match="not a gear label"):
        device_time.parse_json({"fast": 1}, where)
    with pytest.raises(ValueError, match="milliseconds"):
        device_time.parse_json(True, where)


def test_config_reads_every_device_time_knob(tmp_path):
    env = {
        "GE_PLUGIN_SIM_EXECUTE_LATENCY_MS": "1=78;4=145",
        "GE_PLUGIN_SIM_TIMING_ONLY": "1",
        "GE_PLUGIN_SIM_DEVICE_LOCK_DIR": str(tmp_path),
    }
    config = _config.load(env, None)
    assert config.execute_latency == LatencyProfile({"1": 78.0, "4": 145.0})
    assert config.timing_only is True and config.device_lock_dir == str(tmp_path)
    section = {"execute_latency_ms": {"8": 220}, "timing_only": False, "device_lock_dir": str(tmp_path / "j")}
    config = _config.load(env, section)
    assert config.execute_latency == LatencyProfile({"8": 220.0})
    assert config.timing_only is False and config.device_lock_dir == str(tmp_path / "j")
    assert _config.load({}, None).device_lock_dir == device_time.default_lock_dir()
    assert device_time.default_lock_dir().endswith(f"ge-plugin-sim-{os.getuid()}")


def test_bad_knobs_make_init_fail_naming_them(acl, monkeypatch, tmp_path):
    monkeypatch.setenv("GE_PLUGIN_SIM_TIMING_ONLY", "sometimes")
    assert acl.init() == C.ACL_ERROR_INVALID_PARAM
    assert "GE_PLUGIN_SIM_TIMING_ONLY" in acl.get_recent_err_msg()
    monkeypatch.delenv("GE_PLUGIN_SIM_TIMING_ONLY")
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("GE_PLUGIN_SIM_DEVICE_LOCK_DIR", str(tmp_path / "file" / "locks"))
    assert acl.init() == C.ACL_ERROR_INVALID_PARAM
    assert "GE_PLUGIN_SIM_DEVICE_LOCK_DIR" in acl.get_recent_err_msg()
    monkeypatch.delenv("GE_PLUGIN_SIM_DEVICE_LOCK_DIR")
    config = tmp_path / "acl.json"
    config.write_text(json.dumps({"ge_plugin_sim": {"execute_latency_ms": {"1": "slow"}}}))
    assert acl.init(str(config)) == C.ACL_ERROR_PARSE_FILE
    assert "execute_latency_ms" in acl.get_recent_err_msg()


# -- device time per gear ---------------------------------------------------------------------------------------


def test_each_gear_holds_the_device_for_its_time(acl, ready, load, oms, mode):
    device_time.set_profile(LatencyProfile({"1": 60.0, "4": 240.0}))
    for batch in (1, 4):
        model = _batch_model(load, oms, batch)
        assert acl.mdl.set_dynamic_batch_size(model.id, model.inputs[0], model.mbatch, batch) == 0
        assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == 0
    (one_start, one_end), (four_start, four_end) = _windows()
    assert one_end - one_start >= 0.060 and four_end - four_start >= 0.240
    device = snapshot()["devices"][0]
    assert device["executes_by_gear"] == {"1": 1, "4": 1}
    assert device["busy_ms"] >= 300.0


def test_a_formula_gives_gears_the_table_does_not_list(acl, ready, load, oms, mode):
    device_time.set_profile(LatencyProfile({"1": 10.0}, base_ms=20.0, per_row_ms=50.0))
    model = _batch_model(load, oms, 2)
    assert acl.mdl.set_dynamic_batch_size(model.id, model.inputs[0], model.mbatch, 2) == 0
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == 0
    ((start, end),) = _windows()
    assert end - start >= 0.120  # 20 + 50 * 2 rows


def test_a_gear_the_profile_misses_takes_no_time_and_says_so_once(acl, ready, load, oms, caplog, mode):
    device_time.set_profile(LatencyProfile({"4": 500.0}))
    model = load(oms["static"])
    model.feed([np.ones((2, 3, 4), np.float32)])
    with caplog.at_level(logging.WARNING, logger="ge_plugin.sim"):
        for _ in range(2):
            assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == 0
    assert [r.getMessage() for r in caplog.records if "no device time" in r.getMessage()] == [
        "ge-plugin simulator: gear static has no device time in the profile 4=500 "
        "(GE_PLUGIN_SIM_EXECUTE_LATENCY_MS or execute_latency_ms); its executes take none"
    ]


def test_latency_comes_from_the_environment_through_acl_init(acl, monkeypatch, model_class, oms, mode):
    monkeypatch.setenv("GE_PLUGIN_SIM_EXECUTE_LATENCY_MS", "static=80")
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    model = model_class(acl, oms["static"])
    model.feed([np.ones((2, 3, 4), np.float32)])
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == 0
    ((start, end),) = _windows()
    assert end - start >= 0.080


# -- timing only --------------------------------------------------------------------------------------------------


def test_timing_only_computes_moves_and_fills_nothing(acl, ready, load, oms, graphs, monkeypatch):
    """Timing only: the execute computes and writes nothing, copies and memsets move no byte, so every
    buffer keeps what it held; the counters still count the work."""
    model = load(oms["static"])
    x = np.full((2, 3, 4), 1.5, np.float32)
    computed = model.run([x])[0]
    np.testing.assert_allclose(computed, x @ graphs.W + graphs.B, rtol=1e-6)

    def no_compute(*args):
        raise AssertionError("timing-only mode computed the outputs")

    monkeypatch.setattr(type(model_runner(model)), "run", no_compute)
    device_time.set_timing_only(True)
    out_ptr, out_size, _ = model.outputs[1][0]
    assert acl.rt.memset(out_ptr, out_size, 0x7F, out_size) == 0
    model.feed([np.zeros((2, 3, 4), np.float32)])
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == 0
    host = np.full((2, 3, 3), -1.0, np.float32)
    assert (
        acl.rt.memcpy(host.ctypes.data, host.nbytes, out_ptr, host.nbytes, C.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    )
    assert (host == -1.0).all(), "the D2H copy moved bytes"
    device = snapshot()["devices"][0]
    assert (
        device["executes"] == 2 and device["memcpy_calls"]["h2d"] == 2 and device["memcpy_calls"]["d2h"] == 2
    )
    device_time.set_timing_only(False)
    np.testing.assert_array_equal(model.fetch([np.float32])[0], computed)  # neither memset nor execute wrote


def model_runner(model):
    from ge_plugin.sim._state import SIM

    return SIM.models[model.id].runner


def test_timing_only_outputs_keep_what_the_staging_held(acl, ready, load, oms):
    """The engine's path, timing only: the pinned output staging keeps what it held (fresh pinned memory
    is zeros), whatever the model would have computed."""
    model = load(oms["static"])
    (in_ptr, _, _), (out_ptr, _, _) = model.inputs[1][0], model.outputs[1][0]
    host_in, _ = acl.rt.malloc_host(96)
    host_out, _ = acl.rt.malloc_host(72)
    sevens = np.full(18, 7.0, np.float32).tobytes()
    assert acl.rt.memcpy(host_out, 72, acl.util.bytes_to_ptr(sevens), 72, C.ACL_MEMCPY_HOST_TO_HOST) == 0
    device_time.set_timing_only(True)
    assert acl.rt.memcpy_async(in_ptr, 96, host_in, 96, C.ACL_MEMCPY_HOST_TO_DEVICE, ready) == 0
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    assert acl.rt.memcpy_async(host_out, 72, out_ptr, 72, C.ACL_MEMCPY_DEVICE_TO_HOST, ready) == 0
    assert acl.rt.synchronize_stream(ready) == 0
    assert (np.frombuffer(acl.util.ptr_to_bytes(host_out, 72), np.float32) == 7.0).all()
    assert snapshot()["devices"][0]["executes"] == 1


def test_timing_only_still_checks_the_buffers(acl, ready, load, oms):
    device_time.set_timing_only(True)
    model = load(oms["static"])
    ptr, _, buf = model.inputs[1][0]
    assert acl.update_data_buffer(buf, ptr, 8) == 0
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == C.ACL_ERROR_GE_PARAM_INVALID


def test_timing_only_from_the_init_json(acl, tmp_path, model_class, oms):
    config = tmp_path / "acl.json"
    config.write_text(
        json.dumps({"ge_plugin_sim": {"timing_only": True, "execute_latency_ms": {"static": 5}}})
    )
    assert acl.init(str(config)) == 0 and acl.rt.set_device(0) == 0
    assert device_time.timing_only() and device_time.profile() == LatencyProfile({"static": 5.0})
    model = model_class(acl, oms["static"])
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == 0
    ((start, end),) = _windows()
    assert end - start >= 0.005
    device_time.set_timing_only(False)
    out = model.fetch([np.uint8])  # the output's first bytes: what fresh device memory holds, never written
    assert (out[0] == 0xA5).all()


# -- one compute queue per device ---------------------------------------------------------------------------------


def test_two_streams_on_one_device_compute_one_at_a_time(acl, ready, load, oms, mode):
    faults.set_execute_latency_ms(80)
    first, second = load(oms["static"]), load(oms["static"])
    other, _ = acl.rt.create_stream()
    for model in (first, second):
        model.feed([np.ones((2, 3, 4), np.float32)])
    for _ in range(3):
        assert acl.mdl.execute_async(first.id, first.inputs[0], first.outputs[0], ready) == 0
        assert acl.mdl.execute_async(second.id, second.inputs[0], second.outputs[0], other) == 0
    assert acl.rt.synchronize_stream(ready) == 0 and acl.rt.synchronize_stream(other) == 0
    windows = _windows()
    assert len(windows) == 6 and _disjoint(windows)


def test_two_threads_executing_synchronously_on_one_device_take_turns(acl, ready, load, oms, mode):
    faults.set_execute_latency_ms(60)
    context, _ = acl.rt.get_context()
    models = [load(oms["static"]) for _ in range(2)]
    for model in models:
        model.feed([np.ones((2, 3, 4), np.float32)])
    results = []

    def run(model):
        assert acl.rt.set_context(context) == 0
        results.extend(acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) for _ in range(3))

    threads = [threading.Thread(target=run, args=(m,)) for m in models]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [0] * 6
    windows = _windows()
    assert len(windows) == 6 and _disjoint(windows)


def test_two_devices_compute_at_the_same_time(acl, ready, model_class, oms):
    """Device 1's short execute, submitted while device 0's long one computes, ends first."""
    slow = model_class(acl, oms["static"])
    slow.feed([np.ones((2, 3, 4), np.float32)])
    assert acl.rt.set_device(1) == 0
    stream1, _ = acl.rt.create_stream()
    fast = model_class(acl, oms["static"])
    fast.feed([np.ones((2, 3, 4), np.float32)])
    assert acl.rt.set_device(0) == 0
    device_time.set_profile(LatencyProfile(base_ms=600.0))
    assert acl.mdl.execute_async(slow.id, slow.inputs[0], slow.outputs[0], ready) == 0
    wait_until_busy(0)
    device_time.set_profile(LatencyProfile(base_ms=10.0))
    assert acl.rt.set_device(1) == 0
    assert acl.mdl.execute_async(fast.id, fast.inputs[0], fast.outputs[0], stream1) == 0
    assert acl.rt.synchronize_stream(stream1) == 0
    assert acl.rt.set_device(0) == 0
    assert acl.rt.synchronize_stream(ready) == 0
    ((slow_start, slow_end),) = _windows(0)
    ((fast_start, fast_end),) = _windows(1)
    assert slow_start < fast_start and fast_end < slow_end


def wait_until_busy(device: int) -> None:
    while not busy_now(device):
        time.sleep(0.001)


def busy_now(device: int) -> bool:
    """True while device ``device`` holds its compute lock (another thread computes on it)."""
    queue = device_time._QUEUES.get(device)
    return queue is not None and queue.lock.locked()


def test_copies_overlap_a_compute_on_the_same_device(acl, ready, load, oms):
    model = load(oms["static"])
    model.feed([np.ones((2, 3, 4), np.float32)])
    other, _ = acl.rt.create_stream()
    dev, _ = acl.rt.malloc(64, 0)
    host, _ = acl.rt.malloc_host(64)
    copied, _ = acl.rt.create_event()
    faults.set_execute_latency_ms(500)
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    wait_until_busy(0)
    assert acl.rt.memcpy_async(dev, 64, host, 64, C.ACL_MEMCPY_HOST_TO_DEVICE, other) == 0
    assert acl.rt.record_event(copied, other) == 0
    assert acl.rt.synchronize_event(copied) == 0
    assert busy_now(0), "the copy waited for the compute to end"
    assert acl.rt.synchronize_stream(ready) == 0


def test_busy_time_and_windows_are_counted_and_reset(acl, ready, load, oms, mode):
    faults.set_execute_latency_ms(20)
    model = load(oms["static"])
    model.feed([np.ones((2, 3, 4), np.float32)])
    for _ in range(4):
        assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == 0
    device = snapshot()["devices"][0]
    assert device["executes"] == 4 and len(device["compute_intervals"]) == 4
    assert device["busy_ms"] >= 80.0
    assert device["busy_ms"] == pytest.approx(sum(e - s for s, e in device["compute_intervals"]) * 1000)
    reset_counters()
    assert snapshot()["devices"][0]["busy_ms"] == 0 and snapshot()["devices"][0]["compute_intervals"] == []


def test_an_injected_execute_fault_still_takes_its_device_time(acl, ready, load, oms, mode):
    model = load(oms["static"])
    model.feed([np.ones((2, 3, 4), np.float32)])
    faults.set_execute_latency_ms(50)
    faults.inject("mdl.execute_async", C.ACL_ERROR_RT_AICORE_EXCEPTION, nth=1)
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    assert acl.rt.synchronize_stream(ready) == C.ACL_ERROR_RT_AICORE_EXCEPTION
    ((start, end),) = _windows()
    assert end - start >= 0.050


# -- across processes -----------------------------------------------------------------------------------------------

_WORKER = textwrap.dedent(
    """
    import os, sys, time
    import acl

    model_path, device, ready_dir, name, peers = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
    queued = sys.argv[6] == "async"
    assert acl.init() == 0 and acl.rt.set_device(device) == 0
    model_id, ret = acl.mdl.load_from_file(model_path)
    assert ret == 0
    desc = acl.mdl.create_desc()
    assert acl.mdl.get_desc(desc, model_id) == 0
    datasets = []
    for count, size_of in ((acl.mdl.get_num_inputs(desc), acl.mdl.get_input_size_by_index),
                           (acl.mdl.get_num_outputs(desc), acl.mdl.get_output_size_by_index)):
        ds = acl.mdl.create_dataset()
        for i in range(count):
            ptr, ret = acl.rt.malloc(size_of(desc, i), 0)
            acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size_of(desc, i)))
        datasets.append(ds)
    open(os.path.join(ready_dir, name), "w").close()
    while len([f for f in os.listdir(ready_dir) if "." not in f]) < peers:  # start together
        time.sleep(0.005)
    with open(os.path.join(ready_dir, name + ".go"), "w") as go:
        go.write(repr(time.monotonic()))
    if queued:  # all five queued at once, then one synchronize
        stream, ret = acl.rt.create_stream()
        for _ in range(5):
            assert acl.mdl.execute_async(model_id, datasets[0], datasets[1], stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0
    else:
        for _ in range(5):
            assert acl.mdl.execute(model_id, datasets[0], datasets[1]) == 0
    assert acl.finalize() == 0
    """
)


def _run_workers(
    tmp_path: Path, oms, devices: list[int], lock_dir: Path, calls=("sync", "sync"), timing_only=(True, True)
) -> list[dict]:
    """One process per device in ``devices``, each executing 5 times (``calls``: "sync" executes, or
    "async": five execute_async then a synchronize), timing only or computing; their device reports, with
    ``went``: when the process began executing."""
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    ready_dir = tmp_path / "ready"
    ready_dir.mkdir()
    reports = []
    procs = []
    for n, device in enumerate(devices):
        report_dir = tmp_path / f"report-{n}"
        reports.append(report_dir)
        env = {
            **os.environ,
            "GE_PLUGIN_SIM_DEVICE_LOCK_DIR": str(lock_dir),
            "GE_PLUGIN_SIM_REPORT_DIR": str(report_dir),
            "GE_PLUGIN_SIM_TIMING_ONLY": "1" if timing_only[n] else "0",
            "GE_PLUGIN_SIM_EXECUTE_LATENCY_MS": "40",
        }
        cmd = [sys.executable, "-m", "ge_plugin.sim", "run", str(script), str(oms["static"]), str(device)]
        args = [str(ready_dir), f"w{n}", str(len(devices)), calls[n]]
        procs.append(subprocess.Popen([*cmd, *args], env=env))
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    out = []
    for n, (report_dir, device) in enumerate(zip(reports, devices)):
        (path,) = report_dir.glob("sim-*.json")
        report = json.loads(path.read_text())["devices"][device]
        report["went"] = float((ready_dir / f"w{n}.go").read_text())  # when it began to execute
        out.append(report)
    return out


@pytest.mark.parametrize(
    ("calls", "timing_only"),
    [
        (("sync", "sync"), (True, True)),
        (("async", "async"), (True, True)),
        (("async", "sync"), (True, False)),
    ],
    ids=["execute, timing only", "execute_async, timing only", "timing only beside computing"],
)
def test_two_processes_on_one_device_compute_one_at_a_time(tmp_path, oms, calls, timing_only):
    """Timing-only executes book their windows when queued; a computing one takes the device after the
    booked windows: one device's windows never overlap, whichever way each process executes."""
    first, second = _run_workers(tmp_path, oms, [0, 0], tmp_path / "locks", calls, timing_only)
    a = [tuple(w) for w in first["compute_intervals"]]
    b = [tuple(w) for w in second["compute_intervals"]]
    assert len(a) == len(b) == 5
    assert _disjoint(a + b), "two processes computed on device 0 at the same time"
    assert max(first["went"], second["went"]) < min(max(e for _, e in a), max(e for _, e in b)), (
        "one process began executing after the other had finished, so the test proves nothing"
    )
    assert (tmp_path / "locks" / "device-0.lock").exists()


def test_two_processes_on_two_devices_compute_at_the_same_time(tmp_path, oms):
    first, second = _run_workers(tmp_path, oms, [0, 1], tmp_path / "locks")
    a = [tuple(w) for w in first["compute_intervals"]]
    b = [tuple(w) for w in second["compute_intervals"]]
    assert any(_overlap(x, y) for x in a for y in b)


# -- copies charged by their bytes ----------------------------------------------------------------------------


def test_copy_bandwidths_in_both_profile_forms():
    where = "execute_latency_ms"
    profile = device_time.parse_text("1=7;pcie_gbps=24;memory_gbps=800", where)
    assert profile == LatencyProfile({"1": 7.0}, pcie_gbps=24.0, memory_gbps=800.0)
    assert device_time.parse_json({"base_ms": 2, "pcie_gbps": 24}, where) == LatencyProfile(
        base_ms=2.0, pcie_gbps=24.0
    )
    assert profile.describe() == "1=7;pcie_gbps=24;memory_gbps=800"
    with pytest.raises(ValueError, match="expected GB/s > 0"):
        device_time.parse_text("pcie_gbps=0", where)


def _timed_copies(acl, stream: int, kind: int, nbytes: int, count: int) -> float:
    dev, ret = acl.rt.malloc(nbytes, 0)
    assert ret == 0
    other, ret = (
        acl.rt.malloc(nbytes, 0) if kind == C.ACL_MEMCPY_DEVICE_TO_DEVICE else acl.rt.malloc_host(nbytes)
    )
    assert ret == 0
    try:
        start = time.monotonic()
        for _ in range(count):
            assert acl.rt.memcpy_async(dev, nbytes, other, nbytes, kind, stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        return time.monotonic() - start
    finally:
        acl.rt.free(dev)
        (acl.rt.free if kind == C.ACL_MEMCPY_DEVICE_TO_DEVICE else acl.rt.free_host)(other)


@pytest.mark.parametrize(
    ("kind", "profile"),
    [
        (C.ACL_MEMCPY_HOST_TO_DEVICE, LatencyProfile(pcie_gbps=0.4)),
        (C.ACL_MEMCPY_DEVICE_TO_DEVICE, LatencyProfile(memory_gbps=0.4)),
    ],
)
def test_a_profile_with_bandwidths_charges_copies_on_their_stream(acl, ready, mode, kind, profile):
    nbytes, count = 1 << 20, 20  # 21 MB at 0.4 GB/s: 52 ms
    device_time.set_profile(profile)
    charged = _timed_copies(acl, ready, kind, nbytes, count)
    assert charged >= count * nbytes / 0.4e9 * 0.95
    device_time.set_profile(LatencyProfile())  # a profile naming no bandwidth: copies are free, as before
    free = _timed_copies(acl, ready, kind, nbytes, count)
    assert free < charged / 2
