"""The issue's targets P3–P6, computed from one run's rows so the machine's noise cancels in the ratios.

Targets, not tests: a missed target is reported with its value and the numbers it came from, never raised.
A target whose inputs were not measured (``--quick`` runs one concurrency) has no value and no verdict.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import attrs

from ge_plugin.bench.direct import Allocations, DirectRow
from ge_plugin.bench.perf import Measurement

_OPS = {"<=": operator.le, ">=": operator.ge, "==": operator.eq}
#: ge models whose allocations P6 covers, directly and served
GE_MODELS = ("ge_identity", "ge_llama")


@attrs.frozen
class Target:
    id: str
    what: str
    op: str  #: "<=", ">=" or "=="
    threshold: float
    unit: str  #: "x" (a ratio), "ms" or "allocations/request"
    value: float | None
    detail: str  #: the raw numbers the value came from, or why there is none

    @property
    def passed(self) -> bool | None:
        if self.value is None:
            return None
        return bool(_OPS[self.op](round(self.value, 6), self.threshold))

    def show_value(self) -> str:
        if self.value is None:
            return "–"
        if self.unit == "x":
            return f"{self.value:.2f}×"
        if self.unit == "ms":
            return f"{self.value:+.2f} ms"
        return f"{self.value:g}"

    def show_target(self) -> str:
        unit = "×" if self.unit == "x" else f" {self.unit}"
        return f"{self.op} {self.threshold:g}{unit}"

    def verdict(self) -> str:
        return {True: "met", False: "missed", None: "n/a"}[self.passed]


def _at(triton: Sequence[Measurement], model: str, concurrency: int) -> Measurement | None:
    return next((m for m in triton if m.model == model and m.row.concurrency == concurrency), None)


def _missing(*names: str) -> str:
    return "not measured in this run: " + ", ".join(names)


def evaluate(
    triton: Sequence[Measurement],
    direct: Sequence[DirectRow],
    allocations: Sequence[Allocations],
    *,
    device_latency_ms: float = 0.0,
) -> list[Target]:
    """P3–P6. With simulated device time, P3 has no verdict: its floor has no device to wait for."""
    p3 = [_ratio_p50(triton), _ratio_throughput(triton)]
    if device_latency_ms:
        why = (
            f"not comparable: ge_identity waits {device_latency_ms:g} ms of simulated device time per execute "
            "and the Python floor has no device; P3 is measured without --device-latency-ms"
        )
        p3 = [attrs.evolve(t, value=None, detail=why) for t in p3]
    return [
        *p3,
        _added_latency(triton, direct),
        _best_throughput(triton, direct),
        _naive(triton),
        _allocations(allocations),
    ]


def _ratio_p50(triton: Sequence[Measurement]) -> Target:
    what = "ge identity p50 / Python identity (floor) p50, c=1"
    ge, floor = _at(triton, "ge_identity", 1), _at(triton, "py_identity", 1)
    if ge is None or floor is None:
        return Target("P3a", what, "<=", 1.10, "x", None, _missing("ge_identity c=1", "py_identity c=1"))
    value = ge.row.p50_us / floor.row.p50_us
    detail = f"{ge.row.p50_us / 1e3:.3f} ms / {floor.row.p50_us / 1e3:.3f} ms"
    return Target("P3a", what, "<=", 1.10, "x", value, detail)


def _ratio_throughput(triton: Sequence[Measurement]) -> Target:
    what = "ge identity throughput / floor throughput, c=8"
    ge, floor = _at(triton, "ge_identity", 8), _at(triton, "py_identity", 8)
    if ge is None or floor is None:
        return Target("P3b", what, ">=", 0.9, "x", None, _missing("ge_identity c=8", "py_identity c=8"))
    value = ge.row.throughput / floor.row.throughput
    detail = f"{ge.row.throughput:.0f} / {floor.row.throughput:.0f} infer/s"
    return Target("P3b", what, ">=", 0.9, "x", value, detail)


def _added_latency(triton: Sequence[Measurement], direct: Sequence[DirectRow]) -> Target:
    what = "tiny LLaMA p50 through Triton (c=1) minus direct p50 (batch 1)"
    served = _at(triton, "ge_llama", 1)
    alone = next((r for r in direct if r.model == "ge_llama" and r.batch == 1), None)
    if served is None or alone is None:
        return Target("P4a", what, "<=", 0.5, "ms", None, _missing("ge_llama c=1", "direct ge_llama batch 1"))
    value = served.row.p50_us / 1e3 - alone.p50_ms
    detail = f"{served.row.p50_us / 1e3:.3f} ms - {alone.p50_ms:.3f} ms"
    return Target("P4a", what, "<=", 0.5, "ms", value, detail)


def _best_throughput(triton: Sequence[Measurement], direct: Sequence[DirectRow]) -> Target:
    what = "tiny LLaMA best throughput through Triton / best direct (any gear)"
    served = [m for m in triton if m.model == "ge_llama"]
    alone = [r for r in direct if r.model == "ge_llama"]
    if not served or not alone:
        return Target("P4b", what, ">=", 1.0, "x", None, _missing("ge_llama", "direct ge_llama"))
    best = max(served, key=lambda m: m.row.throughput)
    best_direct = max(alone, key=lambda r: r.throughput)
    value = best.row.throughput / best_direct.throughput
    detail = (
        f"{best.row.throughput:.0f} infer/s at c={best.row.concurrency} / "
        f"{best_direct.throughput:.0f} rows/s at batch {best_direct.batch}"
    )
    return Target("P4b", what, ">=", 1.0, "x", value, detail)


def _naive(triton: Sequence[Measurement]) -> Target:
    what = "ge tiny LLaMA throughput / naive pyACL model throughput, c=16"
    ge, naive = _at(triton, "ge_llama", 16), _at(triton, "naive_llama", 16)
    if ge is None or naive is None:
        return Target("P5", what, ">=", 2.0, "x", None, _missing("ge_llama c=16", "naive_llama c=16"))
    value = ge.row.throughput / naive.row.throughput
    detail = f"{ge.row.throughput:.0f} / {naive.row.throughput:.0f} infer/s"
    return Target("P5", what, ">=", 2.0, "x", value, detail)


def _allocations(allocations: Sequence[Allocations]) -> Target:
    what = "device + pinned host allocations per request after warm-up, ge models (simulator counters)"
    covered = [a for a in allocations if a.model in GE_MODELS and a.per_request is not None]
    if not covered:
        return Target("P6", what, "==", 0, "allocations/request", None, _missing("allocation counters"))
    value = max(a.per_request for a in covered)
    detail = "; ".join(
        f"{a.model} {a.where}: {a.mallocs_total} = {a.instances} x {a.mallocs_at_start} at start, "
        f"{a.requests} requests"
        for a in covered
    )
    return Target("P6", what, "==", 0, "allocations/request", value, detail)
