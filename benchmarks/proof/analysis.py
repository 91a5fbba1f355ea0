"""What a bench run's figures say: the replica beside the seed, ge's host time per execute, the stubs' own
phases, and the rows per second the simulated device allows. Plain data, for the JSON and the markdown alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from benchmarks.proof import seed
from benchmarks.proof.ratios import (
    NAIVE_CONCURRENCY,
    at,
    direct_at,
    fastest,
    fastest_direct,
    p50_ms,
)
from benchmarks.proof.repository import (
    FLOOR,
    GE_IDENTITY,
    GE_LLAMA,
    PACED_FLOOR,
    PY_IDENTITY,
    REPLICA_1X1,
    REPLICA_2X1,
    REPLICA_GE,
    REPLICA_NAIVE,
)
from benchmarks.proof.result import Result

#: instances × streams of the replica's LLaMA models, in the order tables list them
LAYOUTS = {REPLICA_1X1: "1 × 1", REPLICA_2X1: "2 × 1", REPLICA_GE: "1 × 2 (as served)"}


def replica_rows(result: Result) -> dict[str, Any]:
    """Our replica's figures, None where not measured."""
    direct_ms, triton_ms, floor_ms, paced_ms = {}, {}, {}, {}
    for b in seed.BATCHES:
        d = direct_at(result.direct, REPLICA_GE, b)
        direct_ms[str(b)] = d.p50_ms if d else None
        triton_ms[str(b)] = p50_ms(result.triton, REPLICA_GE, 1, b)
        floor_ms[str(b)] = p50_ms(result.triton, FLOOR, 1, b)
        paced_ms[str(b)] = p50_ms(result.triton, PACED_FLOOR, 1, b)
    best, best_direct = fastest(result.triton, REPLICA_GE), fastest_direct(result.direct, REPLICA_GE)
    naive = at(result.triton, REPLICA_NAIVE, NAIVE_CONCURRENCY) or at(result.triton, REPLICA_NAIVE, 1)
    return {
        "direct_ms": direct_ms,
        "triton_ms": triton_ms,
        "floor_ms": floor_ms,
        "paced_floor_ms": paced_ms,
        "direct_max_rows_per_s": best_direct.throughput if best_direct else None,
        "direct_max_at_batch": best_direct.batch if best_direct else None,
        "triton_max_rows_per_s": best.row.throughput if best else None,
        "triton_max_at_concurrency": best.row.concurrency if best else None,
        "naive_rows_per_s": naive.row.throughput if naive else None,
        "naive_at_concurrency": naive.row.concurrency if naive else None,
    }


def host_rows(result: Result) -> list[dict[str, Any]]:
    """ge's host time per execute, at concurrency 1 (one request per execute): directly and served.

    Served: Triton's compute infer (the stub's whole ``execute``) minus the engine's stream time per execute
    (``ge_execute_duration_us``: the simulator's H2D, execute and D2H, device time included) is what the
    backend and the engine spend on the host. Direct: the call's p50 minus its stream time. The floor's
    compute infer is what the Python backend spends on the same response with nothing to run."""
    rows = []
    pairs: list[tuple[str, str | None, int]] = [(GE_IDENTITY, PY_IDENTITY, 1)]
    pairs += [(GE_LLAMA, FLOOR, b) for b in seed.BATCHES]
    pairs += [(REPLICA_GE, None, b) for b in seed.BATCHES]
    for ge, floor, batch in pairs:
        served = at(result.triton, ge, 1, batch)
        alone = direct_at(result.direct, ge, batch)
        base = at(result.triton, floor, 1, batch) if floor else None
        if served is None and alone is None:
            continue
        infer = served.row.server_compute_infer_us if served else None
        stream = (
            served.server.engine_ms_per_execute * 1e3
            if served and served.server.engine_ms_per_execute
            else None
        )
        rows.append(
            {
                "model": ge,
                "batch": batch,
                "direct_us": alone.p50_ms * 1e3 if alone else None,
                "direct_stream_us": alone.stream_ms * 1e3 if alone and alone.stream_ms is not None else None,
                "direct_host_us": alone.host_us if alone else None,
                "compute_infer_us": infer,
                "stream_us": stream,
                # with streams_per_instance > 1 execute returns once the batch is staged and the completion
                # thread answers it: compute infer then ends before the stream does, and says nothing here
                "host_us": infer - stream
                if infer is not None and stream is not None and infer >= stream
                else None,
                "floor_compute_infer_us": base.row.server_compute_infer_us if base else None,
                "floor": floor,
            }
        )
    return rows


def stub_rows(result: Result) -> list[dict[str, Any]]:
    """Inside the stub, at concurrency 1: ge and its floor, point by point (from the stubs' timers)."""
    pairs: list[tuple[str, str, int]] = [(GE_IDENTITY, PY_IDENTITY, 1)]
    pairs += [(GE_LLAMA, FLOOR, b) for b in seed.BATCHES]
    pairs += [(REPLICA_GE, PACED_FLOOR, b) for b in seed.BATCHES]
    rows = []
    for ge, floor, batch in pairs:
        ours, theirs = at(result.triton, ge, 1, batch), at(result.triton, floor, 1, batch)
        if (ours is None or ours.stub is None) and (theirs is None or theirs.stub is None):
            continue
        rows.append(
            {
                "model": ge,
                "floor": floor,
                "batch": batch,
                "ge": attrs.asdict(ours.stub) if ours is not None and ours.stub is not None else None,
                "floor_stub": attrs.asdict(theirs.stub)
                if theirs is not None and theirs.stub is not None
                else None,
            }
        )
    return rows


def device_bound(batch_sizes: Mapping[str, int] | None) -> float | None:
    """Rows per second the replica's device allows for this mix of executes: their rows over the seed's
    device time of the gears they ran on (a batch of 6 runs on gear 8). What the device could do with the
    batches it was given; the measured rows/s can only approach it."""
    if not batch_sizes:
        return None
    rows = ms = 0.0
    for size, count in batch_sizes.items():
        gear = next((b for b in seed.BATCHES if b >= int(size)), None)
        if gear is None:
            return None
        rows += int(size) * count
        ms += seed.DIRECT_MS[gear] * count
    return rows / ms * 1e3 if ms else None


def device_bound_gears(gears: Mapping[str, int] | None, rows_per_execute: float | None) -> float | None:
    """Rows per second the replica's device allows for the executes it ran, from the ge backend's executes by
    gear (``8x16``: the gear's rows first) and the rows they carried."""
    if not gears or rows_per_execute is None:
        return None
    ms = 0.0
    for label, count in gears.items():
        rows = leading(label)
        if rows not in seed.DIRECT_MS:
            return None
        ms += seed.DIRECT_MS[rows] * count
    return rows_per_execute * sum(gears.values()) / ms * 1e3


def leading(label: str) -> int:
    """The rows a batch size or gear label starts with (``8``, ``8x16``)."""
    head = label.split("x")[0]
    return int(head) if head.isdigit() else 0
