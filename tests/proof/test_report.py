"""The report: JSON that reads back as the same run, markdown labelled "CPU simulator", the seed side by side."""

from __future__ import annotations

import json

import attrs
import pytest

from benchmarks.proof import report
from ge_plugin.errors import BenchError
from ge_plugin.measure.records import Measurement, Pass, StubPhases

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LABEL = "CPU simulator (timing-only), 2 cores"


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
        "seed",
        "inside_stub",
        "notes",
        "files",
    ]
    assert data["schema"] == "ge-plugin-bench/3" and data["label"] == LABEL
    target = data["targets"][0]
    assert set(target) >= {
        "id",
        "what",
        "op",
        "threshold",
        "unit",
        "value",
        "low",
        "high",
        "passed",
        "verdict",
        "detail",
    }
    assert [t["id"] for t in data["targets"]] == ["P3a", "P3b", "P4a", "P4b", "P4c", "P5", "P6", "P7"]
    assert {"batch", "rows_per_execute", "engine_ms_per_execute", "p50_us", "p99_us", "stable"} <= set(
        data["triton"][0]
    )
    assert {"windows", "spans", "stub"} <= set(data["triton"][0])
    assert data["triton"][0]["windows"][0].keys() == {"throughput", "p50_us"}
    assert {"stream_ms", "host_us", "windows"} <= set(data["direct"][0])
    assert data["allocations"][2]["per_request"] == 4


def test_json_puts_the_seeds_rows_and_ours_side_by_side(result):
    side = report.to_json(result)["seed"]
    assert side["seed"]["direct_ms"] == {"1": 78.0, "4": 145.0, "8": 220.0}
    assert side["seed"]["triton_ms"] == {"1": 82.0, "4": 152.0, "8": 228.0}
    assert (side["seed"]["direct_max_rows_per_s"], side["seed"]["triton_max_rows_per_s"]) == (36.0, 35.0)
    ours = side["ours"]
    assert ours["direct_ms"] == {"1": 79.3, "4": 145.5, "8": 221.0}
    assert ours["triton_ms"]["1"] == pytest.approx(79.6) and ours["floor_ms"]["8"] == pytest.approx(5.6)
    assert ours["direct_max_at_batch"] == 8 and ours["naive_at_concurrency"] == 16


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
    assert len(headings) == 8
    for heading in headings[:7]:
        assert LABEL in heading
    assert "simulator counters" in headings[7]
    rows = [line for line in text.splitlines() if line.startswith("| ge_llama | ge backend")]
    assert [row.split(" | ")[3:5] for row in rows] == [
        ["1", "1"],
        ["1", "8"],
        ["1", "16"],
        ["4", "1"],
        ["8", "1"],
    ]
    assert "(unstable)" in rows[2] and "(unstable)" not in rows[0]
    assert "| P5 | replica: ge LLaMA throughput / naive pyACL model throughput, c=16 | >= 2.5× |" in text
    assert f"![the seed's table replicated, and the host phase: {LABEL}](latency_throughput.png)" in text


def test_markdown_prints_the_seeds_rows_next_to_ours(result):
    lines = report.markdown(result).splitlines()
    table = lines[lines.index("| row | batch 1 p50 ms | batch 4 p50 ms | batch 8 p50 ms | most rows/s |") :]
    assert table[2] == "| seed: direct AscendCL | 78 | 145 | 220 | 36 |"
    assert table[3] == "| seed: Triton + CANN GE backend | 82 | 152 | 228 | 35 |"
    assert table[4] == "| seed: added by Triton | +4 | +7 | +8 | 0.97× |"
    assert table[5].startswith("| ours: direct engine | 79.30 | 145.50 | 221.00 | 36.2 (batch 8) |")
    assert table[7].startswith("| ours: added by Triton | +0.30 | +4.00 | +6.00 |")
    assert table[8] == "| ours: the same-size floor, no device (2 / 8 / 16 MiB) | 1.40 | 3.50 | 5.60 | – |"
    assert table[9] == "| ours: added minus the floor | -1.10 | +0.50 | +0.40 | – |"
    # the paced floor waits 78 / 145 / 220 ms and adds 1.0 / 3.0 / 6.0 ms; ge adds 0.3 / 4.0 / 6.0
    assert table[10].endswith("| 79.00 | 148.00 | 226.00 | – |")
    assert (
        table[11] == "| ours: added minus what the paced floor adds to its wait | -0.70 | +1.00 | +0.00 | – |"
    )


def test_markdown_compares_instances_and_streams(result):
    text = report.markdown(result)
    assert "| instances × streams | c=1 | c=8 | c=16 |" in text
    for layout in ("1 × 1", "2 × 1", "1 × 2 (as served)"):
        assert f"| {layout} | " in text


def test_device_bound_is_rows_over_the_seeds_time_of_the_gears_they_ran_on():
    # 2 executes of 8 rows (gear 8, 220 ms) and 1 of 6 rows (gear 8 too): 22 rows in 660 ms
    assert report.device_bound({"8": 2, "6": 1}) == pytest.approx(22 / 0.660)
    assert report.device_bound({"1": 4}) == pytest.approx(4 / (4 * 0.078))
    assert report.device_bound(None) is None and report.device_bound({"9": 1}) is None


def test_device_bound_from_the_backends_executes_by_gear():
    # 2 executes on gear 8 (220 ms each) and one on gear 4 (145 ms), 6 rows each on average: 18 rows in 585 ms
    assert report.device_bound_gears({"8x16": 2, "4x16": 1}, 6.0) == pytest.approx(18 / 0.585)
    assert (
        report.device_bound_gears({"2x16": 1}, 1.0) is None and report.device_bound_gears(None, 1.0) is None
    )


def test_markdown_gives_host_time_per_execute(result):
    lines = [line for line in report.markdown(result).splitlines() if line.startswith("| ge_identity | 1 | ")]
    # direct: 200 µs call, 150 µs stream, 50 µs host; served: 200 µs compute infer, 250 µs stream (p50 / 2)
    # served: compute infer (200) ends before the stream (250): answered off execute, no host time to read
    assert lines[0].startswith("| ge_identity | 1 | 200 | 150 | 50 | 200 | 250 | – | py_identity | 200 |")


def test_markdown_gives_every_target_its_interval_and_verdict(result):
    text = report.markdown(result)
    assert "| id | what | target | measured | 95 % interval | from | verdict |" in text
    (p5,) = [line for line in text.splitlines() if line.startswith("| P5 |")]
    target = next(t for t in result.targets if t.id == "P5")
    assert f"| {target.show_interval()} |" in p5 and p5.endswith(f"| {target.verdict()} |")


def test_markdown_shows_inside_the_stub_next_to_the_floor(make_result, result):
    stubbed = [
        attrs.evolve(
            m, stub=StubPhases(100, 1.0, 6.5, 200.0, 19.0, 150.0 if m.model == "ge_identity" else None)
        )
        if m.row.concurrency == 1 and m.model in ("ge_identity", "py_identity")
        else m
        for m in result.triton
    ]
    text = report.markdown(make_result(triton=tuple(stubbed)))
    assert "## Inside the stub" in text
    (line,) = [line for line in text.splitlines() if line.startswith("| ge_identity | py_identity | 1 |")]
    assert (
        line
        == "| ge_identity | py_identity | 1 | 6.5 | 6.5 | 19.0 | 19.0 | 200.0 | 150.0 | 200.0 | 100 / 100 |"
    )
    assert "## Inside the stub" not in report.markdown(result)  # no timers, no section
    assert report.from_json(report.to_json(make_result(triton=tuple(stubbed)))).triton == tuple(stubbed)


def test_markdown_lists_notes(make_result):
    text = report.markdown(make_result(notes=("served allocations not counted: why",)))
    assert "- served allocations not counted: why" in text


def test_write_produces_the_three_files(result, tmp_path):
    paths = report.write(result, tmp_path / "out")
    assert paths["plot"].read_bytes()[:8] == PNG_MAGIC
    assert paths["plot"].stat().st_size < 300_000
    assert report.from_json(json.loads(paths["json"].read_text())) == result
    assert paths["markdown"].read_text() == report.markdown(result)


def test_a_point_perf_analyzer_could_not_measure_is_marked_and_no_target_reads_it(result):
    from benchmarks.proof import ratios
    from ge_plugin.measure import perf

    windows = (Pass(2500.0, 400.0),)
    failed = Measurement(
        model="py_identity",
        row=perf.window_row(1, windows),
        stable=False,
        windows=windows,
        failure="No valid requests recorded within time interval (full output: x.log)",
    )
    triton = tuple(failed if (m.model, m.row.concurrency, m.batch) == ("py_identity", 1, 1) else m
                   for m in result.triton)  # fmt: skip
    run = attrs.evolve(
        result, triton=triton, targets=tuple(ratios.evaluate(triton, result.direct, result.allocations))
    )
    (p3a,) = [t for t in run.targets if t.id == "P3a"]
    assert p3a.value is None and "not measured" in p3a.detail
    text = report.markdown(run)
    assert "| py_identity | " in text and "2500.0 (not measured) |" in text
    assert (
        "- py_identity at batch 1, concurrency 1: No valid requests recorded" in text
        and "(1 windows)" in text
    )
    again = report.json_text(report.from_json(json.loads(report.json_text(run))))
    assert again == report.json_text(run) and '"failure": "No valid requests' in again
