"""Engine.submit: batches started on free lanes while earlier ones run, answered from the completion thread,
never reading a request's memory after submit() returns."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ge_plugin import acl_constants as C
from ge_plugin.engine import Engine
from ge_plugin.errors import AclError
from ge_plugin.sim import faults

#: long enough, next to the host work of a batch, that a batch is still on the device when the next starts
DEVICE_MS = 200


class Recorder:
    """A ``put`` that records, in order, what arrived and from which thread. Like Triton's response sender
    it copies outputs before it returns: they may be views of staging the lane reuses."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.outcomes: dict[int, object] = {}
        self.lock = threading.Lock()

    def put(self, index: int, outcome: object) -> None:
        with self.lock:
            self.events.append(("done", index, threading.current_thread().name))
            if isinstance(outcome, dict):
                outcome = {name: array.copy() for name, array in outcome.items()}
            self.outcomes[index] = outcome

    def mark(self, what: str) -> None:
        with self.lock:
            self.events.append((what,))


def rows(start: int, n: int) -> list[dict]:
    return [{"INPUT0": np.full((1, 16), start + i, dtype=np.float32)} for i in range(n)]


def test_submit_starts_the_next_batch_while_one_runs_on_another_lane(cfg, oms):
    recorder = Recorder()
    with Engine.from_model_config(
        cfg.identity(oms["identity"], streams_per_instance="2"), version_dir="/"
    ) as engine:
        faults.set_execute_latency_ms(DEVICE_MS)
        engine.submit(rows(0, 8), None, lambda i, o: recorder.put(i, o))
        recorder.mark("first submitted")
        engine.submit(rows(8, 8), None, lambda i, o: recorder.put(8 + i, o))
        recorder.mark("second submitted")
        engine.wait_idle()
    kinds = [e[0] for e in recorder.events]
    assert kinds[:2] == ["first submitted", "second submitted"]  # neither waited for the device
    assert {e[2] for e in recorder.events[2:]} == {"ge-completion"}
    assert sorted(recorder.outcomes) == list(range(16))
    for i, outcome in recorder.outcomes.items():
        np.testing.assert_array_equal(outcome["OUTPUT0"], np.full((1, 16), i, dtype=np.float32))


def test_submit_with_one_lane_waits_for_it(cfg, oms):
    recorder = Recorder()
    with Engine.from_model_config(cfg.identity(oms["identity"]), version_dir="/") as engine:
        faults.set_execute_latency_ms(DEVICE_MS)
        engine.submit(rows(0, 8), None, recorder.put)
        recorder.mark("first submitted")
        engine.submit(rows(8, 8), None, lambda i, o: recorder.put(8 + i, o))
        recorder.mark("second submitted")
        engine.wait_idle()
    kinds = [e[0] for e in recorder.events]
    assert kinds == ["first submitted", *["done"] * 8, "second submitted", *["done"] * 8]


def test_submit_never_reads_a_request_after_it_returns(cfg, oms):
    # Triton frees a request's inputs once execute() returns. Overwrite them right after submit(): the
    # answers must still be those of the original ids, including for the batch whose failure on the
    # device (an id past the vocabulary) makes its requests run again, from what was staged.
    good = np.array([[5, 6, 7]], dtype=np.int64)
    bad = np.array([[32000, 1, 2]], dtype=np.int64)
    kinds = ["good", "bad", "good", "good", "good", "bad", "good", "good"]
    requests = [{"input_ids": (good if kind == "good" else bad).copy()} for kind in kinds]
    recorder = Recorder()
    config = cfg.llama(oms["llama"], streams_per_instance="2", warmup="0")
    with Engine.from_model_config(config, version_dir="/") as engine:
        faults.set_execute_latency_ms(DEVICE_MS)
        engine.submit(requests, None, recorder.put)
        for request in requests:
            request["input_ids"][...] = 1
        engine.wait_idle()
        assert engine.stats.device_errors == 2
        assert engine.stats.isolation_executes > 0
    for i, kind in enumerate(kinds):
        outcome = recorder.outcomes[i]
        if kind == "good":
            np.testing.assert_array_equal(outcome["logits"].argmax(-1), good + 1)
        else:
            assert isinstance(outcome, AclError) and outcome.code == C.ACL_ERROR_RT_MODEL_EXECUTE


def test_close_answers_every_submitted_request_first(cfg, oms):
    recorder = Recorder()
    engine = Engine.from_model_config(
        cfg.identity(oms["identity"], streams_per_instance="2"), version_dir="/"
    )
    faults.set_execute_latency_ms(DEVICE_MS)
    engine.submit(rows(0, 16), None, recorder.put)
    engine.close()
    assert sorted(recorder.outcomes) == list(range(16))


def test_a_put_that_raises_does_not_stop_the_batches_after_it(cfg, oms):
    recorder = Recorder()

    def put(index: int, outcome: object) -> None:
        if index == 0:
            raise RuntimeError("the client went away")
        recorder.put(index, outcome)

    with Engine.from_model_config(
        cfg.identity(oms["identity"], streams_per_instance="2"), version_dir="/"
    ) as engine:
        engine.submit(rows(0, 8), None, put)
        engine.submit(rows(8, 8), None, lambda i, o: recorder.put(8 + i, o))
        engine.wait_idle()
    assert sorted(recorder.outcomes) == [i for i in range(16) if i >= 8]


@pytest.mark.parametrize("streams", ["1", "2"])
def test_submit_refuses_a_bad_request_at_once_from_the_callers_thread(cfg, oms, streams):
    recorder = Recorder()
    with Engine.from_model_config(
        cfg.identity(oms["identity"], streams_per_instance=streams), version_dir="/"
    ) as engine:
        engine.submit([{"INPUT0": np.ones((1, 3), np.float32)}], None, recorder.put)
        assert recorder.events == [("done", 0, threading.current_thread().name)]


def test_submit_holds_a_batch_open_while_the_device_is_busy_and_fills_it(cfg, oms):
    # One row runs; the five single-row submits that come meanwhile each return at once and join one batch
    # held open on the other lane, launched when the device is free: two executes, not six. (Launched at
    # once, the second would have run alone and the rest waited for a lane, each running alone again.)
    recorder = Recorder()
    with Engine.from_model_config(
        cfg.identity(oms["identity"], streams_per_instance="2"), version_dir="/"
    ) as engine:
        faults.set_execute_latency_ms(DEVICE_MS)
        engine.submit(rows(0, 1), None, recorder.put)
        for k in range(1, 6):
            engine.submit(rows(k, 1), None, lambda i, o, k=k: recorder.put(k + i, o))
        recorder.mark("all submitted")
        assert engine.stats.executes == 1  # the first only: the others are held, not launched
        engine.wait_idle()
        assert engine.stats.executes_by_gear == {"1": 1, "8": 1}
        assert engine.stats.rows == 6
    assert recorder.events[0] == ("all submitted",)  # no submit waited for the device
    assert sorted(recorder.outcomes) == list(range(6))
    for i, outcome in recorder.outcomes.items():
        np.testing.assert_array_equal(outcome["OUTPUT0"], np.full((1, 16), i, dtype=np.float32))


def test_submit_launches_a_held_batch_as_soon_as_it_is_full(cfg, oms):
    recorder = Recorder()
    with Engine.from_model_config(
        cfg.identity(oms["identity"], streams_per_instance="2"), version_dir="/"
    ) as engine:
        faults.set_execute_latency_ms(DEVICE_MS)
        engine.submit(rows(0, 1), None, recorder.put)
        engine.submit(rows(1, 3), None, lambda i, o: recorder.put(1 + i, o))
        assert engine.stats.executes == 1  # three rows held open
        engine.submit(rows(4, 5), None, lambda i, o: recorder.put(4 + i, o))
        # 3 + 5 rows fill the largest gear: nothing more could join, so it is queued behind the running one
        assert engine.stats.executes == 2 and engine.stats.executes_by_gear == {"1": 1, "8": 1}
        engine.wait_idle()
    assert sorted(recorder.outcomes) == list(range(9))
    for i, outcome in recorder.outcomes.items():
        np.testing.assert_array_equal(outcome["OUTPUT0"], np.full((1, 16), i, dtype=np.float32))


def test_submit_at_low_load_launches_each_batch_at_once(cfg, oms):
    # nothing is on the device when a request comes: it is never held, so it waits for nothing
    recorder = Recorder()
    with Engine.from_model_config(
        cfg.identity(oms["identity"], streams_per_instance="2"), version_dir="/"
    ) as engine:
        faults.set_execute_latency_ms(20)
        for k in range(3):
            engine.submit(rows(k, 1), None, lambda i, o, k=k: recorder.put(k + i, o))
            assert engine.stats.executes == k + 1
            engine.wait_idle()
    assert sorted(recorder.outcomes) == [0, 1, 2]


def test_a_held_batch_that_fails_on_the_device_fails_only_its_bad_requests_whichever_submit_they_came_in(
    cfg, oms
):
    # requests of two submits joined the held batch; one id past the vocabulary fails it on the device.
    # Their arrays are gone (Triton freed them): they run again from the staging, in halves, and each
    # answer reaches its own submit's put at its own index.
    good = np.array([[5, 6, 7]], dtype=np.int64)
    bad = np.array([[32000, 1, 2]], dtype=np.int64)
    first, second = Recorder(), Recorder()
    config = cfg.llama(oms["llama"], streams_per_instance="2", warmup="0")
    with Engine.from_model_config(config, version_dir="/") as engine:
        faults.set_execute_latency_ms(DEVICE_MS)
        engine.submit([{"input_ids": good.copy()}], None, Recorder().put)  # runs; the next two are held
        later = [[{"input_ids": good.copy()}, {"input_ids": bad.copy()}], [{"input_ids": good.copy()}]]
        engine.submit(later[0], None, first.put)
        engine.submit(later[1], None, second.put)
        for window in later:
            for request in window:
                request["input_ids"][...] = 1
        engine.wait_idle()
        assert engine.stats.device_errors == 1
    np.testing.assert_array_equal(first.outcomes[0]["logits"].argmax(-1), good + 1)
    assert isinstance(first.outcomes[1], AclError) and first.outcomes[1].code == C.ACL_ERROR_RT_MODEL_EXECUTE
    np.testing.assert_array_equal(second.outcomes[0]["logits"].argmax(-1), good + 1)


def test_execute_after_submit_lets_the_submitted_batches_finish_first(cfg, oms):
    recorder = Recorder()
    with Engine.from_model_config(
        cfg.identity(oms["identity"], streams_per_instance="2"), version_dir="/"
    ) as engine:
        faults.set_execute_latency_ms(DEVICE_MS)
        engine.submit(rows(0, 1), None, recorder.put)
        engine.submit(rows(1, 2), None, lambda i, o: recorder.put(1 + i, o))  # held open
        (answer,) = engine.execute(rows(7, 1))
        assert sorted(recorder.outcomes) == [0, 1, 2]  # answered, each once, before execute ran
        np.testing.assert_array_equal(answer["OUTPUT0"], np.full((1, 16), 7, dtype=np.float32))
    assert [e[1] for e in recorder.events].count(1) == 1
