"""``ge-plugin bench --quick`` end to end: a real tritonserver and perf_analyzer; the report, not timings.

What the bench reports, whatever the host's load: a point perf_analyzer measured has its windows and its
figures; a point a busy host let no window through is marked, with the reason, and the run goes on."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks.proof import report
from benchmarks.proof.repository import models

pytestmark = pytest.mark.e2e


def test_bench_quick_produces_a_report_that_parses(tmp_path):
    out = tmp_path / "results"
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.proof", "--quick", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (out / report.PLOT).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    run = report.from_json(json.loads((out / report.JSON).read_text()))
    assert run.label == "CPU simulator (timing-only), " + run.label.split(", ")[-1]
    assert {m.model for m in run.triton} == {m.name for m in models(16)}
    assert all(m.row.concurrency == 1 and m.batch == 1 and m.spans for m in run.triton)
    measured = [m for m in run.triton if m.measured]
    assert all(m.row.throughput > 0 and len(m.windows) >= 3 for m in measured)
    assert all(m.failure and "full output" in m.failure for m in run.triton if not m.measured)
    assert {(d.model, d.batch) for d in run.direct} >= {
        ("ge_llama", 1),
        ("ge_llama", 8),
        ("ge_identity", 16),
        ("replica_ge_llama", 8),
    }
    # the replica's device takes the seed's time, directly and through Triton (the profile is a floor)
    replica = [d for d in run.direct if d.model == "replica_ge_llama"]
    assert [d.p50_ms >= ms for d, ms in zip(replica, (78, 145, 220))] == [True] * 3
    assert all(m.row.p50_us >= 78_000 for m in measured if m.model == "replica_ge_llama")
    assert [t.id for t in run.targets] == ["P3a", "P3b", "P4a", "P4b", "P4c", "P5", "P6", "P7"]
    # the served allocation evidence is real: the naive model's per-request mallocs show up in its stubs'
    # reports, and every ge model's count is there to be read
    counted = {(a.model, a.where): a for a in run.allocations}
    assert counted["replica_naive_llama", "served"].per_request >= 3
    for key in (("ge_llama", "served"), ("ge_identity", "served"), ("replica_ge_llama_2x1", "served")):
        assert counted[key].requests > 0 and counted[key].per_request is not None
    # as served, one instance with two lanes: twice one lane's buffers, as the direct engine's two lanes
    assert (
        counted["replica_ge_llama", "served"].mallocs_at_start
        == counted["ge_llama", "direct"].mallocs_at_start
    )
    assert (
        counted["replica_ge_llama_2x1", "served"].mallocs_at_start
        == counted["ge_llama", "direct"].mallocs_at_start // 2
    )
    # the stubs' timers saw the executes of ge and its floors (the naive baseline has no timer)
    timed = [m for m in measured if m.model != "replica_naive_llama"]
    assert all(m.stub is not None and m.stub.executes > 0 for m in timed)
    assert all(t.low is not None for t in run.targets if t.value is not None and t.id != "P6")
    markdown = (out / report.MARKDOWN).read_text()
    assert markdown == report.markdown(run)
    table = [line for line in markdown.splitlines() if line.startswith("| ge_llama | ge backend")]
    assert len(table) == 1
    # the targets and the seed's rows are printed too
    assert "| P6 | device + pinned host allocations per request" in result.stdout
    assert "## Inside the stub" in result.stdout
    assert "| seed: direct AscendCL | 78 | 145 | 220 | 36 |" in result.stdout
    assert "[########################] " in result.stderr  # the progress bar reached the end
