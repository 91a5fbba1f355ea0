"""The report: JSON that reads back as the same run, markdown labelled "CPU simulator", a real PNG."""

from __future__ import annotations

import json

import pytest

from ge_plugin.bench import report
from ge_plugin.errors import BenchError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_json_round_trips_every_row_and_target(result):
    data = json.loads(json.dumps(report.to_json(result)))
    assert report.from_json(data) == result


def test_json_keys_are_stable(result):
    data = report.to_json(result)
    assert list(data) == [
        "schema",
        "label",
        "created",
        "machine",
        "options",
        "models",
        "triton",
        "direct",
        "allocations",
        "targets",
        "notes",
        "files",
    ]
    assert data["schema"] == "ge-plugin-bench/1" and data["label"] == "CPU simulator, 2 cores"
    target = data["targets"][0]
    assert set(target) >= {"id", "what", "op", "threshold", "unit", "value", "passed", "verdict", "detail"}
    assert {"requests_per_execute", "engine_ms_per_execute", "p50_us", "p99_us", "stable"} <= set(
        data["triton"][0]
    )
    assert data["allocations"][2]["per_request"] == 4


def test_from_json_names_what_is_missing(result):
    data = report.to_json(result)
    del data["triton"][3]["p99_us"]
    with pytest.raises(BenchError, match=r"r\.json: \$\.triton: missing key 'p99_us'"):
        report.from_json(data, source="r.json")
    with pytest.raises(BenchError, match="schema is 'other/2'"):
        report.from_json({**data, "schema": "other/2"})


def test_markdown_labels_every_section_and_lists_every_row(result):
    text = report.markdown(result)
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert len(headings) == 5
    for heading in headings[:4]:
        assert "CPU simulator, 2 cores" in heading
    assert "simulator counters" in headings[4]
    rows = [line for line in text.splitlines() if line.startswith("| ge_llama | ge backend")]
    assert [row.split(" | ")[2] for row in rows] == ["1", "8", "16"]
    assert "(unstable)" in rows[2] and "(unstable)" not in rows[0]
    assert "| P5 | ge tiny LLaMA throughput / naive pyACL model throughput, c=16 | >= 2× |" in text
    assert "![latency vs throughput, CPU simulator, 2 cores](latency_throughput.png)" in text


def test_markdown_says_which_simulated_device_time_was_added(make_result):
    text = report.markdown(
        make_result(label="CPU simulator + 5 ms simulated device time per execute, 2 cores")
    )
    assert text.startswith(
        "# ge-plugin bench: CPU simulator + 5 ms simulated device time per execute, 2 cores"
    )


def test_markdown_lists_notes(make_result):
    text = report.markdown(make_result(notes=("served allocations not counted: why",)))
    assert "- served allocations not counted: why" in text


def test_write_produces_the_three_files(result, tmp_path):
    paths = report.write(result, tmp_path / "out")
    assert paths["plot"].read_bytes()[:8] == PNG_MAGIC
    assert paths["plot"].stat().st_size < 300_000
    assert report.from_json(json.loads(paths["json"].read_text())) == result
    assert paths["markdown"].read_text() == report.markdown(result)
