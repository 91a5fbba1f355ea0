"""Targets P3–P6: values from the rows, verdicts from the thresholds, no verdict without data."""

from __future__ import annotations

import pytest

from ge_plugin.bench.direct import Allocations, DirectRow
from ge_plugin.bench.perf import Measurement
from ge_plugin.bench.ratios import Target, evaluate


def _by_id(targets: list[Target]) -> dict[str, Target]:
    return {t.id: t for t in targets}


@pytest.fixture
def m(perf_row):
    def make(model: str, c: int, throughput: float, p50_us: float) -> Measurement:
        return Measurement(model=model, row=perf_row(c, throughput, p50_us), stable=True)

    return make


def test_evaluate_computes_every_target_from_the_rows(m):
    triton = [
        m("ge_identity", 1, 1800, 550),
        m("py_identity", 1, 2400, 500),
        m("ge_identity", 8, 2700, 900),
        m("py_identity", 8, 3000, 800),
        m("ge_llama", 1, 170, 1700),
        m("ge_llama", 16, 800, 9000),
        m("naive_llama", 16, 200, 40000),
    ]
    direct = [DirectRow("ge_llama", 1, 100, 700.0, 1.4, 3.0), DirectRow("ge_llama", 8, 20, 760.0, 10.5, 12.0)]
    allocations = [
        Allocations("ge_llama", "served", 2, 900, 5, 10),
        Allocations("ge_identity", "direct", 1, 50, 5, 5),
    ]
    t = _by_id(evaluate(triton, direct, allocations))
    assert t["P3a"].value == pytest.approx(1.1) and t["P3a"].passed is True  # 1.1 <= 1.10, rounding kept
    assert t["P3b"].value == pytest.approx(0.9) and t["P3b"].passed is True
    assert t["P4a"].value == pytest.approx(0.3) and t["P4a"].passed is True
    assert t["P4a"].detail == "1.700 ms - 1.400 ms"
    assert t["P4b"].value == pytest.approx(800 / 760) and t["P4b"].passed is True
    assert "c=16" in t["P4b"].detail and "batch 8" in t["P4b"].detail
    assert t["P5"].value == pytest.approx(4.0) and t["P5"].passed is True
    assert t["P6"].value == 0 and t["P6"].passed is True


def test_evaluate_reports_misses_with_their_values(m):
    triton = [m("ge_identity", 1, 1000, 800), m("py_identity", 1, 2400, 400)]
    allocations = [Allocations("ge_llama", "served", 2, 100, 5, 12)]
    t = _by_id(evaluate(triton, [], allocations))
    assert t["P3a"].value == pytest.approx(2.0) and t["P3a"].passed is False
    assert t["P3a"].verdict() == "missed" and t["P3a"].show_value() == "2.00×"
    assert t["P6"].value == pytest.approx(0.02) and t["P6"].passed is False


def test_evaluate_gives_no_verdict_for_what_was_not_measured(m):
    t = _by_id(evaluate([m("ge_identity", 1, 1, 1), m("py_identity", 1, 1, 1)], [], []))
    for key in ("P3b", "P4a", "P4b", "P5", "P6"):
        assert t[key].value is None and t[key].passed is None and t[key].verdict() == "n/a"
        assert t[key].detail.startswith("not measured in this run")
    assert "ge_identity c=8" in t["P3b"].detail


def test_p6_ignores_the_naive_baseline_and_counts_every_ge_source():
    allocations = [
        Allocations("naive_llama", "served", 2, 1000, 0, 4000),
        Allocations("ge_llama", "direct", 1, 500, 5, 5),
        Allocations("ge_identity", "served", 1, 0, 5, 5),  # no request: nothing to divide by
    ]
    (p6,) = [t for t in evaluate([], [], allocations) if t.id == "P6"]
    assert p6.value == 0 and p6.passed is True
    assert p6.detail == "ge_llama direct: 5 = 1 x 5 at start, 500 requests"


def test_target_shows_ms_and_thresholds():
    target = Target("P4a", "w", "<=", 0.5, "ms", 3.127, "d")
    assert target.show_value() == "+3.13 ms" and target.show_target() == "<= 0.5 ms"
    assert Target("P5", "w", ">=", 2.0, "x", 1.0, "d").show_target() == ">= 2×"


def test_p3_has_no_verdict_when_the_ge_identity_waits_for_a_simulated_device(m):
    triton = [m("ge_identity", 1, 150, 6200), m("py_identity", 1, 2500, 380)]
    t = _by_id(evaluate(triton, [], [], device_latency_ms=5))
    assert t["P3a"].value is None and t["P3a"].verdict() == "n/a"
    assert "5 ms of simulated device time" in t["P3a"].detail and "floor has no device" in t["P3b"].detail
