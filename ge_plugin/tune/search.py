"""The search: coordinate descent from the best configuration so far, each direction walked until it gets worse.

The full product of the knobs' ladders is thousands of configurations, each a compile, a load and one
perf_analyzer run per concurrency. Knobs interact less than they add up, so the search walks one knob at a
time from the best configuration found: one rung up; while that improves, further up; if the first step up
did not improve, one rung down, and so on down. A direction stops at the first step that is no better (by
more than the noise tolerance), that the spec's rules refuse, or at the ladder's end. A pass walks every
knob; passes repeat while one of them moved the best. Every configuration is measured at most once.

"Better" is judged against the constraints: a configuration with a point meeting them beats one without;
among those that meet them, more throughput (at a point that meets them) wins; among those that do not,
a lower p99 wins, so the search heads towards the constraint before it heads towards throughput.

The time budget is checked before each candidate against the longest candidate so far: a sweep stops rather
than start something it cannot finish, and says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Optional

import attrs

from ge_plugin.tune.records import Candidate, Choice, Constraints
from ge_plugin.tune.space import KNOBS, Config, Space, show

#: a step must gain more than this fraction (throughput, or p99 while nothing meets the constraint) to
#: count as better: perf_analyzer's windows move by a few percent between runs of the same configuration
TOLERANCE = 0.05

#: measures one configuration: (config, id, why it is tried) -> the candidate, measured or not
Evaluate = Callable[[Config, int, str], Candidate]


@attrs.define
class Budget:
    """A deadline in seconds of ``clock`` time from the start; ``reserve`` candidates' worth of time is kept
    for after the search (the confirming run)."""

    seconds: float
    reserve: int = 0
    clock: Callable[[], float] = time.monotonic
    started: float = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.started = self.clock()

    def elapsed(self) -> float:
        return self.clock() - self.started

    def allows(self, estimate: float) -> bool:
        return self.elapsed() + estimate * (1 + self.reserve) <= self.seconds


@attrs.frozen
class Score:
    """How good a candidate is under the constraints; ``None`` for one with no measured point."""

    feasible: bool
    throughput: float  #: the most throughput at a point meeting the constraints (else the most at all)
    p99_ms: float  #: the p99 of that point (else the lowest p99 of any point)

    def better_than(self, other: Optional[Score], tolerance: float = TOLERANCE) -> bool:
        if other is None:
            return True
        if self.feasible != other.feasible:
            return self.feasible
        if self.feasible:
            return self.throughput > other.throughput * (1 + tolerance)
        return self.p99_ms < other.p99_ms * (1 - tolerance)


def score(candidate: Candidate, constraints: Constraints) -> Optional[Score]:
    if not candidate.measured:
        return None
    ok = [p for p in candidate.points if constraints.met(p)]
    if ok:
        best = max(ok, key=lambda p: (p.throughput, -p.p99_ms))
        return Score(True, best.throughput, best.p99_ms)
    return Score(False, max(p.throughput for p in candidate.points), min(p.p99_ms for p in candidate.points))


@attrs.frozen
class SearchResult:
    candidates: tuple[Candidate, ...]
    best: Optional[Candidate]  #: the search's best by score (None: nothing was measured)
    passes: int
    #: why the search ended: "converged" (a pass moved nothing), "budget" or "exhausted" (nothing left)
    ended: str
    elapsed_s: float


def search(
    space: Space,
    evaluate: Evaluate,
    constraints: Constraints,
    budget: Budget,
    *,
    tolerance: float = TOLERANCE,
    max_passes: int = 4,
    say: Callable[[str], None] = lambda _: None,
) -> SearchResult:
    seen: dict[Config, Candidate] = {}
    order: list[Candidate] = []
    longest = 0.0

    def run(config: Config, why: str) -> Candidate | None:
        """The candidate for ``config`` (measured now, or before); None when the budget does not allow it."""
        nonlocal longest
        if config in seen:
            return seen[config]
        if order and not budget.allows(longest):
            return None
        started = budget.clock()
        candidate = evaluate(config, len(order) + 1, why)
        longest = max(longest, budget.clock() - started)
        seen[config] = candidate
        order.append(candidate)
        say(_line(candidate, constraints))
        return candidate

    first = run(space.start, "the input spec")
    assert first is not None
    best, best_score = first, score(first, constraints)
    ended = "exhausted"
    passes = 0
    out_of_time = False
    while passes < max_passes and not out_of_time:
        passes += 1
        moved = False
        for knob in space.varying:
            for direction in (+1, -1):
                steps = 0
                while True:
                    nxt = space.step(best.config, knob, direction)
                    if nxt is None:
                        break
                    why = f"{knob} {show(best.config.get(knob))} -> {show(nxt.get(knob))} from #{best.id}"
                    candidate = run(nxt, why)
                    if candidate is None:
                        out_of_time = True
                        break
                    s = score(candidate, constraints)
                    if s is None or not s.better_than(best_score, tolerance):
                        break
                    best, best_score = candidate, s
                    steps += 1
                    moved = True
                if steps or out_of_time:
                    break  # moved up (or out of time): the way down from here is where we came from
            if out_of_time:
                break
        if not moved:
            ended = "converged"
            break
    if out_of_time:
        ended = "budget"
    return SearchResult(
        tuple(order), best if best_score is not None else None, passes, ended, budget.elapsed()
    )


def _line(candidate: Candidate, constraints: Constraints) -> str:
    head = f"#{candidate.id} {candidate.config.describe()}"
    if not candidate.measured:
        return f"{head}: {candidate.status}: {candidate.reason}"
    points = ", ".join(
        f"c={p.concurrency} {p.throughput:.1f}/s p99 {p.p99_ms:.2f} ms{'' if constraints.met(p) else ' (x)'}"
        for p in candidate.points
    )
    return f"{head}: {points}"


def pareto_front(candidates: Sequence[Candidate]) -> list[tuple[Candidate, int]]:
    """(candidate, point index) of every measured point no other point beats on both p99 and throughput,
    by ascending p99."""
    points = [(c, i, p) for c in candidates if c.measured for i, p in enumerate(c.points)]
    front = []
    for c, i, p in points:
        dominated = any(
            q.p99_ms <= p.p99_ms
            and q.throughput >= p.throughput
            and (q.p99_ms, q.throughput) != (p.p99_ms, p.throughput)
            for _, _, q in points
        )
        if not dominated:
            front.append((c, i, p))
    front.sort(key=lambda item: (item[2].p99_ms, -item[2].throughput))
    unique: list[tuple[Candidate, int]] = []
    kept: set[tuple[float, float]] = set()
    for c, i, p in front:
        if (p.p99_ms, p.throughput) not in kept:  # the same figures twice: the first candidate measured
            kept.add((p.p99_ms, p.throughput))
            unique.append((c, i))
    return unique


def choose(
    candidates: Sequence[Candidate], constraints: Constraints, *, tolerance: float = TOLERANCE
) -> Optional[Choice]:
    """The point meeting the constraints with the most throughput; among points within ``tolerance`` of that
    (the same throughput, as far as perf_analyzer can tell), the one whose configuration changes fewest knobs
    of the input spec (``candidates[0]``), then the lowest p99, then the most throughput. A change is advised
    only where it was measured to help, and at equal throughput the shorter tail wins."""
    ok = [(c, p) for c in candidates if c.measured for p in c.points if constraints.met(p)]
    if not ok:
        return None
    most = max(p.throughput for _, p in ok)
    near = [(c, p) for c, p in ok if p.throughput * (1 + tolerance) >= most]
    start = candidates[0].config

    def changed(config: Config) -> int:
        return sum(1 for knob in KNOBS if config.get(knob) != start.get(knob))

    c, p = min(
        near, key=lambda item: (changed(item[0].config), item[1].p99_ms, -item[1].throughput, item[0].id)
    )
    return Choice(c, p)


def closest(candidates: Sequence[Candidate]) -> Optional[Choice]:
    """The point with the lowest p99: what an impossible constraint is told about."""
    points = [(c, p) for c in candidates if c.measured for p in c.points]
    if not points:
        return None
    c, p = min(points, key=lambda item: (item[1].p99_ms, -item[1].throughput))
    return Choice(c, p)
