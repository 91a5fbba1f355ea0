"""The targets' 95 % intervals: medians of window figures, a percentile bootstrap over the windows, and
the verdict the interval gives (met, missed, within noise)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ge_plugin.measure import intervals


def test_linear_is_a_combination_of_the_groups_medians():
    got = intervals.linear([(1.0, [10.0, 12.0, 11.0, 40.0]), (-1.0, [9.0, 9.5, 10.0])], constant=0.5)
    assert got.value == pytest.approx(11.5 - 9.5 + 0.5)  # the stalled window (40) moves no median
    assert got.low <= got.value <= got.high


def test_an_outlying_window_widens_the_interval_but_does_not_carry_the_value():
    calm = intervals.linear([(1.0, [5.0, 5.1, 4.9, 5.0, 5.05])])
    stalled = intervals.linear([(1.0, [5.0, 5.1, 4.9, 5.0, 20.0])])
    assert stalled.value == calm.value == pytest.approx(5.0)
    assert stalled.high > calm.high


def test_an_interval_covers_the_true_difference_of_medians_most_of_the_time():
    rng = np.random.default_rng(3)
    covered = 0
    for _ in range(400):
        a, b = rng.normal(5.0, 1.0, 8), rng.normal(4.0, 1.0, 8)
        got = intervals.linear([(1.0, list(a)), (-1.0, list(b))])
        covered += got.low <= 1.0 <= got.high
    assert covered / 400 >= 0.85  # a percentile bootstrap of 8 windows is a little short of 95 %


def test_ratio_is_of_the_medians():
    got = intervals.ratio([2.0, 2.2, 1.8, 9.0], [1.0, 1.1, 0.9])
    assert got.value == pytest.approx(2.1 / 1.0) and got.low < 2.1 < got.high
    with pytest.raises(ValueError, match="positive"):
        intervals.ratio([1.0, 0.0], [1.0])


def test_intervals_are_the_same_from_the_same_windows():
    windows = [[3.0, 3.2, 2.9, 3.5], [1.0, 1.4, 1.2]]
    assert intervals.ratio(*windows) == intervals.ratio(*windows)


def test_one_window_has_no_spread_to_resample_so_its_interval_is_unbounded():
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
