"""95 % intervals for the bench's targets, from per-window figures.

perf_analyzer measures a point in windows (2 s in the host phase, 4 s in the replica); each window has its own
p50 and throughput, and so does each stretch of the direct engine's calls. A target compares two or three
points measured in the same run, each by the median of its windows' figures: a median, because on a shared
VM one window in several is hit by a stall of other work (a window's p50 three or four times the others' is
common) and a mean would follow it. The interval is a percentile bootstrap: each point's windows resampled
with replacement, the statistic recomputed, 4000 times, the middle 95 % kept. Windows of one point are not
independent draws (a slow stretch spans several), which is why the bench measures the points a target
compares one right after the other and, for the targets near their thresholds, twice, alternating; the
interval is what these windows can say, no more. A point with a single window has no spread to resample:
its interval is unbounded.

A verdict follows from the interval, never from the point estimate alone: "met" when the whole interval
meets the threshold, "missed" when none of it does, "within noise" when it straddles the threshold.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

#: bootstrap resamples, and the seed that makes a report's intervals reproducible from its windows
ROUNDS = 4000
SEED = 19


@attrs.frozen
class Interval:
    """A point estimate and its 95 % interval."""

    value: float
    low: float
    high: float

    def verdict(self, op: str, threshold: float) -> str:
        """``met``, ``missed`` or ``within noise`` for a target ``value op threshold``."""
        if op == "<=":
            return "met" if self.high <= threshold else ("missed" if self.low > threshold else "within noise")
        if op == ">=":
            return "met" if self.low >= threshold else ("missed" if self.high < threshold else "within noise")
        raise ValueError(f"no interval verdict for {op!r}")


def _bootstrap(groups: Sequence[Sequence[float]], statistic: Callable[..., np.ndarray[Any, Any]]) -> Interval:
    """``statistic`` of the groups' medians, and its percentile bootstrap interval over their windows."""
    if not groups or any(len(g) == 0 for g in groups):
        raise ValueError("no windows to estimate from")
    value = float(statistic(*(np.median(np.asarray(g, dtype=np.float64)) for g in groups)))
    if any(len(g) < 2 for g in groups):
        return Interval(value, -math.inf, math.inf)
    rng = np.random.default_rng(SEED)
    medians = [
        np.median(rng.choice(np.asarray(g, dtype=np.float64), size=(ROUNDS, len(g)), replace=True), axis=1)
        for g in groups
    ]
    low, high = np.percentile(statistic(*medians), [2.5, 97.5])
    return Interval(value, float(low), float(high))


def linear(terms: Sequence[tuple[float, Sequence[float]]], constant: float = 0.0) -> Interval:
    """``constant + sum(weight * median(windows))`` with its interval."""
    weights = [w for w, _ in terms]

    def combine(*medians: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return np.asarray(constant + sum(w * m for w, m in zip(weights, medians)))

    return _bootstrap([values for _, values in terms], combine)


def ratio(numerator: Sequence[float], denominator: Sequence[float]) -> Interval:
    """``median(numerator) / median(denominator)`` with its interval (every window > 0)."""
    if min((*numerator, *denominator), default=0) <= 0:
        raise ValueError("a ratio's windows must all be positive")
    return _bootstrap([numerator, denominator], lambda a, b: a / b)
