"""What one run of the proof concludes: the targets as it met them, and the whole run as one record (the
measurements themselves are ``ge_plugin.measure.records``)."""

from __future__ import annotations

import operator
from typing import Any

import attrs

from ge_plugin.measure.records import Allocations, BenchModel, DirectRow, Measurement

_OPS = {"<=": operator.le, ">=": operator.ge, "==": operator.eq}


@attrs.frozen
class Target:
    """One of the issue's targets as one run met it, or did not, or could not tell."""

    id: str
    what: str
    op: str  #: "<=", ">=" or "=="
    threshold: float
    unit: str  #: "x" (a ratio), "ms" or "allocations/request"
    value: float | None
    detail: str  #: the raw numbers the value came from, or why there is none
    #: the 95 % interval of the value, from the points' windows (None: exact, or not measured)
    low: float | None = None
    high: float | None = None
    #: the verdict the interval gives ("met", "missed", "within noise"); None: from the value alone
    judged: str | None = None

    @property
    def passed(self) -> bool | None:
        """The point estimate against the threshold (the verdict also weighs the interval)."""
        if self.value is None:
            return None
        return bool(_OPS[self.op](round(self.value, 6), self.threshold))

    def _show(self, value: float) -> str:
        if self.unit == "x":
            return f"{value:.2f}×"
        if self.unit == "ms":
            return f"{value:+.2f} ms"
        return f"{value:g}"

    def show_value(self) -> str:
        return "–" if self.value is None else self._show(self.value)

    def show_interval(self) -> str:
        if self.low is None or self.high is None:
            return "–"
        if self.low == float("-inf") or self.high == float("inf"):
            return "unbounded (one window)"
        return f"{self._show(self.low)} to {self._show(self.high)}"

    def show_target(self) -> str:
        unit = "×" if self.unit == "x" else f" {self.unit}"
        return f"{self.op} {self.threshold:g}{unit}"

    def verdict(self) -> str:
        if self.judged is not None:
            return self.judged
        return {True: "met", False: "missed", None: "n/a"}[self.passed]


@attrs.frozen
class Result:
    """One whole run: what ``report`` writes as JSON and markdown, and reads back."""

    label: str  #: "CPU simulator (timing-only), 2 cores"
    created: str  #: ISO 8601, UTC
    machine: dict[str, Any]
    options: dict[str, Any]
    models: tuple[BenchModel, ...]
    triton: tuple[Measurement, ...]
    direct: tuple[DirectRow, ...]
    allocations: tuple[Allocations, ...]
    targets: tuple[Target, ...]
    notes: tuple[str, ...] = ()  #: what the run could not do, said in the report rather than hidden

    def model(self, name: str) -> BenchModel:
        return next(m for m in self.models if m.name == name)
