"""The targets: values from the rows, verdicts from the thresholds, no verdict without data."""

from __future__ import annotations

import pytest

from benchmarks.proof.ratios import evaluate
from benchmarks.proof.result import Target
from ge_plugin.measure.records import Allocations, DirectRow, Measurement


def _by_id(targets: list[Target]) -> dict[str, Target]:
    return {t.id: t for t in targets}


@pytest.fixture
def m(perf_row, windows):
    """A point with 4 windows 0.02 % apart around its figures (a tight interval), or ``spread`` apart."""

    def make(
        model: str, c: int, throughput: float, p50_us: float, batch: int = 1, spread: float = 0.0002
    ) -> Measurement:
        return Measurement(
            model=model,
            row=perf_row(c, throughput, p50_us),
            stable=True,
            batch=batch,
            windows=windows(throughput, p50_us, spread),
        )

    return make


@pytest.fixture
def full_run(m, windows):
    triton = [
        m("ge_identity", 1, 1800, 550),
        m("py_identity", 1, 2400, 500),
        m("ge_identity", 8, 2700, 900),
        m("py_identity", 8, 3000, 800),
        m("ge_llama", 1, 600, 1610),
        m("py_logits", 1, 700, 1400),
        m("replica_ge_llama", 1, 12.5, 81_000),
        m("replica_py_logits", 1, 12.6, 79_400),
        m("replica_ge_llama", 1, 27.0, 150_400, batch=4),
        m("replica_py_logits", 1, 27.1, 150_000, batch=4),
        m("replica_ge_llama", 1, 35.0, 230_200, batch=8),
        m("replica_py_logits", 1, 35.2, 229_000, batch=8),
        m("replica_ge_llama", 16, 33.0, 400_000),
        m("replica_ge_llama", 24, 37.0, 600_000),
        m("replica_naive_llama", 16, 12.0, 1_300_000),
    ]
    direct = [
        DirectRow("replica_ge_llama", 1, 20, 12.6, 79.5, 80.0, 79.4, windows=windows(12.6, 79_500, 0.0002)),
        DirectRow(
            "replica_ge_llama", 4, 20, 27.5, 145.4, 146.0, 145.3, windows=windows(27.5, 145_400, 0.001)
        ),
        DirectRow(
            "replica_ge_llama", 8, 20, 36.2, 221.0, 222.0, 220.9, windows=windows(36.2, 221_000, 0.0002)
        ),
    ]
    allocations = [
        Allocations("replica_ge_llama", "served", 1, 900, 10, 10),
        Allocations("ge_identity", "direct", 1, 50, 5, 5),
    ]
    return triton, direct, allocations


def test_evaluate_computes_every_target_from_the_rows_with_its_interval(full_run):
    t = _by_id(evaluate(*full_run))
    assert list(t) == ["P3a", "P3b", "P4a", "P4b", "P4c", "P5", "P6", "P7"]
    # a value right at its threshold is within the noise of its windows, not a coin flip
    assert t["P3a"].value == pytest.approx(1.1, rel=1e-4) and t["P3a"].verdict() == "within noise"
    assert t["P3a"].low < 1.1 < t["P3a"].high
    assert t["P3b"].value == pytest.approx(0.9, rel=1e-4) and t["P3b"].verdict() == "within noise"
    # batch 1: 81.0 - 79.5 = 1.5 ms added; the paced floor adds 79.4 - 78 = 1.4 ms to its wait
    assert t["P4a"].value == pytest.approx(0.1, abs=1e-6) and t["P4a"].verdict() == "met"
    assert t["P4a"].low < 0.1 < t["P4a"].high < 0.3
    assert t["P4a"].detail.startswith(
        "batch 1: +0.10 ms ("
    ) and "added +1.50 ms, the paced floor +1.40 ms" in (t["P4a"].detail)
    assert t["P4b"].value == pytest.approx(37.0 / 36.2, rel=1e-4) and t["P4b"].verdict() == "met"
    assert "c=24" in t["P4b"].detail and "batch 8" in t["P4b"].detail
    # batch 4: 5.0 - 5.0 = 0; batch 8: 9.2 - 9.0 = +0.2, the worse, its interval the one shown
    assert t["P4c"].value == pytest.approx(0.2, abs=1e-6) and t["P4c"].verdict() == "met"
    assert t["P4c"].low < 0.2 < t["P4c"].high < 0.5
    assert t["P5"].value == pytest.approx(33.0 / 12.0, rel=1e-4) and t["P5"].verdict() == "met"
    assert t["P6"].value == 0 and t["P6"].passed is True and t["P6"].low is None
    assert t["P7"].value == pytest.approx(1.15, rel=1e-4) and t["P7"].verdict() == "within noise"


def test_evaluate_reports_misses_with_their_values(m, full_run):
    triton, direct, allocations = full_run
    triton = [x for x in triton if (x.model, x.batch) != ("replica_ge_llama", 8)]
    triton += [m("ge_identity", 1, 1000, 1000), m("replica_ge_llama", 1, 30, 232_000, batch=8)]
    triton = [x for x in triton if not (x.model == "ge_identity" and x.row.p50_us == 550)]
    allocations = [Allocations("replica_ge_llama_2x1", "served", 1, 100, 10, 12)]
    t = _by_id(evaluate(triton, direct, allocations))
    assert t["P3a"].value == pytest.approx(2.0, rel=1e-4) and t["P3a"].passed is False
    assert t["P3a"].verdict() == "missed" and t["P3a"].show_value() == "2.00×"
    # batch 8: 232.0 - 221.0 = 11.0 ms added, the paced floor 9.0: +2.0 ms, wholly over 0.5
    assert t["P4c"].value == pytest.approx(2.0, abs=1e-6) and t["P4c"].verdict() == "missed"
    assert t["P6"].value == pytest.approx(0.02) and t["P6"].passed is False


def test_a_target_whose_windows_straddle_its_threshold_is_within_noise(m, full_run):
    triton, direct, allocations = full_run
    # P5 at 2.75 but the windows of both points 30 % apart: the interval reaches under 2.5
    triton = [x for x in triton if x.row.concurrency != 16]
    triton += [
        m("replica_ge_llama", 16, 33.0, 400_000, spread=0.3),
        m("replica_naive_llama", 16, 12.0, 1e6, spread=0.3),
    ]
    t = _by_id(evaluate(triton, direct, allocations))
    assert t["P5"].passed is True and t["P5"].verdict() == "within noise"
    assert t["P5"].low < 2.5 < t["P5"].high
    assert "4 and 4 windows" in t["P5"].detail


def test_evaluate_gives_no_verdict_for_what_was_not_measured(m):
    t = _by_id(evaluate([m("ge_identity", 1, 1, 1), m("py_identity", 1, 1, 1)], [], []))
    for key in ("P3b", "P4a", "P4b", "P4c", "P5", "P6", "P7"):
        assert t[key].value is None and t[key].passed is None and t[key].verdict() == "n/a"
        assert t[key].detail.startswith("not measured in this run")
    assert "ge_identity c=8" in t["P3b"].detail
    assert "replica_py_logits batch 4" in t["P4c"].detail


def test_p6_ignores_the_naive_baseline_and_counts_every_ge_source():
    allocations = [
        Allocations("replica_naive_llama", "served", 2, 1000, 0, 4000),
        Allocations("replica_ge_llama", "direct", 1, 500, 5, 5),
        Allocations("replica_ge_llama_2x1", "served", 1, 300, 10, 10),
        Allocations("ge_identity", "served", 1, 0, 5, 5),  # no request: nothing to divide by
    ]
    (p6,) = [t for t in evaluate([], [], allocations) if t.id == "P6"]
    assert p6.value == 0 and p6.passed is True
    assert p6.detail == (
        "replica_ge_llama direct: 5 = 1 x 5 at start, 500 requests; "
        "replica_ge_llama_2x1 served: 10 = 1 x 10 at start, 300 requests"
    )


def test_target_shows_ms_and_thresholds():
    target = Target("P4a", "w", "<=", 0.3, "ms", 3.127, "d")
    assert target.show_value() == "+3.13 ms" and target.show_target() == "<= 0.3 ms"
    assert Target("P5", "w", ">=", 2.5, "x", 1.0, "d").show_target() == ">= 2.5×"


def test_target_shows_its_interval():
    target = Target("P4a", "w", "<=", 0.3, "ms", 0.1, "d", low=-0.2, high=0.4, judged="within noise")
    assert target.show_interval() == "-0.20 ms to +0.40 ms" and target.verdict() == "within noise"
    assert Target("P5", "w", ">=", 2.5, "x", 2.7, "d", low=2.6, high=2.8).show_interval() == "2.60× to 2.80×"
    assert Target("P6", "w", "==", 0, "allocations/request", 0, "d").show_interval() == "–"
