"""Which requests of a failed execute fail on their own: a bounded search by halves.

One execute holds several requests; when it fails, the fault may be one request's (a value the model
chokes on) or nobody's (a device hiccup). Failing them all would fail good requests with a bad one, so the
halves run again, and a half that fails again is halved in turn, until each failure is pinned on a single
request. The search is bounded: a fault that does not come back costs 2 extra executes, one bad request
among n 2·ceil(log2 n), k bad ones at most k times that (never more than the whole halving tree, 2n - 2).
Spent, the requests not yet answered fail with the error they shared.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ge_plugin.engine.planner import Entry
from ge_plugin.errors import GePluginError, UnavailableError

#: runs some of the failed execute's requests again: None when they are answered, else why they failed
Rerun = Callable[[Sequence[Entry]], "GePluginError | None"]
#: the error to fail requests with instead of running them (no lane can), or None to run them
Blocked = Callable[[], "UnavailableError | None"]
#: fails the requests at these places of the failed execute with this error
Fail = Callable[[GePluginError, Sequence[int]], None]


class Isolation:
    """The search over one failed execute's requests (``entries``), with its budget of executes.

    ``rerun``, ``blocked`` and ``fail`` are how it reaches a lane and the requests: the engine's, or a
    test's. ``executes`` counts the reruns it ran."""

    def __init__(self, entries: Sequence[Entry], *, rerun: Rerun, blocked: Blocked, fail: Fail):
        self.entries = list(entries)
        self._rerun_group = rerun
        self._blocked = blocked
        self._fail = fail
        #: executes one request found failing on its own: the search's budget, and what each such request
        #: adds to it
        self.step = 2 * math.ceil(math.log2(len(self.entries))) if len(self.entries) > 1 else 0
        #: executes left
        self.left = self.step
        self.executes = 0

    def search(self, error: GePluginError) -> None:
        """The whole execute failed with ``error``: answer or fail each of its requests."""
        self._bisect(self.entries, error)

    def _bisect(self, group: list[Entry], error: GePluginError) -> None:
        """``group`` failed as a whole: run each half again and search a half that fails again."""
        half = len(group) // 2
        for part in (group[:half], group[half:]):
            failed = self._rerun(part, error)
            if failed is None:
                continue
            # not searched further: one request, no lane left, or (``error`` itself) the budget is spent
            if len(part) == 1 or isinstance(failed, UnavailableError) or failed is error:
                self._fail(failed, [member for member, _ in part])
                if len(part) == 1 and failed is not error:
                    self.left += self.step
            else:
                self._bisect(part, failed)

    def _rerun(self, group: list[Entry], error: GePluginError) -> GePluginError | None:
        """Run ``group`` now: None when its requests are answered, else why it failed. With the budget
        spent it is not run and fails with ``error``, the failure it shared; with no lane to run it, with
        UnavailableError."""
        blocked = self._blocked()
        if blocked is not None:
            return blocked
        if self.left <= 0:
            return error
        self.left -= 1
        self.executes += 1
        return self._rerun_group(group)
