"""The search against a fake measurer: pruning, the budget, the Pareto front, the choice."""

from __future__ import annotations

import pytest

from ge_plugin.tune.records import MEASURED, REFUSED, Candidate, Constraints, TunePoint
from ge_plugin.tune.search import Budget, choose, closest, pareto_front, search
from ge_plugin.tune.space import Config, Space

START = Config(1, 1, 0, "largest", (1, 2, 4, 8), (), ())
LADDERS = {
    "instances": (1, 2, 3, 4),
    "streams": (1, 2, 3),
    "max_queue_delay_us": (0, 500, 1000, 2000),
    "preferred_batch_sizes": ("largest",),
    "batch_gears": ((1, 2), (1, 2, 4, 8), (1, 2, 4, 8, 16)),
    "dims_gears": ((),),
    "image_sizes": ((),),
}
SPACE = Space(LADDERS, START)


class FakeMeasurer:
    """Throughput peaks at 3 instances and 1 stream, grows with the queue delay up to 1000 µs; p99 grows
    with the delay. Records what it was asked to measure."""

    def __init__(self, refuse=lambda config: "") -> None:
        self.asked: list[Config] = []
        self.refuse = refuse

    def __call__(self, config: Config, number: int, why: str) -> Candidate:
        self.asked.append(config)
        reason = self.refuse(config)
        if reason:
            return Candidate(number, config, why, REFUSED, reason)
        thr = 100.0 * {1: 1.0, 2: 1.6, 3: 1.9, 4: 1.7}[config.instances] / config.streams
        thr *= 1 + min(config.max_queue_delay_us, 1000) / 2000
        p99 = 10.0 + config.max_queue_delay_us / 100
        points = (TunePoint(1, thr / 2, p99 / 2, p99 / 2), TunePoint(8, thr, p99 * 0.6, p99))
        return Candidate(number, config, why, MEASURED, points=points)


def test_coordinate_descent_walks_each_knob_until_it_gets_worse_and_measures_each_config_once():
    fake = FakeMeasurer()
    result = search(SPACE, fake, Constraints(latency_p99_ms=25.0), Budget(3600))
    best = result.best
    assert best is not None
    assert (best.config.instances, best.config.streams, best.config.max_queue_delay_us) == (3, 1, 1000)
    # pruned: instances 4 was tried once (worse) and never again; the full product is 4*3*4*3 = 144
    assert len(fake.asked) == len(set(fake.asked)) < 20
    assert fake.asked[0] == START
    assert [c.config.instances for c in result.candidates[:4]] == [1, 2, 3, 4]
    # the delay stops at the first step that is no better: 2000 µs was measured, 4000 does not exist anyway
    assert {c.config.max_queue_delay_us for c in result.candidates} <= {0, 500, 1000, 2000}
    assert result.ended == "converged"
    assert result.candidates[1].origin == "instances 1 -> 2 from #1"


def test_a_direction_that_does_not_improve_first_is_walked_the_other_way():
    start = Config(3, 3, 0, "largest", (1, 2, 4, 8), (), ())
    fake = FakeMeasurer()
    result = search(Space(LADDERS, start), fake, Constraints(25.0), Budget(3600))
    assert result.best is not None and result.best.config.streams == 1
    tried = [c.config.streams for c in result.candidates]
    assert tried[:3] == [3, 3, 3] or 2 in tried  # streams 3 had no way up: down to 2, then 1


def test_refused_configurations_stop_the_direction_and_are_kept_with_their_reason():
    fake = FakeMeasurer(refuse=lambda c: "3 instances x 2 streams" if c.instances >= 3 else "")
    result = search(SPACE, fake, Constraints(25.0), Budget(3600))
    refused = [c for c in result.candidates if c.status == REFUSED]
    assert refused and refused[0].reason == "3 instances x 2 streams"
    assert result.best is not None and result.best.config.instances == 2
    assert not any(c.config.instances == 4 for c in result.candidates)


class SlowMeasurer(FakeMeasurer):
    """Each candidate takes 10 s of a fake clock."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def __call__(self, config: Config, number: int, why: str) -> Candidate:
        self.now += 10.0
        return super().__call__(config, number, why)


def test_the_budget_stops_the_search_before_a_candidate_that_would_not_fit():
    slow = SlowMeasurer()
    result = search(SPACE, slow, Constraints(25.0), Budget(45.0, clock=slow.clock))
    assert result.ended == "budget"
    assert len(result.candidates) == 4  # a fifth would end at 50 s
    assert result.elapsed_s == 40.0


def test_the_budget_keeps_room_for_the_confirming_run():
    slow = SlowMeasurer()
    result = search(SPACE, slow, Constraints(25.0), Budget(45.0, reserve=1, clock=slow.clock))
    assert len(result.candidates) == 3  # and 10 s left for one more (the confirming run)
    assert result.elapsed_s == 30.0


def test_without_a_feasible_point_the_search_heads_for_lower_p99():
    fake = FakeMeasurer()
    start = Config(1, 1, 2000, "largest", (1, 2, 4, 8), (), ())
    result = search(Space(LADDERS, start), fake, Constraints(latency_p99_ms=5.0), Budget(3600))
    # nothing reaches 5 ms at c=8 (p99 >= 10), but c=1 at delay 0 does (p99 5.0): the delay walked down to 0
    assert result.best is not None and result.best.config.max_queue_delay_us == 0


def _cand(number, *points):
    return Candidate(
        number, START, "x", MEASURED, points=tuple(TunePoint(c, t, p / 2, p) for c, t, p in points)
    )


def test_pareto_front_keeps_only_points_nothing_beats_on_both_axes():
    a = _cand(1, (1, 100, 5), (8, 400, 20))
    b = _cand(2, (1, 90, 6), (8, 500, 30))  # c=1 is dominated by a's c=1
    c = _cand(3, (1, 100, 5), (8, 300, 25))  # the same figures as a's c=1: listed once, as a's
    front = pareto_front([a, b, c])
    assert [(cand.id, cand.points[i].concurrency) for cand, i in front] == [(1, 1), (1, 8), (2, 8)]


def test_a_change_within_the_noise_is_not_advised():
    start = _cand(1, (1, 100, 5))
    same = Candidate(2, START.with_("streams", 2), "x", MEASURED, points=(TunePoint(1, 102, 2.5, 5),))
    better = Candidate(3, START.with_("instances", 2), "x", MEASURED, points=(TunePoint(1, 110, 2.5, 5),))
    choice = choose([start, same], Constraints(latency_p99_ms=10))
    assert choice is not None and choice.candidate.id == 1  # 2 % more is perf_analyzer's noise
    choice = choose([start, same, better], Constraints(latency_p99_ms=10))
    assert choice is not None and choice.candidate.id == 3
    # at the same throughput (within the noise) and as many changes, the shorter tail wins
    shorter = Candidate(
        4, START.with_("max_queue_delay_us", 500), "x", MEASURED, points=(TunePoint(1, 107, 2, 3),)
    )
    choice = choose([start, same, better, shorter], Constraints(latency_p99_ms=10))
    assert choice is not None and choice.candidate.id == 4


def test_choice_is_the_most_throughput_within_the_constraints():
    a = _cand(1, (1, 100, 5), (8, 400, 20))
    b = _cand(2, (1, 90, 6), (8, 500, 30))
    choice = choose([a, b], Constraints(latency_p99_ms=25))
    assert choice is not None and (choice.candidate.id, choice.point.concurrency) == (1, 8)
    assert choose([a, b], Constraints(latency_p99_ms=25, min_throughput=450)) is None
    assert choose([a, b], Constraints(latency_p99_ms=4)) is None
    near = closest([a, b])
    assert near is not None and near.point.p99_ms == 5


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_options_refuse_a_non_positive_latency(bad, tmp_path):
    from ge_plugin.errors import TuneError
    from ge_plugin.tune.run import TuneOptions

    with pytest.raises(TuneError, match="the p99 latency budget must be > 0 ms"):
        TuneOptions(spec=tmp_path / "x.yaml", constraints=Constraints(bad))
