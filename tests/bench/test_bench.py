"""``ge-plugin bench SPEC...``: the user's own specs through Triton against the direct engine, one table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ge_plugin.bench.run import BenchOptions, SpecRows, table
from ge_plugin.cli import main
from ge_plugin.errors import BenchError
from ge_plugin.measure.records import DirectRow
from ge_plugin.tune.records import TunePoint

SPECS = Path(__file__).resolve().parents[2] / "specs"


def test_options_name_every_problem_in_the_domains_words():
    with pytest.raises(BenchError) as raised:
        BenchOptions(specs=(), concurrencies=(0, 2), measurement_ms=50, direct_seconds=0)
    assert str(raised.value) == (
        "no spec to measure; concurrencies must be integers >= 1, got [0, 2]; a measurement window must be "
        ">= 100 ms, got 50; the direct engine's time per model must be > 0 s, got 0"
    )


def test_the_cli_maps_its_flags_onto_the_options_and_the_domain_refuses_a_zero_concurrency(capsys):
    assert main(["bench", str(SPECS / "bert.yaml"), "--concurrency", "1,0"]) == 1
    assert (
        "ge-plugin bench: error: concurrencies must be integers >= 1, got [1, 0]" in capsys.readouterr().err
    )


def test_a_malformed_concurrency_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["bench", str(SPECS / "bert.yaml"), "--concurrency", "1,x"])
    assert exited.value.code == 2 and "'x' is not an integer" in capsys.readouterr().err


def test_the_table_gives_the_engine_alone_then_through_triton_and_says_where_it_ran():
    rows = [
        SpecRows(
            "m",
            (TunePoint(1, 90.0, 11.0, 12.5), TunePoint(4, 300.0, 13.0, 20.0, stable=False)),
            (DirectRow("m", 1, 100, 110.0, 9.0, 9.5),),
            "every gear from the profile",
        )
    ]
    assert table(rows, simulated=True).splitlines() == [
        "## ge-plugin bench: CPU simulator (timing-only)",
        "",
        "| model | path | batch | c | rows/s | p50 ms | p99 ms |",
        "|---|---|--:|--:|--:|--:|--:|",
        "| m | direct engine | 1 | 1 | 110.0 | 9.00 | 9.50 |",
        "| m | Triton, gRPC | 1 | 1 | 90.0 | 11.00 | 12.50 |",
        "| m | Triton, gRPC | 1 | 4 | 300.0 (unstable) | 13.00 | 20.00 |",
        "",
        "m: every gear from the profile",
    ]


@pytest.mark.e2e
def test_bench_measures_a_users_spec_through_triton_and_alone(tmp_path):
    models = tmp_path / "models"
    subprocess.run(
        [sys.executable, "-m", "ge_plugin", "demo-models", str(models)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    spec = tmp_path / "bert.yaml"
    spec.write_text((SPECS / "bert.yaml").read_text().replace("../build/models/", f"{models}/"))
    jpeg = tmp_path / "cnn_jpeg.yaml"  # its requests are JPEGs, decoded on the (simulated) device
    jpeg.write_text((SPECS / "cnn_jpeg.yaml").read_text().replace("../build/models/", f"{models}/"))
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"execute_latency_ms": {"base_ms": 2.0, "per_row_ms": 0.5}}))
    out = subprocess.run(
        [sys.executable, "-m", "ge_plugin", "bench", str(spec), str(jpeg), "--profile", str(profile), "--concurrency", "1,2",
         "--measurement-ms", "500", "--direct-seconds", "0.3", "-o", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert "## ge-plugin bench: CPU simulator (timing-only)" in lines
    direct = [line for line in lines if line.startswith("| bert_model | direct engine |")]
    served = [line for line in lines if line.startswith("| bert_model | Triton, gRPC |")]
    assert [line.split(" | ")[2] for line in direct] == ["1", "2", "4", "8"]  # every batch gear of the spec
    assert [line.split(" | ")[3] for line in served] == ["1", "2"]
    images = [line for line in lines if line.startswith("| cnn_jpeg |")]
    assert [line.split(" | ")[1:4] for line in images] == [
        *(["direct engine", batch, "1"] for batch in ("1", "2", "4", "8")),
        *(["Triton, gRPC", "1", c] for c in ("1", "2")),
    ]
    # the profile's device time is a floor under every latency, alone and served
    assert all(float(line.split(" | ")[5]) >= 2.5 for line in direct + served + images)
