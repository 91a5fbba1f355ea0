"""The published "direct AscendCL" row: the engine called in-process on the same sim OM, without Triton.

It reads the same config.pbtxt the server reads, so lanes, gears, buffers and the simulated device (the
config's acl.json) are those of one served instance. Each batch gear is timed with sequential ``execute``
calls after a warm-up: p50/p99 of the call and rows per second. Outputs are views of the engine's staging,
as a program calling pyACL reads its results where they land: no copy a user would not make. The engine's
own clock gives the part of each call spent on the (simulated) stream, so the rest is host time. The
simulator's allocation counters are read after start-up and again after the timed calls, so "nothing is
allocated per request" is a measured difference, not a claim.

It runs in a child process (``python -m ge_plugin.measure.direct``) so that pyACL is initialised once with
the models' acl.json and the counters hold these engines alone; models whose acl.json differ need one child
each (``acl.init`` runs once per process). ``run_child`` starts it and reads its JSON.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from ge_plugin.errors import BenchError
from ge_plugin.measure.allocations import mallocs
from ge_plugin.measure.records import Allocations, DirectRow, Pass

#: timed calls per batch size, at least, however short the time budget
MIN_ITERATIONS = 20
WARMUP_CALLS = 5
#: the timed calls are cut into at most this many consecutive stretches of at least WINDOW_CALLS each, the
#: direct engine's windows for the targets' intervals
WINDOWS = 8
WINDOW_CALLS = 5


def time_calls(
    call: Callable[[], object], *, seconds: float, min_iterations: int = MIN_ITERATIONS
) -> list[float]:
    """Latencies (s) of ``call()`` repeated until ``seconds`` have passed and ``min_iterations`` were made."""
    latencies = []
    started = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        call()
        t1 = time.perf_counter()
        latencies.append(t1 - t0)
        if t1 - started >= seconds and len(latencies) >= min_iterations:
            return latencies


def summarize(
    model: str, batch: int, latencies: Sequence[float], stream_ms: float | None = None
) -> DirectRow:
    values = np.asarray(latencies, dtype=np.float64)
    return DirectRow(
        model=model,
        batch=batch,
        iterations=len(values),
        throughput=batch * len(values) / float(values.sum()),
        p50_ms=float(np.percentile(values, 50)) * 1e3,
        p99_ms=float(np.percentile(values, 99)) * 1e3,
        stream_ms=stream_ms,
        windows=windows(values, batch),
    )


def windows(latencies: np.ndarray[Any, Any], batch: int) -> tuple[Pass, ...]:
    """The calls in consecutive stretches (as perf_analyzer's windows are): each its rows/s and p50."""
    count = min(WINDOWS, len(latencies) // WINDOW_CALLS)
    if count < 2:
        return ()
    return tuple(
        Pass(throughput=batch * len(part) / float(part.sum()), p50_us=float(np.percentile(part, 50)) * 1e6)
        for part in np.array_split(latencies, count)
    )


def request_from_input_data(
    path: Path, dtypes: Mapping[str, np.dtype[Any]]
) -> dict[str, np.ndarray[Any, Any]]:
    """The first entry of a perf_analyzer ``--input-data`` file as one request of batch 1: each tensor's
    ``content``, or its ``b64`` (raw bytes; for BYTES, Triton's serialized elements: length, then bytes)."""
    try:
        entry = json.loads(Path(path).read_text())["data"][0]
        return {
            name: _tensor(value, dtypes[name]).reshape([1, *value["shape"]]) for name, value in entry.items()
        }
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise BenchError(f"{path}: not a perf_analyzer input-data file with one entry: {exc}") from None


def _tensor(value: Mapping[str, Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    if "b64" not in value:
        return np.asarray(value["content"], dtype=dtype)
    raw = base64.b64decode(value["b64"], validate=True)
    if dtype != np.dtype(object):
        return np.frombuffer(raw, dtype=dtype)
    from tritonclient.utils import deserialize_bytes_tensor

    elements: np.ndarray[Any, Any] = deserialize_bytes_tensor(raw)
    return elements


def allocation_count() -> int:
    """Device mallocs on every device plus pinned host mallocs, cumulative, from this process's simulator:
    counted as in the reports the served stubs leave behind, which hold the same snapshot."""
    from ge_plugin import sim

    return mallocs(sim.snapshot())


def measure_model(
    repo: Path, name: str, input_data: Path, *, seconds: float, min_iterations: int = MIN_ITERATIONS
) -> tuple[list[DirectRow], Allocations]:
    """Every batch gear of one ge model of the bench repository, plus its allocation counts."""
    from ge_plugin.engine import Engine, Lifetime, read_config_pbtxt

    config = read_config_pbtxt(repo / name / "config.pbtxt")
    before = allocation_count()
    engine = Engine.from_model_config(config, version_dir=repo / name / "1")
    try:
        started = allocation_count()
        dtypes = {io.name: np.dtype(io.dtype.numpy) for io in engine.config.inputs}
        request = request_from_input_data(input_data, dtypes)
        rows = []
        calls = 0
        for batch in engine.config.params.gears or (1,):
            batch_requests = [request] * batch

            def call(batch_requests: list[Any] = batch_requests) -> None:
                for outcome in engine.execute(batch_requests, lifetime=Lifetime.UNTIL_NEXT_CALL):
                    if not isinstance(outcome, dict):
                        raise BenchError(f"{name}: the engine refused the bench's request: {outcome}")

            warmup = min(WARMUP_CALLS, min_iterations)
            for _ in range(warmup):
                call()
            stats = engine.stats
            executes, stream_us = stats.executes, stats.execute_us_sum
            latencies = time_calls(call, seconds=seconds, min_iterations=min_iterations)
            executed = stats.executes - executes
            stream_ms = (stats.execute_us_sum - stream_us) / executed / 1e3 if executed else None
            calls += (warmup + len(latencies)) * batch
            rows.append(summarize(name, batch, latencies, stream_ms))
        after = allocation_count()
    finally:
        engine.close()
    allocations = Allocations(
        model=name,
        where="direct",
        instances=1,
        requests=calls,
        mallocs_at_start=started - before,
        mallocs_total=after - before,
    )
    return rows, allocations


def run(
    repo: Path, inputs: Mapping[str, Path], *, seconds: float, min_iterations: int = MIN_ITERATIONS
) -> dict[str, Any]:
    """Measure every model of ``inputs`` (model name -> input-data file); the JSON ``run_child`` reads."""
    from ge_plugin import device

    rows: list[DirectRow] = []
    allocations: list[Allocations] = []
    try:
        for name, path in inputs.items():
            model_rows, model_allocations = measure_model(
                repo, name, path, seconds=seconds, min_iterations=min_iterations
            )
            rows += model_rows
            allocations.append(model_allocations)
    finally:
        device.finalize()
    return {
        "device": device.kind(),
        "rows": [attrs.asdict(row) for row in rows],
        "allocations": [attrs.asdict(a) for a in allocations],
    }


#: the least time a direct child gets, however few seconds it is asked to time
MIN_BUDGET_S = 300


def run_child(
    repo: Path,
    inputs: Mapping[str, Path],
    *,
    seconds: float,
    output: Path,
    environment: Mapping[str, str],
    min_iterations: int = MIN_ITERATIONS,
) -> tuple[list[DirectRow], list[Allocations]]:
    """``run`` in a fresh Python process with ``environment`` added (the simulator's knobs). It gets time in
    proportion to what it times, and never less than ``MIN_BUDGET_S`` (loads on a busy machine)."""
    cmd = [
        sys.executable,
        "-m",
        "ge_plugin.measure.direct",
        str(repo),
        "--seconds",
        str(seconds),
        "--min-iterations",
        str(min_iterations),
        "--json",
        str(output),
    ]
    for name, path in inputs.items():
        cmd += ["--model", f"{name}={path}"]
    env = {k: v for k, v in os.environ.items() if k != "GE_PLUGIN_SIM_REPORT_DIR"}
    env.update(environment)
    budget = max(MIN_BUDGET_S, 120 + seconds * 10 * max(1, len(inputs)))
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=budget)
    except subprocess.TimeoutExpired:
        raise BenchError(f"the direct engine run did not finish in {budget:.0f} s") from None
    if out.returncode != 0:
        tail = "\n".join((out.stderr or out.stdout).strip().splitlines()[-5:])
        raise BenchError(f"the direct engine run failed (exit {out.returncode}):\n{tail}")
    data = json.loads(output.read_text())
    return (
        [direct_row(row) for row in data["rows"]],
        [Allocations(**a) for a in data["allocations"]],
    )


def direct_row(data: Mapping[str, Any]) -> DirectRow:
    """A DirectRow from its JSON (``attrs.asdict``), its windows included."""
    return DirectRow(**{**data, "windows": tuple(Pass(**w) for w in data.get("windows", ()))})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ge_plugin.measure.direct",
        description="Time ge models of a bench repository in-process (no Triton); used by ge-plugin bench.",
    )
    parser.add_argument("repository", type=Path)
    parser.add_argument(
        "--model", action="append", required=True, metavar="NAME=INPUT_JSON", help="model and its input data"
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="time budget per batch size")
    parser.add_argument(
        "--min-iterations", type=int, default=MIN_ITERATIONS, help="timed calls per batch size, at least"
    )
    parser.add_argument("--json", type=Path, required=True, help="where to write the results")
    args = parser.parse_args(argv)
    inputs = {}
    for item in args.model:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            parser.error(f"--model takes NAME=INPUT_JSON, not {item!r}")
        inputs[name] = Path(path)
    result = run(args.repository, inputs, seconds=args.seconds, min_iterations=args.min_iterations)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
