"""perf_analyzer's CSV and command line: columns by name, rows by concurrency, clear errors."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchmarks.proof.repository import models
from ge_plugin.errors import BenchError
from ge_plugin.measure import perf
from ge_plugin.measure.records import Pass

HEADER = (
    "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,"
    "Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency"
)


def test_parse_csv_reads_perf_analyzer_output_sorted_by_concurrency():
    # perf_analyzer sorts rows by throughput; the bench wants them by concurrency
    text = (
        HEADER
        + "\n2,4424.43,1,170,111,12,67,85,0,425,571,614,719\n1,3181.02,1,126,32,11,64,75,0,295,372,393,434\n"
    )
    rows = perf.parse_csv(text)
    assert [r.concurrency for r in rows] == [1, 2]
    first = rows[0]
    assert first.throughput == 3181.02
    assert (first.network_us, first.server_queue_us, first.server_compute_infer_us) == (126, 32, 64)
    assert (first.p50_us, first.p99_us) == (295, 434)


def test_parse_csv_finds_columns_by_name_not_position():
    names = HEADER.split(",")
    values = ["1", "3181.02", "1", "126", "32", "11", "64", "75", "0", "295", "372", "393", "434"]
    order = list(reversed(range(len(names))))
    text = (
        ",".join(names[i] for i in order) + ",Avg latency\n" + ",".join(values[i] for i in order) + ",300\n"
    )
    (row,) = perf.parse_csv(text)
    assert row.concurrency == 1 and row.p99_us == 434 and row.client_send_us == 1


def test_parse_csv_names_missing_columns():
    with pytest.raises(BenchError, match=r"x\.csv: no column 'Concurrency'.*rate mode"):
        perf.parse_csv(HEADER.replace("Concurrency", "Request Rate") + "\n", source="x.csv")


def test_parse_csv_names_the_line_of_a_bad_number():
    text = HEADER + "\n1,3181.02,1,126,32,11,64,75,0,295,372,393,434\n2,fast,1,1,1,1,1,1,1,1,1,1,1\n"
    with pytest.raises(BenchError, match=r"out\.csv:3: Inferences/Second is 'fast', not a number"):
        perf.parse_csv(text, source="out.csv")


def test_parse_csv_refuses_a_header_without_rows():
    with pytest.raises(BenchError, match="a header but no measurement"):
        perf.parse_csv(HEADER + "\n")


def test_command_measures_one_concurrency_over_grpc_with_the_input_data():
    llama = next(m for m in models(32) if m.name == "ge_llama")
    cmd = perf.command(
        llama,
        url="127.0.0.1:9001",
        concurrency=4,
        settings=perf.PerfSettings(1500, 15, 6),
        input_data=Path("in.json"),
        csv_path=Path("out.csv"),
        batch=4,
    )
    assert cmd[0].endswith("perf_analyzer")
    joined = " ".join(cmd[1:])
    for part in (
        "-i grpc",
        "-u 127.0.0.1:9001",
        "-m ge_llama",
        "-b 4",
        "--concurrency-range=4:4",
        "--input-data=in.json",
        "--measurement-interval=1500",
        "--stability-percentage=15",
        "--max-trials=6",
        "-f out.csv",
        "--shape=input_ids:32",
        "-v --percentile=50",  # every window's p50 and throughput, for the intervals
    ):
        assert part in joined


def test_command_without_stability_check_accepts_any_three_windows():
    identity = models(16)[0]
    cmd = perf.command(
        identity,
        url="u",
        concurrency=1,
        settings=perf.PerfSettings(),
        input_data=Path("i"),
        csv_path=Path("o"),
        check_stability=False,
    )
    assert "--stability-percentage=999" in cmd and "--max-trials=3" in cmd
    assert cmd[cmd.index("-b") + 1] == "1"  # one row per request unless told
    assert not any(part.startswith("--shape") for part in cmd)  # INPUT0's dims are fixed by the config


#: perf_analyzer 2.51's verbose output of a run whose stability check failed (trimmed)
VERBOSE = """\
  Stabilizing using p50latency and throughput
  Measurement window: 300 msec
  Pass [1] throughput: 2756.27 infer/sec. p50 latency: 307 usec
  Pass [2] throughput: 4494.51 infer/sec. p50 latency: 206 usec
  Pass [3] throughput: 4367.25 infer/sec. p50 latency: 213 usec
Failed to obtain stable measurement within 3 measurement windows for concurrency 1.
"""


def test_parse_passes_reads_every_window_even_of_a_run_that_failed_its_stability_check():
    assert perf.parse_passes(VERBOSE) == [
        Pass(2756.27, 307.0),
        Pass(4494.51, 206.0),
        Pass(4367.25, 213.0),
    ]
    assert perf.parse_passes("no windows here") == []


def test_environment_puts_libcudart_on_the_library_path():
    env = perf.environment({"LD_LIBRARY_PATH": "/already/there"})
    first, rest = env["LD_LIBRARY_PATH"].split(":", 1)
    assert (Path(first) / "libcudart.so.12").exists()
    assert rest == "/already/there"


def test_version_comes_from_the_binary():
    assert perf.version().startswith("2.51")


def test_measure_gives_a_run_with_an_empty_window_one_more_try_with_longer_windows(monkeypatch, tmp_path):
    # a stall of the host longer than a short window leaves one with no request: perf_analyzer gives up
    calls: list[list[str]] = []

    def fake_run(cmd: list[str], *, timeout: float) -> subprocess.CompletedProcess:
        calls.append(cmd)
        csv_path = Path(cmd[cmd.index("-f") + 1])
        if len(calls) == 1:
            return subprocess.CompletedProcess(
                cmd, 1, VERBOSE.replace("Failed to obtain", perf.EMPTY_WINDOW), ""
            )
        csv_path.write_text(HEADER + "\n1,100,1,2,3,4,5,6,7,800,900,950,990\n")
        return subprocess.CompletedProcess(cmd, 0, VERBOSE, "")

    monkeypatch.setattr(perf, "_run", fake_run)
    identity = models(16)[0]
    measured = perf.measure(
        identity,
        url="u",
        concurrency=1,
        settings=perf.PerfSettings(300, 20, 3),
        input_data=Path("i"),
        work=tmp_path,
    )
    assert [c[c.index("-f") - 3] for c in calls] == [
        "--measurement-interval=300",
        "--measurement-interval=600",
    ]
    assert measured.stable and measured.row.p50_us == 800
    assert len(measured.windows) == 6 and len(measured.spans) == 2  # both runs' windows are the point's


def _measure_with(monkeypatch, tmp_path, answers: list[tuple[int, str]]):
    """``perf.measure`` of the identity at c=1 against a perf_analyzer that answers (status, output) in turn
    and writes no CSV; the commands it was run with."""
    calls: list[list[str]] = []

    def fake_run(cmd: list[str], *, timeout: float) -> subprocess.CompletedProcess:
        calls.append(cmd)
        status, output = answers[len(calls) - 1]
        return subprocess.CompletedProcess(cmd, status, output, "")

    monkeypatch.setattr(perf, "_run", fake_run)
    settings = perf.PerfSettings(300, 20, 3)
    measured = perf.measure(
        models(16)[0], url="u", concurrency=1, settings=settings, input_data=Path("i"), work=tmp_path
    )
    return measured, calls


def test_measure_marks_a_point_no_window_of_which_a_busy_host_let_through_and_keeps_its_windows(
    monkeypatch, tmp_path
):
    # py_logits on a loaded host once took 500 ms a request: a 300 ms window saw none, and the run aborted
    empty = VERBOSE.replace("Failed to obtain stable measurement", perf.EMPTY_WINDOW)
    measured, calls = _measure_with(monkeypatch, tmp_path, [(1, empty)] * 4)
    # checked, checked with windows twice as long, then unchecked: three tries, and no exception
    assert len(calls) == 3 and "--max-trials=3" in calls[-1] and "--stability-percentage=999" in calls[-1]
    assert not measured.measured and not measured.stable
    assert perf.EMPTY_WINDOW in measured.failure and str(tmp_path) in measured.failure
    assert len(measured.windows) == 9 and len(measured.spans) == 3
    assert measured.row.p50_us == 213 and measured.row.throughput == 4367.25  # the windows' medians
    assert measured.row.p99_us != measured.row.p99_us  # NaN: not measured


def test_measure_still_stops_the_run_when_perf_analyzer_cannot_reach_the_server(monkeypatch, tmp_path):
    refused = "failed to get model metadata: connection refused\n"
    with pytest.raises(BenchError, match=r"perf_analyzer failed on ge_identity at concurrency 1: .*refused"):
        _measure_with(monkeypatch, tmp_path, [(1, refused)])
