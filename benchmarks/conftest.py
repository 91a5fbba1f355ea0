"""Collects the medians of the fast-path microbenchmarks and prints them as one table at the end.

pytest-benchmark prints its own table per group; this one puts the compiled module and the twin side by
side with their ratio, and the 64 MiB copies next to np.copyto measured in the same run, because those
two ratios are the targets (compiled >= 5x the twin on small requests, >= 0.8x np.copyto bandwidth). The
simulator's sanitizer gets its own table: each request path with checking off and on, and what checking
adds per execute.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

# the helpers the benchmark modules share (_pyacl_lane): pytest imports them in importlib mode, which puts
# no test directory on sys.path
sys.path.insert(0, os.path.dirname(__file__))

#: untimed calls before each benchmark: the first large allocations move glibc's mmap threshold, and without
#: this the implementation timed first in a group pays for it and the second does not
WARMUP_CALLS = 3

#: (case, implementation) -> (median seconds per call, bytes written per call)
RESULTS = pytest.StashKey[dict]()
#: case -> the least py/c speed-up the compiled module should reach
SPEEDUP_TARGETS = pytest.StashKey[dict]()
#: case -> the least fraction of np.copyto's bandwidth the compiled module should reach
BANDWIDTH_TARGETS = pytest.StashKey[dict]()
#: case -> (off s, on s, median on/off ratio, its first and third quartiles) of the paired sanitizer runs
SANITIZER_PAIRS = pytest.StashKey[dict]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[RESULTS] = {}
    config.stash[SPEEDUP_TARGETS] = {}
    config.stash[BANDWIDTH_TARGETS] = {}
    config.stash[SANITIZER_PAIRS] = {}


@pytest.fixture
def record(benchmark: Any, request: pytest.FixtureRequest) -> Callable[..., None]:
    """Runs one benchmark and keeps its median for the summary.

    ``record(case, impl, nbytes, func, *args, speedup=..., bandwidth=...)``: nbytes is what one call writes;
    speedup and bandwidth are the case's targets, printed next to the measured ratios.
    """

    def run(
        case: str,
        impl: str,
        nbytes: int,
        func: Callable[..., Any],
        *args: Any,
        speedup: float | None = None,
        bandwidth: float | None = None,
    ) -> None:
        config = request.config
        if speedup is not None:
            config.stash[SPEEDUP_TARGETS][case] = speedup
        if bandwidth is not None:
            config.stash[BANDWIDTH_TARGETS][case] = bandwidth
        benchmark.extra_info.update(case=case, impl=impl, bytes=nbytes)
        for _ in range(WARMUP_CALLS):
            func(*args)
        benchmark(func, *args)
        if benchmark.stats is not None:  # None under --benchmark-disable
            config.stash[RESULTS][case, impl] = (benchmark.stats.stats.median, nbytes)

    return run


@pytest.fixture
def record_pair(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``record_pair(case, offs, ons)``: per-round seconds with the sanitizer off and on, for the summary."""

    def keep(case: str, offs: list[float], ons: list[float]) -> None:
        ratios = [on / off for on, off in zip(ons, offs)]
        low, _, high = statistics.quantiles(ratios, n=4)
        request.config.stash[SANITIZER_PAIRS][case] = (
            statistics.median(offs),
            statistics.median(ons),
            statistics.median(ratios),
            low,
            high,
        )

    return keep


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            model = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    python = platform.python_version()
    return f"{model}, {os.cpu_count()} cores; Python {python}, numpy {np.__version__}, {sys.platform}"


def _time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _verdict(value: float, target: float) -> str:
    return "ok" if value >= target else "MISSED"


CHECK_OFF, CHECK_ON = "check off", "check on"


def summary_lines(
    results: dict[tuple[str, str], tuple[float, int]],
    speedups: dict[str, float],
    bandwidths: dict[str, float],
    pairs: dict[str, tuple[float, float, float, float, float]] | None = None,
) -> Iterator[str]:
    pairs = pairs or {}
    cases = [c for c in dict.fromkeys(case for case, _ in results) if (c, CHECK_OFF) not in results]
    yield f"machine: {machine()}"
    if cases:
        yield ""
        yield f"{'case':<44} {'c':>10} {'py':>10} {'py/c':>8}  target"
    for case in cases:
        c, py = results.get((case, "c")), results.get((case, "py"))
        cells = [_time(c[0]) if c else "-", _time(py[0]) if py else "-"]
        ratio = py[0] / c[0] if c and py else None
        target = speedups.get(case)
        verdict = f">= {target:g}x {_verdict(ratio, target)}" if target and ratio else ""
        ratio_cell = f"{ratio:.1f}x" if ratio else "-"
        yield f"{case:<44} {cells[0]:>10} {cells[1]:>10} {ratio_cell:>8}  {verdict}".rstrip()
    copies = [case for case in cases if (case, "np.copyto") in results]
    if copies:
        yield ""
        yield f"{'case':<44} {'c GB/s':>10} {'copyto GB/s':>12} {'c/copyto':>9}  target"
        for case in copies:
            c, numpy_copy = results.get((case, "c")), results[case, "np.copyto"]
            copyto_rate = numpy_copy[1] / numpy_copy[0] / 1e9
            if c is None:
                yield f"{case:<44} {'-':>10} {copyto_rate:>12.2f} {'-':>9}"
                continue
            rate = c[1] / c[0] / 1e9
            share = rate / copyto_rate
            target = bandwidths.get(case)
            verdict = f">= {target:g} {_verdict(share, target)}" if target else ""
            yield f"{case:<44} {rate:>10.2f} {copyto_rate:>12.2f} {share:>9.2f}  {verdict}".rstrip()
    checked = [c for c in dict.fromkeys(case for case, _ in results) if (c, CHECK_OFF) in results]
    if checked or pairs:
        yield ""
        yield "the simulator's sanitizer (GE_PLUGIN_SIM_CHECK), CPU simulator, timing-only executes"
    if checked:
        yield f"{'case (pytest-benchmark, one after the other)':<44} {'off':>10} {'on':>10} {'on/off':>8}"
        for case in checked:
            off, on = results[case, CHECK_OFF][0], results.get((case, CHECK_ON), (None, 0))[0]
            ratio = f"{on / off:>7.3f}x" if on is not None else "-"
            yield f"{case:<44} {_time(off):>10} {_time(on) if on is not None else '-':>10} {ratio:>8}"
    if pairs:
        yield f"{'case (paired blocks, process CPU time)':<44} {'off':>10} {'on':>10} {'on/off':>8}  interquartile"
        for case, (off, on, ratio, low, high) in pairs.items():
            yield f"{case:<44} {_time(off):>10} {_time(on):>10} {ratio:>7.3f}x  [{low:.3f}, {high:.3f}]"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    results = config.stash.get(RESULTS, {})
    pairs = config.stash.get(SANITIZER_PAIRS, {})
    if not results and not pairs:
        return
    terminalreporter.section("ge-plugin fast path: compiled (c) vs pure-Python twin (py), medians")
    speedups, bandwidths = config.stash[SPEEDUP_TARGETS], config.stash[BANDWIDTH_TARGETS]
    for line in summary_lines(results, speedups, bandwidths, pairs):
        terminalreporter.write_line(line)


# -- the simulated device's host cost (test_sim_device_bench.py) ----------------------------------------------

#: (device time label, size label) -> (median CPU seconds per execute, wall seconds per execute)
SIM_DEVICE = pytest.StashKey[dict]()
#: the most host CPU seconds one execute may cost
SIM_DEVICE_TARGET = pytest.StashKey[float]()
#: (size -> median CPU seconds per execute, size -> per-round ratios to the smallest size) of the paired run
SIM_DEVICE_SIZES = pytest.StashKey[tuple]()
#: device time label -> floor label -> size -> median CPU seconds (waiting that long without the simulator)
SIM_DEVICE_FLOOR = pytest.StashKey[dict]()


@pytest.fixture
def record_sim_device(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``record_sim_device(device_label, size_label, cpu_s, wall_s, target_s)``: one cell of the table that
    puts the sizes side by side, and the target every cell is held to."""

    def keep(device: str, size: str, cpu_s: float, wall_s: float, target_s: float) -> None:
        request.config.stash.setdefault(SIM_DEVICE, {})[device, size] = (cpu_s, wall_s)
        request.config.stash[SIM_DEVICE_TARGET] = target_s

    return keep


@pytest.fixture
def record_sim_sizes(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``record_sim_sizes(medians, ratios)``: the paired run of every size in one simulator."""

    def keep(medians: dict[str, float], ratios: dict[str, list[float]]) -> None:
        request.config.stash[SIM_DEVICE_SIZES] = (medians, ratios)

    return keep


@pytest.fixture
def record_sim_floor(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``record_sim_floor(device_label, floor_label, {size: cpu_s})``: what waiting that device time costs the
    CPU without the simulator's wait; the table subtracts the last floor of a row from it."""

    def keep(device: str, label: str, per_size: dict[str, float]) -> None:
        request.config.stash.setdefault(SIM_DEVICE_FLOOR, {}).setdefault(device, {})[label] = per_size

    return keep


def sim_device_lines(
    cells: dict[tuple[str, str], tuple[float, float]],
    target_s: float,
    paired: tuple[dict[str, float], dict[str, list[float]]] | None = None,
    floors: dict[str, dict[str, dict[str, float]]] | None = None,
) -> Iterator[str]:
    """Rows: device time; columns: sizes, median host CPU per execute; then the largest / smallest ratio."""
    sizes = list(dict.fromkeys(size for _, size in cells))
    devices = list(dict.fromkeys(device for device, _ in cells))
    yield f"machine: {machine()}"
    yield (
        "CPU simulator, timing only: H2D + gear + execute_async + D2H + synchronize_stream, "
        "process CPU time per execute (median)"
    )
    header = "".join(f" {size:>10}" for size in sizes)
    yield f"{'device time':<18}{header} {'max/min':>8}  target <= {_time(target_s)}"
    floors = floors or {}
    for device in devices:
        row = [cells.get((device, size)) for size in sizes]
        cpu = [cell[0] for cell in row if cell is not None]
        cells_text = "".join(f" {_time(cell[0]) if cell else '-':>10}" for cell in row)
        spread = f"{max(cpu) / min(cpu):.2f}x" if cpu else "-"
        verdict = ("ok" if max(cpu) <= target_s else "MISSED") if cpu else ""
        yield f"{device:<18}{cells_text} {spread:>8}  {verdict}"
        last: dict[str, float] = {}
        for label, last in floors.get(device, {}).items():
            yield f"  {label:<16}" + "".join(
                f" {_time(last[size]) if size in last else '-':>10}" for size in sizes
            )
        if last:
            yield f"  {'row minus that':<16}" + "".join(
                f" {_signed_time(cell[0] - last[size]) if cell and size in last else '-':>10}"
                for cell, size in zip(row, sizes)
            )
    yield "wall time per execute (the device time is spent off the CPU)"
    for device in devices:
        walls = "".join(
            f" {_time(cells[device, size][1]) if (device, size) in cells else '-':>10}" for size in sizes
        )
        yield f"  {device:<16}{walls}"
    if paired is not None:
        medians, ratios = paired
        yield "paired: the sizes alternating in one simulator, no device time; median, ratio to the smallest [IQR]"
        for size, median in medians.items():
            low, _, high = statistics.quantiles(ratios[size], n=4)
            middle = statistics.median(ratios[size])
            yield f"  {size:<16} {_time(median):>10}  {middle:.3f}x  [{low:.3f}, {high:.3f}]"


def _signed_time(seconds: float) -> str:
    return f"-{_time(-seconds)}" if seconds < 0 else f"+{_time(seconds)}"


@pytest.hookimpl(specname="pytest_terminal_summary")
def pytest_terminal_summary_sim_device(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    cells = config.stash.get(SIM_DEVICE, {})
    paired = config.stash.get(SIM_DEVICE_SIZES, None)
    if not cells and paired is None:
        return
    terminalreporter.section("ge-plugin simulated device: host CPU per execute, sizes side by side")
    target = config.stash.get(SIM_DEVICE_TARGET, 25e-6)
    for line in sim_device_lines(cells, target, paired, config.stash.get(SIM_DEVICE_FLOOR, {})):
        terminalreporter.write_line(line)
