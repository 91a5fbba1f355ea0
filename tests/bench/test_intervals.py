"""The targets' 95 % intervals: Welch's t-interval of a difference of window means, ratios on the log
scale, and the verdict the interval gives (met, missed, within noise)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ge_plugin.bench import intervals


def test_t_quantiles_are_students_and_tend_to_the_normals():
    assert intervals.t975(1) == pytest.approx(12.706)
    assert intervals.t975(4) == pytest.approx(2.776)
    assert intervals.t975(11) == pytest.approx((2.228 + 2.179) / 2)  # between the table's 10 and 12
    assert intervals.t975(1e9) == pytest.approx(1.96, abs=1e-6)


def test_linear_is_welchs_interval_of_a_difference_of_means():
    a, b = [10.0, 12.0, 11.0, 13.0], [9.0, 9.5, 10.0]
    got = intervals.linear([(1.0, a), (-1.0, b)], constant=0.5)
    se2 = np.var(a, ddof=1) / 4 + np.var(b, ddof=1) / 3
    df = se2**2 / ((np.var(a, ddof=1) / 4) ** 2 / 3 + (np.var(b, ddof=1) / 3) ** 2 / 2)
    assert got.value == pytest.approx(11.5 - 9.5 + 0.5)
    assert got.high - got.value == pytest.approx(intervals.t975(df) * math.sqrt(se2))
    assert got.value - got.low == pytest.approx(got.high - got.value)


def test_an_interval_covers_the_true_difference_about_95_times_in_100():
    rng = np.random.default_rng(3)
    covered = 0
    for _ in range(2000):
        a, b = rng.normal(5.0, 1.0, 6), rng.normal(4.0, 2.0, 5)
        got = intervals.linear([(1.0, list(a)), (-1.0, list(b))])
        covered += got.low <= 1.0 <= got.high
    assert 0.93 <= covered / 2000 <= 0.97


def test_ratio_is_taken_on_the_log_scale():
    got = intervals.ratio([2.0, 2.2, 1.8], [1.0, 1.1, 0.9])
    assert got.value == pytest.approx(2.0, rel=0.01) and got.low < 2.0 < got.high
    assert got.value / got.low == pytest.approx(got.high / got.value)  # symmetric in logs
    with pytest.raises(ValueError, match="positive"):
        intervals.ratio([1.0, 0.0], [1.0])


def test_one_window_has_no_spread_to_tell_so_its_interval_is_unbounded():
    got = intervals.linear([(1.0, [3.0]), (-1.0, [1.0, 1.2])])
    assert got.value == pytest.approx(1.9) and (got.low, got.high) == (-math.inf, math.inf)
    assert got.verdict("<=", 0.3) == "within noise"


@pytest.mark.parametrize(
    ("low", "high", "op", "verdict"),
    [
        (0.1, 0.2, "<=", "met"),
        (0.4, 0.5, "<=", "missed"),
        (0.2, 0.4, "<=", "within noise"),
        (2.6, 2.8, ">=", "met"),
        (2.0, 2.4, ">=", "missed"),
        (2.4, 2.6, ">=", "within noise"),
    ],
)
def test_verdict_comes_from_the_whole_interval(low, high, op, verdict):
    threshold = 0.3 if op == "<=" else 2.5
    assert intervals.Interval((low + high) / 2, low, high).verdict(op, threshold) == verdict
