"""The issue's targets, computed from one run's rows so the machine's noise cancels in the comparisons.

Targets, not tests: a missed target is reported with its value and the numbers it came from, never raised.
A target whose inputs were not measured (``--quick`` measures one point per model) has no value and no
verdict. Every latency target reads ge against a floor measured in the same run: the Python backend doing
the least Triton allows for a response of the same size (for P4a/P4c, at the device's pace). Each value
comes with its 95 % interval from the points' windows (``intervals``), and the verdict is the interval's:
met, missed, or within noise when it straddles the threshold.
"""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.proof import seed
from benchmarks.proof.repository import (
    FLOOR,
    GE_IDENTITY,
    GE_LLAMA,
    GE_MODELS,
    PACED_FLOOR,
    PY_IDENTITY,
    REPLICA_GE,
    REPLICA_NAIVE,
)
from benchmarks.proof.result import Target
from ge_plugin.measure import intervals
from ge_plugin.measure.records import Allocations, DirectRow, Measurement, Pass

#: the concurrency P5 compares the replica's ge LLaMA with the naive model at (the plan measures the naive
#: model there)
NAIVE_CONCURRENCY = 16


def at(triton: Sequence[Measurement], model: str, concurrency: int, batch: int = 1) -> Measurement | None:
    """The point, if perf_analyzer measured it (a point it could not is in the report, not in a target)."""
    return next(
        (
            m
            for m in triton
            if m.model == model and m.row.concurrency == concurrency and m.batch == batch and m.measured
        ),
        None,
    )


def p50_ms(triton: Sequence[Measurement], model: str, concurrency: int, batch: int = 1) -> float | None:
    """The p50 in ms of ``model`` at that concurrency and client batch; None where it was not measured."""
    m = at(triton, model, concurrency, batch)
    return None if m is None else m.row.p50_us / 1e3


def direct_at(direct: Sequence[DirectRow], model: str, batch: int) -> DirectRow | None:
    return next((r for r in direct if r.model == model and r.batch == batch), None)


def fastest(triton: Sequence[Measurement], model: str) -> Measurement | None:
    """``model``'s point with the most rows/s, over every batch and concurrency measured."""
    return max(
        (m for m in triton if m.model == model and m.measured), key=lambda m: m.row.throughput, default=None
    )


def fastest_direct(direct: Sequence[DirectRow], model: str) -> DirectRow | None:
    """``model``'s direct batch gear with the most rows/s."""
    return max((r for r in direct if r.model == model), key=lambda r: r.throughput, default=None)


def _missing(*names: str) -> str:
    return "not measured in this run: " + ", ".join(names)


def evaluate(
    triton: Sequence[Measurement], direct: Sequence[DirectRow], allocations: Sequence[Allocations]
) -> list[Target]:
    return [
        _identity_p50(triton),
        _identity_throughput(triton),
        _added(triton, direct, "P4a", (1,), 0.3),
        _best_throughput(triton, direct),
        _added(triton, direct, "P4c", (4, 8), 0.5),
        _naive(triton),
        _allocations(allocations),
        _llama_p50(triton),
    ]


def added_ms(triton: Sequence[Measurement], direct: Sequence[DirectRow], batch: int) -> float | None:
    """The replica's Triton p50 at client batch ``batch`` (c=1) minus the direct engine's at that batch."""
    served, alone = p50_ms(triton, REPLICA_GE, 1, batch), direct_at(direct, REPLICA_GE, batch)
    if served is None or alone is None:
        return None
    return served - alone.p50_ms


def paced_added_ms(triton: Sequence[Measurement], batch: int) -> float | None:
    """What the paced floor adds to its wait at client batch ``batch`` (c=1): p50 minus the device time."""
    paced = p50_ms(triton, PACED_FLOOR, 1, batch)
    if paced is None:
        return None
    return paced - seed.DIRECT_MS[batch]


def p50s_ms(windows: Sequence[Pass], fallback_us: float) -> list[float]:
    """The windows' p50s in ms; the point's own p50 when it has no windows (then no spread is known)."""
    return [w.p50_us / 1e3 for w in windows] or [fallback_us / 1e3]


def rates(windows: Sequence[Pass], fallback: float) -> list[float]:
    """The windows' rows/s; the point's own when it has no windows."""
    return [w.throughput for w in windows] or [fallback]


def _counted(*groups: Sequence[Pass]) -> str:
    return " and ".join(str(max(len(g), 1)) for g in groups) + " windows"


def _judged(key: str, what: str, op: str, limit: float, unit: str, estimate, detail: str) -> Target:
    return Target(
        key,
        what,
        op,
        limit,
        unit,
        estimate.value,
        detail,
        low=estimate.low,
        high=estimate.high,
        judged=estimate.verdict(op, limit),
    )


def _p50_over_floor(
    triton: Sequence[Measurement], key: str, what: str, ge_model: str, floor_model: str, limit: float
) -> Target:
    """A ge model's p50 over its floor's, both at c=1 (P3a, P7): the ratio of the windows' p50s."""
    ge, floor = at(triton, ge_model, 1), at(triton, floor_model, 1)
    if ge is None or floor is None:
        return Target(key, what, "<=", limit, "x", None, _missing(f"{ge_model} c=1", f"{floor_model} c=1"))
    estimate = intervals.ratio(p50s_ms(ge.windows, ge.row.p50_us), p50s_ms(floor.windows, floor.row.p50_us))
    detail = f"{ge.row.p50_us / 1e3:.3f} ms / {floor.row.p50_us / 1e3:.3f} ms; {_counted(ge.windows, floor.windows)}"
    return _judged(key, what, "<=", limit, "x", estimate, detail)


def _identity_p50(triton: Sequence[Measurement]) -> Target:
    what = "ge identity p50 / Python identity (floor) p50, c=1, no device time"
    return _p50_over_floor(triton, "P3a", what, GE_IDENTITY, PY_IDENTITY, 1.10)


def _identity_throughput(triton: Sequence[Measurement]) -> Target:
    what = "ge identity throughput / floor throughput, c=8, no device time"
    ge, floor = at(triton, GE_IDENTITY, 8), at(triton, PY_IDENTITY, 8)
    if ge is None or floor is None:
        return Target("P3b", what, ">=", 0.9, "x", None, _missing(f"{GE_IDENTITY} c=8", f"{PY_IDENTITY} c=8"))
    estimate = intervals.ratio(
        rates(ge.windows, ge.row.throughput), rates(floor.windows, floor.row.throughput)
    )
    detail = (
        f"{ge.row.throughput:.0f} / {floor.row.throughput:.0f} infer/s; {_counted(ge.windows, floor.windows)}"
    )
    return _judged("P3b", what, ">=", 0.9, "x", estimate, detail)


def paced_difference(
    triton: Sequence[Measurement], direct: Sequence[DirectRow], batch: int
) -> intervals.Interval | None:
    """What ge adds over the direct engine at client batch ``batch`` (c=1, replica) less what the paced
    floor adds to its wait, with its interval: (ge - direct) - (paced - device time), in ms."""
    ge = at(triton, REPLICA_GE, 1, batch)
    paced = at(triton, PACED_FLOOR, 1, batch)
    alone = direct_at(direct, REPLICA_GE, batch)
    if ge is None or paced is None or alone is None:
        return None
    return intervals.linear(
        [
            (1.0, p50s_ms(ge.windows, ge.row.p50_us)),
            (-1.0, p50s_ms(alone.windows, alone.p50_ms * 1e3)),
            (-1.0, p50s_ms(paced.windows, paced.row.p50_us)),
        ],
        constant=seed.DIRECT_MS[batch],
    )


def _added(
    triton: Sequence[Measurement],
    direct: Sequence[DirectRow],
    key: str,
    batches: tuple[int, ...],
    limit: float,
) -> Target:
    """Added p50 (Triton minus direct, replica) less what the paced floor adds to its wait, at each of
    ``batches``: met when every batch's interval is under ``limit``, missed when one is wholly above."""
    sizes = " and ".join(map(str, batches))
    what = (
        f"replica: Triton p50 - direct p50 at batch {sizes}, less what the paced floor adds to its device "
        "time (c=1)"
    )
    estimates = []
    parts = []
    for batch in batches:
        estimate = paced_difference(triton, direct, batch)
        if estimate is None:
            return Target(
                key,
                what,
                "<=",
                limit,
                "ms",
                None,
                _missing(
                    f"{REPLICA_GE} batch {batch} c=1",
                    f"direct {REPLICA_GE} batch {batch}",
                    f"{PACED_FLOOR} batch {batch}",
                ),
            )
        estimates.append(estimate)
        added, paced = added_ms(triton, direct, batch), paced_added_ms(triton, batch)
        parts.append(
            f"batch {batch}: {estimate.value:+.2f} ms ({estimate.low:+.2f} to {estimate.high:+.2f}; added "
            f"{added:+.2f} ms, the paced floor {paced:+.2f} ms)"
        )
    verdicts = [e.verdict("<=", limit) for e in estimates]
    judged = "missed" if "missed" in verdicts else ("within noise" if "within noise" in verdicts else "met")
    worst = max(estimates, key=lambda e: e.high)
    return Target(
        key,
        what,
        "<=",
        limit,
        "ms",
        max(e.value for e in estimates),
        "; ".join(parts),
        low=worst.low,
        high=worst.high,
        judged=judged,
    )


def _best_throughput(triton: Sequence[Measurement], direct: Sequence[DirectRow]) -> Target:
    what = "replica: best Triton throughput / best direct (rows/s)"
    best, best_direct = fastest(triton, REPLICA_GE), fastest_direct(direct, REPLICA_GE)
    if best is None or best_direct is None:
        return Target("P4b", what, ">=", 1.0, "x", None, _missing(REPLICA_GE, f"direct {REPLICA_GE}"))
    estimate = intervals.ratio(
        rates(best.windows, best.row.throughput), rates(best_direct.windows, best_direct.throughput)
    )
    detail = (
        f"{best.row.throughput:.1f} rows/s at c={best.row.concurrency}, batch {best.batch} / "
        f"{best_direct.throughput:.1f} rows/s at batch {best_direct.batch}; "
        f"{_counted(best.windows, best_direct.windows)}"
    )
    return _judged("P4b", what, ">=", 1.0, "x", estimate, detail)


def _naive(triton: Sequence[Measurement]) -> Target:
    c = NAIVE_CONCURRENCY
    what = f"replica: ge LLaMA throughput / naive pyACL model throughput, c={c}"
    ge, naive = at(triton, REPLICA_GE, c), at(triton, REPLICA_NAIVE, c)
    if ge is None or naive is None:
        return Target(
            "P5", what, ">=", 2.5, "x", None, _missing(f"{REPLICA_GE} c={c}", f"{REPLICA_NAIVE} c={c}")
        )
    estimate = intervals.ratio(
        rates(ge.windows, ge.row.throughput), rates(naive.windows, naive.row.throughput)
    )
    detail = (
        f"{ge.row.throughput:.1f} / {naive.row.throughput:.1f} infer/s; {_counted(ge.windows, naive.windows)}"
    )
    return _judged("P5", what, ">=", 2.5, "x", estimate, detail)


def _allocations(allocations: Sequence[Allocations]) -> Target:
    what = "device + pinned host allocations per request after warm-up, ge models (simulator counters)"
    covered = [a for a in allocations if a.model in GE_MODELS and a.per_request is not None]
    if not covered:
        return Target("P6", what, "==", 0, "allocations/request", None, _missing("allocation counters"))
    value = max(a.per_request for a in covered if a.per_request is not None)
    detail = "; ".join(
        f"{a.model} {a.where}: {a.mallocs_total} = {a.instances} x {a.mallocs_at_start} at start, "
        f"{a.requests} requests"
        for a in covered
    )
    return Target("P6", what, "==", 0, "allocations/request", value, detail)


def _llama_p50(triton: Sequence[Measurement]) -> Target:
    what = "ge LLaMA p50 / same-size floor p50, c=1, no device time"
    return _p50_over_floor(triton, "P7", what, GE_LLAMA, FLOOR, 1.15)
