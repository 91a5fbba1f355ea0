"""The scheduler alone, over stand-in lanes (what it reads of a lane: ``pending`` and ``usable``)."""

from __future__ import annotations

import threading

import attrs
import pytest

from ge_plugin.engine.scheduler import Scheduler


@attrs.define
class FakeLane:
    name: str
    pending: object = None
    usable: bool = True


@attrs.define
class FakeJob:
    rows: int

    @property
    def chunk(self) -> FakeJob:
        return self


def scheduler(*names: str) -> Scheduler:
    s = Scheduler()
    s.lanes.extend(FakeLane(name) for name in names)
    return s


def test_scheduler_takes_lanes_in_turn_and_skips_one_that_is_down():
    s = scheduler("a", "b", "c")
    s.lanes[1].usable = False
    finished = []

    def finish(lane):
        finished.append(lane.name)
        s.release(lane)

    taken = [s.take(FakeJob(1), finish).name for _ in range(4)]
    assert taken == ["a", "c", "a", "c"]
    assert finished == ["a", "c"]  # a synchronous take finishes a lane still running, in its own thread


def test_scheduler_with_no_usable_lane_gives_none_at_once():
    s = scheduler("a")
    s.lanes[0].usable = False
    assert s.take(FakeJob(1), lambda lane: None) is None
    assert s.take(FakeJob(1), None) is None  # nothing is running that could free one: no wait either


def test_scheduler_submitted_take_waits_for_a_lane_to_be_released():
    s = scheduler("a")
    first = s.take(FakeJob(1), None)
    got = []
    waiter = threading.Thread(target=lambda: got.append(s.take(FakeJob(2), None)))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and got == []
    s.release(first)
    waiter.join(5)
    assert got == [first] and first.pending == FakeJob(2)


@pytest.mark.parametrize(
    ("running", "already_open", "rows", "held"),
    [(1, False, 3, True), (0, False, 3, False), (1, True, 3, False), (1, False, 8, False)],
    ids=["device busy", "device idle", "another held open", "full already"],
)
def test_scheduler_holds_a_chunk_open_only_while_the_device_is_busy(running, already_open, rows, held):
    s = scheduler("a", "b")
    s.running = running
    if already_open:
        s.open = s.lanes[1]
    lane = s.take(FakeJob(rows), None)
    assert s.hold(lane, lane.pending, max_rows=8) is held
    assert (s.open is lane) is held


def test_scheduler_hands_back_the_held_lane_when_the_last_execute_lands():
    s = scheduler("a", "b")
    s.launched()
    s.launched()
    lane = s.take(FakeJob(2), None)
    assert s.hold(lane, lane.pending, max_rows=8)
    assert s.held() is lane.pending
    assert s.landed() is None  # one execute is still on the device: keep taking requests
    assert s.landed() is lane and s.open is None
