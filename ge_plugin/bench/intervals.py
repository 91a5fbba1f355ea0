"""95 % intervals for the bench's targets, from per-window figures.

perf_analyzer measures a point in windows (2 s in the host phase, 4 s in the replica); each window has its own
p50 and throughput, and so does each stretch of the direct engine's calls. A target compares means of such
figures between two or three points measured in the same run, so its uncertainty is that of a difference
(or ratio) of means of a few windows each: a Welch t-interval, with the Welch–Satterthwaite degrees of
freedom. Ratios are taken on the log scale (the interval of a ratio of positive means is not symmetric).
Windows of one point are not independent draws (a slow stretch of a shared VM spans several), which is why
the bench measures the points a target compares one right after the other and, for the targets near their
thresholds, twice, alternating; the interval is still what these windows can say, no more.

A verdict follows from the interval, never from the point estimate alone: "met" when the whole interval
meets the threshold, "missed" when none of it does, "within noise" when it straddles the threshold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs

#: two-sided 95 % quantiles of Student's t by degrees of freedom (interpolated between, normal beyond)
_T975 = (
    (1, 12.706),
    (2, 4.303),
    (3, 3.182),
    (4, 2.776),
    (5, 2.571),
    (6, 2.447),
    (7, 2.365),
    (8, 2.306),
    (9, 2.262),
    (10, 2.228),
    (12, 2.179),
    (15, 2.131),
    (20, 2.086),
    (25, 2.060),
    (30, 2.042),
    (40, 2.021),
    (60, 2.000),
    (120, 1.980),
)
_NORMAL975 = 1.960


def t975(df: float) -> float:
    """The 97.5 % quantile of Student's t with ``df`` degrees of freedom (df >= 1)."""
    if df <= 1:
        return _T975[0][1]
    for (d0, t0), (d1, t1) in zip(_T975, _T975[1:]):
        if df <= d1:
            return t0 + (t1 - t0) * (df - d0) / (d1 - d0)
    return _NORMAL975 + (_T975[-1][1] - _NORMAL975) * 120 / df


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


def _mean_and_variance(values: Sequence[float]) -> tuple[float, float, int]:
    """Mean, the variance of the mean, and the count; a single value has no spread to estimate (inf)."""
    n = len(values)
    if n == 0:
        raise ValueError("no windows to estimate from")
    mean = math.fsum(values) / n
    if n == 1:
        return mean, math.inf, 1
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, variance / n, n


def linear(terms: Sequence[tuple[float, Sequence[float]]], constant: float = 0.0) -> Interval:
    """The interval of ``constant + sum(weight * mean(values))``: Welch's, each group's windows its own."""
    value = constant
    variance = 0.0
    denominator = 0.0
    for weight, values in terms:
        mean, var_mean, n = _mean_and_variance(values)
        value += weight * mean
        part = weight * weight * var_mean
        variance += part
        if n > 1 and part > 0:
            denominator += part * part / (n - 1)
    if math.isinf(variance):
        return Interval(value, -math.inf, math.inf)
    df = variance * variance / denominator if denominator > 0 else 1e9
    half = t975(df) * math.sqrt(variance)
    return Interval(value, value - half, value + half)


def ratio(numerator: Sequence[float], denominator: Sequence[float]) -> Interval:
    """The interval of mean(numerator) / mean(denominator), on the log scale of the windows (all > 0)."""
    if min((*numerator, *denominator), default=0) <= 0:
        raise ValueError("a ratio's windows must all be positive")
    logs = linear([(1.0, [math.log(v) for v in numerator]), (-1.0, [math.log(v) for v in denominator])])
    return Interval(math.exp(logs.value), math.exp(logs.low), math.exp(logs.high))
