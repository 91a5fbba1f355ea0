"""The search for the requests of a failed execute that fail on their own, with fake reruns: its budget of
executes, what it refunds for each request found failing, and what it does when no lane can run."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ge_plugin.engine.isolation import Isolation
from ge_plugin.engine.planner import Entry
from ge_plugin.errors import GePluginError, UnavailableError


class Requests:
    """``n`` requests of a failed execute; ``fails(group)`` says whether a rerun of ``group`` fails."""

    def __init__(self, n: int, fails: Callable[[list[int]], bool], blocked: UnavailableError | None = None):
        self.entries: list[Entry] = [(member, []) for member in range(n)]
        self.fails = fails
        self.blocked = blocked
        self.answered: list[int] = []
        self.failed: dict[int, GePluginError] = {}
        self.runs: list[list[int]] = []

    def rerun(self, group: Sequence[Entry]) -> GePluginError | None:
        members = [member for member, _ in group]
        self.runs.append(members)
        if self.fails(members):
            return GePluginError(f"execute of {members} failed")
        self.answered += members
        return None

    def fail(self, error: GePluginError, members: Sequence[int]) -> None:
        for member in members:
            assert member not in self.failed, "a request is answered once"
            self.failed[member] = error

    def isolation(self) -> Isolation:
        return Isolation(self.entries, rerun=self.rerun, blocked=lambda: self.blocked, fail=self.fail)


def test_isolation_fault_that_does_not_come_back_costs_two_executes():
    requests = Requests(8, lambda group: False)
    search = requests.isolation()
    search.search(GePluginError("device hiccup"))
    assert search.executes == 2 and requests.runs == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert sorted(requests.answered) == list(range(8)) and requests.failed == {}


def test_isolation_finds_one_bad_request_in_its_budget():
    requests = Requests(8, lambda group: 5 in group)
    search = requests.isolation()
    assert search.step == search.left == 2 * math.ceil(math.log2(8))
    search.search(GePluginError("the batch failed"))
    assert search.executes == 2 * math.ceil(math.log2(8))
    assert list(requests.failed) == [5] and "[5]" in str(requests.failed[5])
    assert sorted(requests.answered) == [0, 1, 2, 3, 4, 6, 7]


def test_isolation_each_bad_request_found_adds_a_step_to_the_budget():
    bad = {1, 6, 7}
    requests = Requests(8, lambda group: bool(bad & set(group)))
    search = requests.isolation()
    search.search(GePluginError("the batch failed"))
    assert set(requests.failed) == bad  # each found on its own, none failed for a batch-mate
    assert sorted(requests.answered) == sorted(set(range(8)) - bad)
    assert search.executes <= len(bad) * search.step
    assert search.left == search.step * (1 + len(bad)) - search.executes


def test_isolation_with_the_budget_spent_fails_the_rest_with_the_error_they_shared():
    # every group of more than one fails, every single request passes: the whole halving tree (14 executes)
    # would be needed, the budget is 6
    requests = Requests(8, lambda group: len(group) > 1)
    search = requests.isolation()
    shared = GePluginError("the batch failed")
    search.search(shared)
    assert search.executes == search.step == 6 and search.left == 0
    assert sorted(requests.answered) == [0, 1, 2]
    assert str(requests.failed[3]) == "execute of [2, 3] failed"  # not run: its pair's failure
    assert all(requests.failed[m] is shared for m in (4, 5, 6, 7))  # not run: the execute's own


def test_isolation_runs_nothing_while_no_lane_can():
    down = UnavailableError("no lane of the instance can run requests")
    requests = Requests(4, lambda group: False, blocked=down)
    search = requests.isolation()
    search.search(GePluginError("the batch failed"))
    assert search.executes == 0 and requests.runs == [] and search.left == search.step
    assert requests.failed == dict.fromkeys(range(4), down)
