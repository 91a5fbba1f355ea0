"""Explicit model control: unloading and loading a model 20 times leaks no device or pinned memory.

Each load starts a stub process; its unload runs the backend's finalize (engine close, then acl.finalize),
where the simulator writes the stub's final counters to identity_cycle's report folder. A leak would show
there as live bytes, as allocations freed by acl.finalize instead of by the backend (reclaimed), or as a
stub that never exits.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.e2e

MODEL = "identity_cycle"
CYCLES = 20
WARM_UP_EXECUTES = 4 * 2  # identity_cycle: gears 1, 2, 4, 8; streams_per_instance 2; warmup 1


def wait_for_reports(directory: Path, count: int, timeout: float = 60.0) -> list[Path]:
    deadline = time.monotonic() + timeout
    while True:
        reports = sorted(directory.glob("sim-*.json"))
        if len(reports) >= count or time.monotonic() > deadline:
            return reports
        time.sleep(0.05)


def wait_for_stubs(server, count: int, timeout: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        pids = server.stub_pids()
        if len(pids) == count or time.monotonic() > deadline:
            return pids
        time.sleep(0.05)


def test_unload_and_load_20_times_leaks_no_device_or_pinned_memory(control_server, sim_reports):
    client = control_server.client("http")
    stubs_before = control_server.stub_pids()
    try:
        for cycle in range(CYCLES):
            client.load_model(MODEL)
            assert client.is_model_ready(MODEL)
            rows = np.full((1 + cycle % 8, 16), cycle, dtype=np.float32)
            protocol = ("http", "grpc")[cycle % 2]
            assert np.array_equal(control_server.infer(protocol, MODEL, {"INPUT0": rows})["OUTPUT0"], rows)
            client.unload_model(MODEL)
            reports = wait_for_reports(sim_reports, cycle + 1)
            assert len(reports) == cycle + 1, f"cycle {cycle}: no simulator report after unload"
        assert not client.is_model_ready(MODEL)
    finally:
        client.close()
    assert wait_for_stubs(control_server, len(stubs_before)) == stubs_before

    reports = [json.loads(path.read_text()) for path in wait_for_reports(sim_reports, CYCLES)]
    assert len(reports) == CYCLES
    for number, report in enumerate(reports):
        pinned = report["host_pinned"]
        assert pinned["mallocs"] > 0, f"report {number}: the instance never allocated pinned memory"
        assert pinned["live_bytes"] == 0 and pinned["live_allocations"] == 0, (number, pinned)
        assert pinned["frees"] == pinned["mallocs"] and pinned["reclaimed_allocations"] == 0, (number, pinned)
        used = [device for device in report["devices"] if device["mallocs"]]
        assert [device["device"] for device in used] == [0], (number, report["devices"])
        for device in report["devices"]:
            assert device["live_bytes"] == 0 and device["live_allocations"] == 0, (number, device)
            assert device["frees"] == device["mallocs"] and device["reclaimed_allocations"] == 0, (
                number,
                device,
            )
            assert device["loads"] == device["unloads"], (number, device)
        # warm-up runs each of the 4 gears once on each of the 2 streams, then the one request
        assert used[0]["executes"] == WARM_UP_EXECUTES + 1, (number, used[0])
