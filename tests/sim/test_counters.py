"""Accounting: snapshot/reset semantics and the report file a process leaves behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from ge_plugin.sim import counters, reset_counters, snapshot


def test_snapshot_shape(acl, ready):
    snap = snapshot()
    assert len(snap["devices"]) == 8
    device = snap["devices"][0]
    for key in (
        "mallocs",
        "frees",
        "live_bytes",
        "live_allocations",
        "peak_bytes",
        "executes",
        "loads",
        "unloads",
    ):
        assert device[key] == 0, key
    assert device["memcpy_calls"] == {"h2h": 0, "h2d": 0, "d2h": 0, "d2d": 0}
    assert device["memcpy_bytes"] == {"h2h": 0, "h2d": 0, "d2h": 0, "d2d": 0}
    assert device["executes_by_gear"] == {}
    assert snap["host_pinned"] == {
        "mallocs": 0,
        "frees": 0,
        "live_bytes": 0,
        "live_allocations": 0,
        "reclaimed_allocations": 0,
        "reclaimed_bytes": 0,
    }


def test_counters_follow_memory_and_copies(acl, ready, mode):
    dev, _ = acl.rt.malloc(1000, 0)
    host, _ = acl.rt.malloc_host(1000)
    data = np.zeros(1000, np.uint8)
    acl.rt.memcpy(dev, 1000, data.ctypes.data, 1000, 1)
    acl.rt.memcpy(host, 1000, dev, 500, 2)
    acl.rt.memcpy(data.ctypes.data, 1000, host, 10, 0)
    snap = snapshot()
    device, pinned = snap["devices"][0], snap["host_pinned"]
    assert (device["mallocs"], device["live_allocations"], device["live_bytes"]) == (1, 1, 1056)
    assert device["memcpy_calls"] == {"h2h": 1, "h2d": 1, "d2h": 1, "d2d": 0}
    assert device["memcpy_bytes"] == {"h2h": 10, "h2d": 1000, "d2h": 500, "d2d": 0}
    assert (pinned["mallocs"], pinned["live_bytes"]) == (1, 1000)
    acl.rt.free(dev)
    acl.rt.free_host(host)
    snap = snapshot()
    assert snap["devices"][0]["live_bytes"] == 0 and snap["devices"][0]["peak_bytes"] == 1056
    assert snap["host_pinned"]["frees"] == 1 and snap["host_pinned"]["live_bytes"] == 0


def test_reset_keeps_live_memory_counted(acl, ready):
    dev, _ = acl.rt.malloc(100, 0)
    reset_counters()
    device = snapshot()["devices"][0]
    assert device["mallocs"] == 0 and device["live_bytes"] == 160 and device["peak_bytes"] == 160
    assert acl.rt.free(dev) == 0
    assert snapshot()["devices"][0]["live_bytes"] == 0


def test_snapshot_is_a_copy(acl, ready):
    snap = snapshot()
    snap["devices"][0]["memcpy_calls"]["h2d"] = 99
    assert snapshot()["devices"][0]["memcpy_calls"]["h2d"] == 0


def test_finalize_writes_the_report_before_releasing(acl, tmp_path, monkeypatch, mode):
    monkeypatch.setenv("GE_PLUGIN_SIM_REPORT_DIR", str(tmp_path))
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    acl.rt.malloc(100, 0)  # leaked on purpose
    assert acl.finalize() == 0
    (report,) = tmp_path.glob(f"sim-{os.getpid()}-*.json")
    data = json.loads(report.read_text())
    assert data["devices"][0]["live_allocations"] == 1
    assert snapshot()["devices"][0]["reclaimed_allocations"] == 1  # finalize released it afterwards
    timing = mode == "timing only"
    assert data["mode"]["timing_only"] is timing
    assert ("nothing was computed, copied, set or zero-filled" in data["mode"]["data"]) is timing


def test_report_at_exit_of_a_process_that_never_finalized(tmp_path):
    script = (
        "from ge_plugin.sim import acl\n"
        "assert acl.init() == 0 and acl.rt.set_device(1) == 0\n"
        "p, _ = acl.rt.malloc(64, 0)\n"
        "h, _ = acl.rt.malloc_host(64)\n"
        "assert acl.rt.free(p) == 0\n"
    )
    env = {**os.environ, "GE_PLUGIN_SIM_REPORT_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=120)
    (report,) = tmp_path.glob("sim-*.json")
    data = json.loads(report.read_text())
    assert data["devices"][1]["mallocs"] == data["devices"][1]["frees"] == 1
    assert data["host_pinned"]["live_allocations"] == 1


def test_write_report_numbers_files(tmp_path):
    first = counters.write_report(tmp_path)
    second = counters.write_report(tmp_path)
    assert first != second and first.exists() and second.exists()
