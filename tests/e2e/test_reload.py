"""Unload then load at once, 50 times over, with tritonclient.http as an operator does it (docs/serving.md
used to recommend exactly this after a stub crash): the server stays up, every answer is right, and when
the server stops nothing of its stubs is left (no process, no /dev/shm region).

``unload_model`` returns while the old instance is still finalizing, so the new instance initializes beside
it under the same model, version and instance name. On the unfixed backend both created the same ``ge_*``
series; Triton's core counts references per family object, so the old instance's teardown freed the series
the new one was incrementing, and tritonserver aborted within 3 to 8 cycles
(``malloc(): unaligned fastbin chunk detected``; server#8663). The backend now hands the label set from one
instance to the next (ge_plugin.backend.metrics.LabelLease).

About 25 s for one instance and 75 s for two (mostly the 50 cycles), on 2 cores.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.e2e

CYCLES = 50


@pytest.mark.parametrize("model", ["reload_one", "reload_two"])
def test_unload_then_load_at_once_50_times_keeps_the_server_up_and_right(own_server, reload_repo, model):
    server = own_server(reload_repo, model_control_mode="explicit")
    client = server.client("http")
    try:
        client.load_model(model)
        for cycle in range(CYCLES):
            client.unload_model(model)
            client.load_model(model)
            rows = np.full((1 + cycle % 8, 16), cycle, dtype=np.float32)
            answer = server.infer(("http", "grpc")[cycle % 2], model, {"INPUT0": rows})
            assert np.array_equal(answer["OUTPUT0"], rows), f"cycle {cycle}"
        assert server.is_ready()
        # the last instance published its metrics once its predecessor had deleted theirs
        server.wait_totals([("ge_rows_total", {"model": model}, 1 + (CYCLES - 1) % 8)])
        # the old instances finish finalizing (about 2 s each) and exit
        instances = 1 if model == "reload_one" else 2
        server.wait_until(f"{instances} stub(s) left", lambda: len(server.stub_pids()) == instances)
    finally:
        client.close()
    status = server.triton.stop()
    log = server.log_path.read_text(errors="replace")
    assert status == 0, server.log_tail()
    assert "Signal (6)" not in log and "Signal (11)" not in log, server.log_tail()
    assert server.triton.leftovers() == ([], []), "stubs or /dev/shm regions outlived the server"
