"""perf_analyzer, the tool Triton users measure with: finding it, running one concurrency, reading its CSV.

The binary ships in the ``tritonclient==2.51.0`` wheel and links ``libcudart.so.12`` (from the pip package
``nvidia-cuda-runtime-cu12``, put on ``LD_LIBRARY_PATH`` here) and Debian's ``libb64.so.0d``, even on a host
without a GPU. Its CSV (``-f``) gives times in µs and sorts rows by throughput, not by concurrency; the
columns are looked up by name, never by position.

perf_analyzer repeats a measurement window until three in a row agree within ``--stability-percentage``
and gives up with no CSV at all after ``--max-trials``. On a small shared VM that happens; the run is then
repeated once with stability checks off and the row is marked unstable, rather than losing the point. A
window in which no request completed (the host stalled for longer than a short window, as ``--quick``'s are)
makes perf_analyzer give up too: that run is repeated once with windows twice as long. A point that still
gives no result is marked not measured, with the windows it got and perf_analyzer's last word, and the run
goes on: a busy host costs a point, not the run.

Each window's own throughput and p50 (``-v --percentile=50`` prints them, one "Pass" line each) are kept
for the targets' intervals (``intervals``): every window of every run of a point, the failed stable run's
included, since each is a measurement of that point like any other.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import attrs

from ge_plugin.errors import BenchError
from ge_plugin.measure.records import BenchModel, Measurement, Pass, PerfRow

CONCURRENCY = "Concurrency"
#: CSV column -> PerfRow field (times in µs as perf_analyzer writes them)
COLUMNS = {
    CONCURRENCY: "concurrency",
    "Inferences/Second": "throughput",
    "Client Send": "client_send_us",
    "Network+Server Send/Recv": "network_us",
    "Server Queue": "server_queue_us",
    "Server Compute Input": "server_compute_input_us",
    "Server Compute Infer": "server_compute_infer_us",
    "Server Compute Output": "server_compute_output_us",
    "Client Recv": "client_recv_us",
    "p50 latency": "p50_us",
    "p90 latency": "p90_us",
    "p95 latency": "p95_us",
    "p99 latency": "p99_us",
}
_N = TypeVar("_N", int, float)
UNSTABLE = "Failed to obtain stable measurement"
#: a window in which no request completed (a stall of the shared host longer than a short window)
EMPTY_WINDOW = "No valid requests recorded within time interval"
#: a --stability-percentage no three windows can miss: how the bench switches the check off
NO_STABILITY_CHECK = 999
#: one window in perf_analyzer's verbose output (with --percentile=50)
PASS = re.compile(r"Pass \[\d+\] throughput: ([0-9.]+) infer/sec\. p50 latency: ([0-9]+) usec")


@attrs.frozen
class PerfSettings:
    measurement_ms: int = 2000
    stability_percentage: int = 20
    max_trials: int = 8


def parse_csv(text: str, *, source: str = "perf_analyzer CSV") -> list[PerfRow]:
    """Rows of a perf_analyzer ``-f`` file, sorted by concurrency; BenchError names what is missing."""
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    missing = [name for name in COLUMNS if name not in header]
    if missing:
        raise BenchError(
            f"{source}: no column {', '.join(repr(m) for m in missing)} (header: {', '.join(header) or 'empty'}); "
            "rate mode or another perf_analyzer version?"
        )
    rows = [_row(record, where=f"{source}:{line}") for line, record in enumerate(reader, start=2)]
    if not rows:
        raise BenchError(f"{source}: a header but no measurement")
    return sorted(rows, key=lambda row: row.concurrency)


def _row(record: Mapping[str, str | None], *, where: str) -> PerfRow:
    """One CSV record as a PerfRow; BenchError names the line and the column that is not a number."""

    def number(column: str, kind: Callable[[str], _N]) -> _N:
        text = (record.get(column) or "").strip()
        try:
            return kind(text)
        except ValueError:
            raise BenchError(f"{where}: {column} is {text!r}, not a number") from None

    concurrency = number(CONCURRENCY, int)  # first: the columns are checked in COLUMNS' order
    times = {field: number(column, float) for column, field in COLUMNS.items() if column != CONCURRENCY}
    return PerfRow(concurrency=concurrency, **times)


def parse_passes(text: str) -> list[Pass]:
    """Every window of a run, from perf_analyzer's verbose output (``-v --percentile=50``), in order."""
    return [Pass(throughput=float(rate), p50_us=float(p50)) for rate, p50 in PASS.findall(text)]


def binary() -> Path:
    """perf_analyzer from this environment's ``bin`` (where the tritonclient wheel puts it), else PATH."""
    here = Path(sys.executable).parent / "perf_analyzer"
    found = here if here.is_file() else (Path(p) if (p := shutil.which("perf_analyzer")) else None)
    if found is None:
        raise BenchError(
            "perf_analyzer not found: it ships in the tritonclient 2.51.0 wheel "
            "(pip install 'tritonclient[all]==2.51.0'; later wheels have no binary)"
        )
    return found


def library_dir() -> Path:
    """Where libcudart.so.12 lies: the ``lib`` of pip's nvidia-cuda-runtime-cu12. perf_analyzer has no
    RUNPATH, so it finds the library only through ``LD_LIBRARY_PATH`` (``environment``)."""
    try:  # where the namespace package of nvidia-cuda-runtime-cu12 lies; nothing in it is imported
        spec = importlib.util.find_spec("nvidia.cuda_runtime")
    except ImportError:  # not even the ``nvidia`` namespace
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise BenchError(
            "perf_analyzer links libcudart.so.12 even without a GPU: pip install nvidia-cuda-runtime-cu12 "
            "(make setup does)"
        )
    places = spec.submodule_search_locations
    libdir = next((Path(p) / "lib" for p in places if (Path(p) / "lib").is_dir()), None)
    if libdir is None or not (libdir / "libcudart.so.12").exists():
        raise BenchError(f"nvidia-cuda-runtime-cu12 is installed but has no lib/libcudart.so.12 ({libdir})")
    return libdir


def environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment perf_analyzer loads with: ``base`` (this process's) with ``library_dir()`` first on
    ``LD_LIBRARY_PATH``. bench, tune and ``ge-plugin perf-analyzer`` run it so."""
    env = dict(os.environ if base is None else base)
    libdir = str(library_dir())
    env["LD_LIBRARY_PATH"] = ":".join(p for p in (libdir, env.get("LD_LIBRARY_PATH", "")) if p)
    return env


def version() -> str:
    """``2.51.0``, from ``perf_analyzer --version``."""
    out = _run([str(binary()), "--version"], timeout=60)
    text = out.stdout + out.stderr  # 2.51 prints it on stderr
    for word in text.split():
        if word[:1].isdigit():
            return str(word)
    raise BenchError(f"perf_analyzer --version printed no version: {text.strip()!r}")


#: the restricted API groups perf_analyzer reads over gRPC (the model's config, the server-side statistics);
#: its ``-H`` reaches HTTP only, so the private loopback servers of bench and tune open these to every client
SERVER_APIS = frozenset({"model-config", "statistics"})


def command(
    model: BenchModel,
    *,
    url: str,
    concurrency: int,
    settings: PerfSettings,
    input_data: Path,
    csv_path: Path,
    check_stability: bool = True,
    batch: int = 1,
) -> list[str]:
    cmd = [
        str(binary()),
        "-i",
        "grpc",
        "-u",
        url,
        "-m",
        model.name,
        "-b",
        str(batch),
        "-v",
        "--percentile=50",
        f"--concurrency-range={concurrency}:{concurrency}",
        f"--input-data={input_data}",
        f"--measurement-interval={settings.measurement_ms}",
        f"--stability-percentage={settings.stability_percentage if check_stability else NO_STABILITY_CHECK}",
        f"--max-trials={settings.max_trials if check_stability else 3}",
        "-f",
        str(csv_path),
    ]
    if model.shape:
        cmd.append(f"--shape={model.shape}")
    return cmd


def measure(
    model: BenchModel,
    *,
    url: str,
    concurrency: int,
    settings: PerfSettings,
    input_data: Path,
    work: Path,
    batch: int = 1,
    check_stability: bool = True,
    tag: str = "",
) -> Measurement:
    """One perf_analyzer run at one concurrency and client batch (two when the stable one fails); its
    console output is kept next to the CSV. ``check_stability=False`` measures three windows without the
    check (a point measured a second time); ``tag`` tells the files of such runs apart."""
    work.mkdir(parents=True, exist_ok=True)
    stem = work / f"{model.name}-b{batch}-c{concurrency}{tag}"
    csv_path = stem.with_suffix(".csv")
    log_path = stem.with_suffix(".log")
    stable = check_stability
    passes: list[Pass] = []
    spans: list[tuple[float, float]] = []
    attempts = [True, False] if check_stability else [False]
    stretched = False
    while attempts:
        checking = attempts.pop(0)
        csv_path.unlink(missing_ok=True)
        cmd = command(
            model,
            url=url,
            concurrency=concurrency,
            settings=settings,
            input_data=input_data,
            csv_path=csv_path,
            check_stability=checking,
            batch=batch,
        )
        timeout = 60 + settings.measurement_ms / 1000 * (settings.max_trials + 2) * 3
        started = time.time()
        out = _run(cmd, timeout=timeout)
        spans.append((started, time.time()))
        log_path.write_text(" ".join(cmd) + "\n\n" + out.stdout + out.stderr)
        passes += parse_passes(out.stdout)
        if out.returncode == 0 and csv_path.is_file():
            break
        said = out.stdout + out.stderr
        if EMPTY_WINDOW in said and not stretched:
            stretched = True
            settings = attrs.evolve(settings, measurement_ms=settings.measurement_ms * 2)
            attempts.insert(0, checking)
            continue
        if checking and (UNSTABLE in said or EMPTY_WINDOW in said):  # once more, without the check
            stable = False
            continue
        if EMPTY_WINDOW in said or UNSTABLE in said:  # it measured, the host let no window through: a mark
            failure = f"{_last_line(out)} (full output: {log_path})"
            return Measurement(
                model=model.name,
                row=window_row(concurrency, passes),
                stable=False,
                batch=batch,
                windows=tuple(passes),
                spans=tuple(spans),
                failure=failure,
            )
        raise BenchError(_failure(model.name, concurrency, out, log_path))
    rows = parse_csv(csv_path.read_text(), source=str(csv_path))
    return Measurement(
        model=model.name, row=rows[0], stable=stable, batch=batch, windows=tuple(passes), spans=tuple(spans)
    )


def window_row(concurrency: int, passes: Sequence[Pass]) -> PerfRow:
    """A point perf_analyzer gave no CSV for, from the windows it printed: the medians of their throughput
    and p50 (0 and NaN without any), every other column NaN (not measured)."""
    nan = math.nan
    times = {field: nan for field in COLUMNS.values() if field not in ("concurrency", "throughput")}
    times["p50_us"] = statistics.median(p.p50_us for p in passes) if passes else nan
    throughput = statistics.median(p.throughput for p in passes) if passes else 0.0
    return PerfRow(concurrency=concurrency, throughput=throughput, **times)


def _run(cmd: list[str], *, timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, env=environment(), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BenchError(f"perf_analyzer did not finish in {timeout:.0f} s: {' '.join(cmd)}") from None
    except OSError as exc:
        raise BenchError(f"cannot run {cmd[0]}: {exc.strerror or exc}") from None


def _failure(model: str, concurrency: int, out: subprocess.CompletedProcess[str], log: Path) -> str:
    text = (out.stderr + out.stdout).strip()
    if "libb64" in text:
        return "perf_analyzer needs libb64.so.0d: install Debian's libb64-0d (scripts/system-deps.sh, run by make setup)"
    return f"perf_analyzer failed on {model} at concurrency {concurrency}: {_last_line(out)} (full output: {log})"


def _last_line(out: subprocess.CompletedProcess[str]) -> str:
    text = (out.stderr + out.stdout).strip()
    return text.splitlines()[-1] if text else f"exit status {out.returncode}"
