"""One label set, one stub at a time: a new instance publishes its metrics only once the instance it replaces
(same model, version and instance name) has deleted its own (ge_plugin.backend.metrics, server#8663)."""

from __future__ import annotations

import time

from ge_plugin.backend.metrics import LabelLease, MetricsPublisher
from ge_plugin.engine.stats import EngineStats

LABELS = {"model": "m", "version": "1", "instance": "npu0_0"}


def wait_until(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_label_lease_is_exclusive_until_released():
    first, second = LabelLease(LABELS, server="s"), LabelLease(LABELS, server="s")
    assert first.acquire() and first.acquire()  # idempotent for its holder
    assert not second.acquire()
    first.release()
    assert second.acquire()
    second.release()


def test_label_lease_is_per_server_and_per_label_set():
    held = LabelLease(LABELS, server="s")
    assert held.acquire()
    try:
        assert LabelLease(LABELS, server="another server").acquire()
        assert LabelLease({**LABELS, "instance": "npu0_1"}, server="s").acquire()
    finally:
        held.release()


def test_publisher_waits_for_its_predecessor_and_then_publishes_everything(pb_utils):
    predecessor = LabelLease(LABELS, server="s")
    assert predecessor.acquire()
    stats = EngineStats()
    publisher = MetricsPublisher(pb_utils, stats, LABELS, 10, lease=LabelLease(LABELS, server="s"))
    try:
        stats.request_errors = 5
        time.sleep(0.2)
        assert not publisher.publishing
        assert pb_utils.MetricFamily.calls == []  # not one family while the predecessor holds the labels
        predecessor.release()
        assert wait_until(lambda: ("increment", "ge_request_errors_total") in pb_utils.MetricFamily.calls)
        assert publisher.publishing
    finally:
        publisher.close()
    assert not publisher.lease.held
    assert LabelLease(LABELS, server="s").acquire()


def test_publisher_closed_while_waiting_creates_nothing(pb_utils):
    predecessor = LabelLease(LABELS, server="s")
    assert predecessor.acquire()
    try:
        publisher = MetricsPublisher(
            pb_utils, EngineStats(), LABELS, 10, lease=LabelLease(LABELS, server="s")
        )
        publisher.close()
        assert pb_utils.MetricFamily.calls == []
    finally:
        predecessor.release()
