"""How the engine answers: whether a call waits for its batches, and how long its outputs stay valid."""

from __future__ import annotations

import enum

from ge_plugin.engine.stats import EngineStats

#: A one-lane engine whose executes keep the device this long (µs) or longer, on a running average, answers
#: from its completion thread, as a pipelined one does. Returning the responses from Triton's ``execute`` lets
#: the client have its answer a moment before Triton 2.51 counts the instance free again; a request sent in
#: that moment finds no free instance, and the dynamic batcher then waits for its 500 ms poll. On a busy host
#: that moment is long enough to hit often (perf_analyzer at concurrency 1 against the LLaMA on the seed's
#: device time: p90 from 85 to 583 ms; tests/e2e/test_one_lane.py). Answering from the completion thread lets
#: ``execute`` return before the answer exists, which costs a thread hand-over (about 0.2 ms per execute on
#: the bench's host, so not for executes of microseconds, which are over before any client could ask again).
ANSWER_LATER_US = 2_000.0
#: the weight of one execute's stream time in that running average: one stall of a quick model's
#: execute (a preempted host thread) moves it by an eighth, and the engine keeps answering at once
RECENT_WEIGHT = 0.125


class Mode(enum.Enum):
    """How requests reach the engine and their answers come back.

    ``SYNCHRONOUS``: ``Engine.execute`` runs a batch and returns its outcomes. ``PIPELINED``:
    ``Engine.submit`` returns once the batch is on the device, and a completion thread answers it while the
    caller gathers the next batch onto another lane. ``Engine.mode`` says which the engine is built for
    (pipelined when it has more than one lane to pipeline on). Whether one call is executed or submitted is
    ``Engine.answers_later()``'s to say (``Answering``): always submitted when pipelined, and by a one-lane
    engine while its executes are slow."""

    SYNCHRONOUS = "synchronous"
    PIPELINED = "pipelined"


class Lifetime(enum.Enum):
    """How long the outputs an engine hands over stay valid.

    Outputs that are views of a lane's staging cost no copy and no fresh memory per response, but the
    staging is written again by the lane's next execute; who copies them, and when, is what this says."""

    #: every output owns its memory: valid for good
    OWNED = ("owned", False, False)
    #: outputs may be views of the staging, which the caller keeps until its next ``execute`` (Triton's
    #: stub copies returned responses before it calls again): the lane copies any still lent before it
    #: runs again, so the views are valid until the next call or ``close()``
    UNTIL_NEXT_CALL = ("until_next_call", True, True)
    #: outputs may be views of the staging, valid until ``put`` returns: ``put`` copies what it keeps
    #: (Triton's response sender does, before ``send`` returns)
    UNTIL_PUT_RETURNS = ("until_put_returns", True, False)

    def __init__(self, label: str, views: bool, kept: bool):
        #: outputs may be views of the staging
        self.views = views
        #: the caller keeps those views after ``put``: the lane copies them before it reuses the staging
        self.kept = kept


class Answering:
    """Whether the engine's next batch is submitted (answered from the completion thread) or executed.

    A pipelined engine always submits. A one-lane engine submits while its executes keep the device
    ``ANSWER_LATER_US`` or longer on a running average, taken on at each question over the executes finished
    since the last one (by the caller's thread or the completion thread), so that it follows the device
    both ways and one stalled execute does not flip it. Asked from the caller's thread only."""

    def __init__(self, mode: Mode, stats: EngineStats):
        self.always = mode is Mode.PIPELINED
        self.stats = stats
        #: the running average of stream µs per execute
        self.recent_us = 0.0
        #: (executes, stream µs) as last read
        self._seen = (0, 0.0)

    def later(self) -> bool:
        if self.always:
            return True
        stats = self.stats
        count, spent = sum(stats.execute_buckets), stats.execute_us_sum
        seen_count, seen_spent = self._seen
        if count > seen_count:
            per_execute = (spent - seen_spent) / (count - seen_count)
            self.recent_us += (per_execute - self.recent_us) * RECENT_WEIGHT
            self._seen = (count, spent)
        return self.recent_us >= ANSWER_LATER_US
