"""``ge-plugin bench`` options: checked before anything runs, each problem named, usage errors exit 2."""

from __future__ import annotations

import subprocess
import sys

import attrs
import pytest

from ge_plugin.bench.run import BenchOptions, parse_concurrencies
from ge_plugin.errors import BenchError


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ge_plugin", "bench", *args], capture_output=True, text=True, timeout=120
    )


def test_options_default_to_the_issues_sweep():
    options = BenchOptions()
    assert options.concurrencies == (1, 2, 4, 8, 16) and options.seq == 16
    assert [m.name for m in options.selected()] == ["ge_identity", "py_identity", "ge_llama", "naive_llama"]
    options.check()


def test_quick_options_measure_one_concurrency_briefly():
    quick = BenchOptions.quick()
    assert quick.concurrencies == (1,) and quick.measurement_ms < 1000 and quick.direct_seconds < 1
    assert BenchOptions.quick(seq=64).seq == 64


def test_options_check_names_every_bad_option():
    options = attrs.evolve(
        BenchOptions(), measurement_ms=50, seq=20, max_trials=2, models=("ge_llama", "gpt"), peer="vllm"
    )
    with pytest.raises(BenchError) as caught:
        options.check()
    message = str(caught.value)
    for part in (
        "--measurement-ms must be >= 100, got 50",
        "--seq must be a sequence gear",
        "--max-trials",
        "--model gpt",
        "--peer vllm: unknown; the bench knows pytriton",
    ):
        assert part in message


def test_options_select_a_subset_in_table_order():
    options = attrs.evolve(BenchOptions(), models=("naive_llama", "ge_llama"))
    assert [m.name for m in options.selected()] == ["ge_llama", "naive_llama"]
    assert options.as_json()["models"] == ["ge_llama", "naive_llama"]


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
    assert result.stderr.startswith("ge-plugin bench: error: --seq must be a sequence gear of the LLaMA")
    assert not (tmp_path / "out").exists()


def test_cli_help_ends_with_examples():
    result = _run("--help")
    assert result.returncode == 0
    assert "examples:\n  ge-plugin bench " in result.stdout
    assert "--device-latency-ms" in result.stdout


def test_bench_without_matplotlib_stops_before_measuring(tmp_path, monkeypatch):
    from ge_plugin.bench.run import run_bench

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what `import matplotlib` meets when it is missing

    with pytest.raises(
        BenchError, match=r"matplotlib, which is not installed: pip install 'ge-plugin\[bench\]'"
    ):
        run_bench(attrs.evolve(BenchOptions.quick(), output=tmp_path / "out"), say=lambda _line: None)

    assert not (tmp_path / "out").exists()  # nothing was built or measured
