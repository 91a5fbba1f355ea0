"""The targets: values from the rows, verdicts from the thresholds, no verdict without data."""

from __future__ import annotations

import pytest

from ge_plugin.bench.ratios import evaluate
from ge_plugin.bench.records import Allocations, DirectRow, Measurement, Target


def _by_id(targets: list[Target]) -> dict[str, Target]:
    return {t.id: t for t in targets}


@pytest.fixture
def m(perf_row):
    def make(model: str, c: int, throughput: float, p50_us: float, batch: int = 1) -> Measurement:
        return Measurement(model=model, row=perf_row(c, throughput, p50_us), stable=True, batch=batch)

    return make


@pytest.fixture
def full_run(m):
    triton = [
        m("ge_identity", 1, 1800, 550),
        m("py_identity", 1, 2400, 500),
        m("ge_identity", 8, 2700, 900),
        m("py_identity", 8, 3000, 800),
        m("ge_llama", 1, 600, 1610),
        m("py_logits", 1, 700, 1400),
        m("py_logits", 1, 200, 5000, batch=4),
        m("py_logits", 1, 100, 9000, batch=8),
        m("replica_ge_llama", 1, 12.5, 81_000),
        m("replica_ge_llama", 1, 27.0, 150_400, batch=4),
        m("replica_ge_llama", 1, 35.0, 230_200, batch=8),
        m("replica_ge_llama", 16, 33.0, 400_000),
        m("replica_ge_llama", 24, 36.4, 600_000),
        m("replica_naive_llama", 16, 12.0, 1_300_000),
    ]
    direct = [
        DirectRow("replica_ge_llama", 1, 20, 12.6, 79.5, 80.0, 79.4),
        DirectRow("replica_ge_llama", 4, 20, 27.5, 145.4, 146.0, 145.3),
        DirectRow("replica_ge_llama", 8, 20, 36.2, 221.0, 222.0, 220.9),
    ]
    allocations = [
        Allocations("replica_ge_llama", "served", 2, 900, 5, 10),
        Allocations("ge_identity", "direct", 1, 50, 5, 5),
    ]
    return triton, direct, allocations


def test_evaluate_computes_every_target_from_the_rows(full_run):
    t = _by_id(evaluate(*full_run))
    assert list(t) == ["P3a", "P3b", "P4a", "P4b", "P4c", "P5", "P6", "P7"]
    assert t["P3a"].value == pytest.approx(1.1) and t["P3a"].passed is True  # 1.1 <= 1.10, rounding kept
    assert t["P3b"].value == pytest.approx(0.9) and t["P3b"].passed is True
    # batch 1: 81.0 - 79.5 = 1.5 ms added, 0.1 ms over the 1.4 ms floor
    assert t["P4a"].value == pytest.approx(0.1) and t["P4a"].passed is True
    assert t["P4a"].detail == "batch 1: added +1.50 ms, floor 1.40 ms"
    assert t["P4b"].value == pytest.approx(36.4 / 36.2) and t["P4b"].passed is True
    assert "c=24" in t["P4b"].detail and "batch 8" in t["P4b"].detail
    # batch 4: 5.0 - 5.0 = 0; batch 8: 9.2 - 9.0 = +0.2, the worse
    assert t["P4c"].value == pytest.approx(0.2) and t["P4c"].passed is True
    assert t["P5"].value == pytest.approx(33.0 / 12.0) and t["P5"].passed is True
    assert t["P6"].value == 0 and t["P6"].passed is True
    assert t["P7"].value == pytest.approx(1.15) and t["P7"].passed is True


def test_evaluate_reports_misses_with_their_values(m, full_run):
    triton, direct, allocations = full_run
    triton = [x for x in triton if (x.model, x.batch) != ("replica_ge_llama", 8)]
    triton += [m("ge_identity", 1, 1000, 1000), m("replica_ge_llama", 1, 30, 232_000, batch=8)]
    triton = [x for x in triton if not (x.model == "ge_identity" and x.row.p50_us == 550)]
    allocations = [Allocations("replica_ge_llama_1x2", "served", 1, 100, 10, 12)]
    t = _by_id(evaluate(triton, direct, allocations))
    assert t["P3a"].value == pytest.approx(2.0) and t["P3a"].passed is False
    assert t["P3a"].verdict() == "missed" and t["P3a"].show_value() == "2.00×"
    assert t["P4c"].value == pytest.approx(2.0) and t["P4c"].passed is False  # 11.0 added - 9.0 floor
    assert t["P6"].value == pytest.approx(0.02) and t["P6"].passed is False


def test_evaluate_gives_no_verdict_for_what_was_not_measured(m):
    t = _by_id(evaluate([m("ge_identity", 1, 1, 1), m("py_identity", 1, 1, 1)], [], []))
    for key in ("P3b", "P4a", "P4b", "P4c", "P5", "P6", "P7"):
        assert t[key].value is None and t[key].passed is None and t[key].verdict() == "n/a"
        assert t[key].detail.startswith("not measured in this run")
    assert "ge_identity c=8" in t["P3b"].detail
    assert "py_logits batch 4" in t["P4c"].detail


def test_p6_ignores_the_naive_baseline_and_counts_every_ge_source():
    allocations = [
        Allocations("replica_naive_llama", "served", 2, 1000, 0, 4000),
        Allocations("replica_ge_llama", "direct", 1, 500, 5, 5),
        Allocations("replica_ge_llama_1x2", "served", 1, 300, 10, 10),
        Allocations("ge_identity", "served", 1, 0, 5, 5),  # no request: nothing to divide by
    ]
    (p6,) = [t for t in evaluate([], [], allocations) if t.id == "P6"]
    assert p6.value == 0 and p6.passed is True
    assert p6.detail == (
        "replica_ge_llama direct: 5 = 1 x 5 at start, 500 requests; "
        "replica_ge_llama_1x2 served: 10 = 1 x 10 at start, 300 requests"
    )


def test_target_shows_ms_and_thresholds():
    target = Target("P4a", "w", "<=", 0.3, "ms", 3.127, "d")
    assert target.show_value() == "+3.13 ms" and target.show_target() == "<= 0.3 ms"
    assert Target("P5", "w", ">=", 2.5, "x", 1.0, "d").show_target() == ">= 2.5×"
