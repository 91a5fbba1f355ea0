"""``ge-plugin bench`` options: checked before anything runs, each problem named, usage errors exit 2."""

from __future__ import annotations

import subprocess
import sys

import attrs
import pytest

from benchmarks.proof.run import BenchOptions, Point, parse_concurrencies, plan
from ge_plugin.errors import BenchError


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.proof", *args], capture_output=True, text=True, timeout=120
    )


def test_options_default_to_the_issues_sweep():
    options = BenchOptions()
    assert options.concurrencies == (1, 8, 16) and options.seq == 16
    assert 16 in options.replica_concurrencies
    assert [m.name for m in options.selected()] == [
        "ge_identity",
        "py_identity",
        "ge_llama",
        "py_logits",
        "replica_ge_llama",
        "replica_py_logits",
        "replica_ge_llama_1x1",
        "replica_ge_llama_2x1",
        "replica_naive_llama",
    ]
    options.check()


def test_plan_measures_every_target_and_puts_compared_points_side_by_side():
    points = plan(BenchOptions())
    assert len(points) == len(set(points))
    for needed in (
        Point("ge_identity", 1, 1),
        Point("py_identity", 1, 8),
        *(Point(m, b, 1) for m in ("ge_llama", "py_logits", "replica_ge_llama") for b in (1, 4, 8)),
        Point("replica_ge_llama", 1, 16),
        Point("replica_naive_llama", 1, 16),
        Point("replica_ge_llama_1x1", 1, 16),
        Point("replica_ge_llama_2x1", 1, 16),
    ):
        assert needed in points, needed
    # a ratio's two sides are measured one right after the other
    k = points.index(Point("ge_identity", 1, 8))
    assert points[k + 1] == Point("py_identity", 1, 8)
    k = points.index(Point("ge_llama", 4, 1))
    assert points[k + 1] == Point("py_logits", 4, 1)
    k = points.index(Point("replica_ge_llama", 1, 16))
    assert points[k + 1] == Point("replica_naive_llama", 1, 16)
    for b in (1, 4, 8):
        k = points.index(Point("replica_ge_llama", b, 1))
        assert points[k + 1] == Point("replica_py_logits", b, 1)
    # the host phase first, then the replica
    phases = ["replica" if p.model.startswith("replica_") else "host" for p in points]
    assert phases == sorted(phases)


def test_plan_measures_the_pairs_of_the_targets_near_their_thresholds_twice_alternating():
    points = plan(BenchOptions())
    twice = [
        (Point("ge_llama", 1, 1), Point("py_logits", 1, 1)),  # P7
        *((Point("replica_ge_llama", b, 1), Point("replica_py_logits", b, 1)) for b in (1, 4, 8)),  # P4a, P4c
        (Point("replica_ge_llama", 1, 16), Point("replica_naive_llama", 1, 16)),  # P5
    ]
    for ge, floor in twice:
        k = points.index(ge)
        assert points[k : k + 4] == [ge, floor, attrs.evolve(ge, again=True), attrs.evolve(floor, again=True)]
    assert sum(p.again for p in points) == 2 * len(twice)


def test_quick_options_measure_every_model_once_briefly():
    quick = BenchOptions.quick()
    assert quick.measurement_ms < 1000 and quick.replica_measurement_ms <= 1000 and quick.direct_seconds < 1
    assert plan(quick) == [Point(m.name, 1, 1) for m in quick.selected()]
    assert BenchOptions.quick(seq=64).seq == 64


def test_options_check_names_every_bad_option():
    options = attrs.evolve(
        BenchOptions(), measurement_ms=50, seq=20, max_trials=2, models=("ge_llama", "gpt")
    )
    with pytest.raises(BenchError) as caught:
        options.check()
    message = str(caught.value)
    for part in (
        "--measurement-ms must be >= 100, got 50",
        "--seq must be a sequence gear",
        "--max-trials",
        "--model gpt",
    ):
        assert part in message


def test_options_select_a_subset_in_table_order():
    options = attrs.evolve(BenchOptions(), models=("replica_naive_llama", "ge_llama"))
    assert [m.name for m in options.selected()] == ["ge_llama", "replica_naive_llama"]
    assert options.as_json()["models"] == ["ge_llama", "replica_naive_llama"]
    assert {p.model for p in plan(options)} == {"ge_llama", "replica_naive_llama"}


def test_parse_concurrencies_names_the_bad_item():
    assert parse_concurrencies("1, 8,16") == (1, 8, 16)
    with pytest.raises(ValueError, match="'0' is not a concurrency"):
        parse_concurrencies("1,0")


def test_cli_bad_concurrency_is_a_usage_error():
    result = _run("--concurrency", "1,x")
    assert result.returncode == 2
    assert "'x' is not a concurrency" in result.stderr


def test_cli_bad_seq_fails_before_anything_runs(tmp_path):
    result = _run("--quick", "--seq", "20", "-o", str(tmp_path / "out"))
    assert result.returncode == 1
    assert result.stderr.startswith("benchmarks.proof: error: --seq must be a sequence gear of the LLaMA")
    assert not (tmp_path / "out").exists()


def test_cli_help_ends_with_examples():
    result = _run("--help")
    assert result.returncode == 0
    assert "examples:\n  python -m benchmarks.proof " in result.stdout
    assert "--replica-concurrency" in result.stdout


def test_bench_without_matplotlib_stops_before_measuring(tmp_path, monkeypatch):
    from benchmarks.proof.run import run_bench

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what `import matplotlib` meets when it is missing

    with pytest.raises(
        BenchError, match=r"matplotlib, which is not installed: pip install 'ge-plugin\[bench\]'"
    ):
        run_bench(attrs.evolve(BenchOptions.quick(), output=tmp_path / "out"), say=lambda _line: None)

    assert not (tmp_path / "out").exists()  # nothing was built or measured
