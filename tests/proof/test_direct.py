"""The direct row: the engine timed in-process, allocations counted by the simulator, not assumed."""

from __future__ import annotations

import numpy as np
import pytest

from ge_plugin.errors import BenchError
from ge_plugin.measure import direct
from ge_plugin.measure.records import Allocations, DirectRow, Pass


def test_summarize_gives_percentiles_and_rows_per_second():
    latencies = [0.001] * 98 + [0.010, 0.020]
    row = direct.summarize("m", 8, latencies)
    assert (row.model, row.batch, row.iterations) == ("m", 8, 100)
    assert row.p50_ms == pytest.approx(1.0)
    assert 1.0 < row.p99_ms <= 20.0
    assert row.throughput == pytest.approx(8 * 100 / sum(latencies))


def test_summarize_cuts_the_calls_into_windows_for_the_intervals():
    latencies = [0.010] * 20 + [0.020] * 20
    row = direct.summarize("m", 2, latencies)
    assert len(row.windows) == 8  # at most 8 stretches of at least 5 calls
    assert row.windows[0] == Pass(throughput=200.0, p50_us=10_000.0)  # 2 rows per 10 ms
    assert row.windows[-1] == Pass(throughput=100.0, p50_us=20_000.0)
    assert direct.summarize("m", 1, [0.01] * 9).windows == ()  # too few calls for two windows


def test_host_us_is_the_call_less_its_stream_time():
    assert DirectRow("m", 1, 10, 1.0, 0.25, 0.3, 0.2).host_us == pytest.approx(50.0)
    assert DirectRow("m", 1, 10, 1.0, 0.25, 0.3).host_us is None


def test_time_calls_makes_at_least_the_minimum_number_of_calls():
    calls = []
    latencies = direct.time_calls(lambda: calls.append(1), seconds=0.0, min_iterations=7)
    assert len(latencies) == len(calls) == 7


def test_request_from_input_data_is_one_batch_one_request(bench_repo):
    request = direct.request_from_input_data(bench_repo.inputs["ge_llama"], {"input_ids": np.dtype(np.int64)})
    assert request["input_ids"].shape == (1, 16) and request["input_ids"].dtype == np.int64


def test_request_from_input_data_names_a_bad_file(tmp_path):
    path = tmp_path / "in.json"
    path.write_text('{"data": []}')
    with pytest.raises(BenchError, match=r"in\.json: not a perf_analyzer input-data file"):
        direct.request_from_input_data(path, {})


def test_allocation_count_sees_device_and_pinned_mallocs(fresh_sim):
    from ge_plugin.sim import acl

    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    start = direct.allocation_count()
    dev, ret = acl.rt.malloc(64, 0)
    host, ret_host = acl.rt.malloc_host(64)
    assert (ret, ret_host) == (0, 0)
    assert direct.allocation_count() == start + 2
    assert acl.rt.free(dev) == 0 and acl.rt.free_host(host) == 0
    acl.finalize()


def test_run_times_every_batch_gear_and_counts_allocations(fresh_sim, bench_repo):
    data = direct.run(bench_repo.root, {"ge_identity": bench_repo.inputs["ge_identity"]}, seconds=0.01)
    assert data["device"] == "sim"
    assert [row["batch"] for row in data["rows"]] == [1, 2, 4, 8, 16]
    assert all(row["iterations"] >= direct.MIN_ITERATIONS and row["throughput"] > 0 for row in data["rows"])
    # the engine's stream time is inside the call's time
    assert all(0 < row["stream_ms"] < row["p99_ms"] for row in data["rows"])
    (counted,) = [Allocations(**a) for a in data["allocations"]]
    assert counted.mallocs_at_start > 0  # the engine's buffers, made once
    assert counted.requests == sum(
        (direct.WARMUP_CALLS + row["iterations"]) * row["batch"] for row in data["rows"]
    )
    assert counted.per_request == 0


def test_run_on_the_replica_device_takes_the_seeds_time_per_batch(fresh_sim, bench_repo):
    data = direct.run(
        bench_repo.root,
        {"replica_ge_llama": bench_repo.inputs["replica_ge_llama"]},
        seconds=0.01,
        min_iterations=1,
    )
    assert [row["batch"] for row in data["rows"]] == [1, 4, 8]
    for row, floor_ms in zip(data["rows"], (78, 145, 220)):
        assert row["iterations"] == 1 and row["p50_ms"] >= floor_ms  # the profile is a floor
        assert row["stream_ms"] >= floor_ms


def test_run_child_reports_a_failing_child(bench_repo, tmp_path):
    with pytest.raises(BenchError, match="the direct engine run failed"):
        direct.run_child(
            bench_repo.root,
            {"no_such_model": bench_repo.inputs["ge_identity"]},
            seconds=0.01,
            output=tmp_path / "d.json",
            environment={},
        )


def test_bench_gives_the_direct_child_time_for_the_seconds_asked(tmp_path, monkeypatch):
    """``--direct-seconds 60`` times each batch size of each ge model for a minute: the child must get that
    long and more, not a fixed 300 s that kills it half-way as "did not finish"."""
    from collections import defaultdict
    from types import SimpleNamespace

    from benchmarks.proof import run

    class Stop(Exception):
        pass

    timeouts = []

    def fake_run(cmd, **kwargs):
        timeouts.append(kwargs["timeout"])
        raise Stop

    monkeypatch.setattr(run.perf, "version", lambda: "perf_analyzer 2.51.0")
    monkeypatch.setattr(
        run,
        "build_repository",
        lambda work, seq: SimpleNamespace(work=work, root=work, inputs=defaultdict(lambda: work)),
    )
    monkeypatch.setattr(direct.subprocess, "run", fake_run)
    options = run.BenchOptions(output=tmp_path, direct_seconds=60.0, models=("ge_identity", "ge_llama"))
    with pytest.raises(Stop):
        run.run_bench(options, say=lambda _: None, progress=None)
    # identity times 5 batch gears and the LLaMA 3, a minute each
    assert timeouts and timeouts[0] >= 60.0 * (5 + 3), timeouts
