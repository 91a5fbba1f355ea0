"""Explicit model control: unloading and loading a model 20 times leaks no device or pinned memory.

Each load starts a stub process; its unload runs the backend's finalize (engine close, then acl.finalize),
where the simulator writes the stub's final counters to identity_cycle's report folder. A leak would show
there as live bytes, as allocations freed by acl.finalize instead of by the backend (reclaimed), or as a
stub that never exits.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.e2e

MODEL = "identity_cycle"
CYCLES = 20
WARM_UP_EXECUTES = 4 * 2  # identity_cycle: gears 1, 2, 4, 8; streams_per_instance 2; warmup 1


def reports_in(directory: Path) -> list[Path]:
    return sorted(directory.glob("sim-*.json"))


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
            control_server.wait_until(
                f"cycle {cycle}: a simulator report after unload",
                lambda cycle=cycle: len(reports_in(sim_reports)) >= cycle + 1,
            )
            assert len(reports_in(sim_reports)) == cycle + 1, f"cycle {cycle}: one report per unload"
        assert not client.is_model_ready(MODEL)
    finally:
        client.close()
    control_server.wait_until(
        "the unloaded instances' stubs to exit", lambda: len(control_server.stub_pids()) == len(stubs_before)
    )
    assert control_server.stub_pids() == stubs_before

    reports = [json.loads(path.read_text()) for path in reports_in(sim_reports)]
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
