"""The engine when the device fails: the failed lane is rebuilt in place, a lane that cannot be rebuilt is
retried with a bounded backoff, and a multi-request execute that failed is searched for the request that
fails on its own. Errors handed back hold no request memory."""

from __future__ import annotations

import gc
import math
import weakref

import numpy as np
import pytest

from ge_plugin import acl_constants as C
from ge_plugin.engine import Engine, recovery
from ge_plugin.errors import AclError, RequestError, UnavailableError
from ge_plugin.sim import faults, snapshot


class FakeClock:
    """The engine's backoff clock, moved by the test instead of by waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def identity_engine(cfg, oms, clock=None, **params) -> Engine:
    config = cfg.identity(oms["identity"], **params)
    engine = Engine.from_model_config(config, version_dir="/")
    if clock is not None:
        engine.recovering.clock = clock
    return engine


def rows(n: int) -> list[dict]:
    return [{"INPUT0": np.full((1, 16), i, dtype=np.float32)} for i in range(n)]


@pytest.mark.parametrize("streams", ["1", "2"])
def test_engine_fault_in_one_of_several_executes_answers_every_request(cfg, oms, streams):
    # 24 one-row requests make 3 executes of 8; the first one's execute fails once. The failed lane is
    # rebuilt in place, so the next chunk gathers into a live buffer (it used to hit the closed one and
    # raise ValueError from execute()), and the 8 requests of the failed execute run again and succeed.
    requests = rows(24)
    with identity_engine(cfg, oms, streams_per_instance=streams, warmup="0") as engine:
        faults.inject("mdl.execute_async", C.ACL_ERROR_RT_MODEL_EXECUTE, nth=1)
        results = engine.execute(requests)
        for request, result in zip(requests, results):
            np.testing.assert_array_equal(result["OUTPUT0"], request["INPUT0"])
        assert engine.stats.device_errors == 0
        assert engine.stats.lane_rebuilds == 1
        assert engine.stats.isolation_executes == 2  # both halves once: the fault did not come back
    assert snapshot()["devices"][0]["live_bytes"] == 0


def test_engine_lane_that_cannot_be_rebuilt_is_retried_with_backoff(cfg, oms):
    clock = FakeClock()
    data = np.arange(16, dtype=np.float32)[None]
    with identity_engine(cfg, oms, clock, warmup="0") as engine:
        # counted from here: the second execute fails, and so does the first load after it (the rebuild)
        faults.inject("mdl.execute_async", C.ACL_ERROR_RT_MODEL_EXECUTE, nth=2)
        faults.inject("mdl.load_from_file", C.ACL_ERROR_GE_LOAD_MODEL, nth=1)
        (first,) = engine.execute([{"INPUT0": data}])
        np.testing.assert_array_equal(first["OUTPUT0"], data)
        (hit,) = engine.execute([{"INPUT0": data}])
        assert isinstance(hit, AclError) and hit.code == C.ACL_ERROR_RT_MODEL_EXECUTE
        assert engine.stats.lane_rebuild_failures == 1
        assert engine.stats.lanes_down == 1

        # Until the backoff has passed, requests are refused as unavailable, saying why and for how long;
        # a bad request still gets its own error.
        waiting, bad = engine.execute([{"INPUT0": data}, {"INPUT0": data[:, :3]}])
        assert isinstance(waiting, UnavailableError)
        assert "rebuilding its model failed 1 time(s)" in str(waiting)
        assert "next attempt is in 0.1 s" in str(waiting)
        assert isinstance(bad, RequestError)

        clock.now += recovery.RECOVERY_FIRST_S
        (back,) = engine.execute([{"INPUT0": data}])
        np.testing.assert_array_equal(back["OUTPUT0"], data)
        assert engine.stats.lane_rebuilds == 1
        assert engine.stats.lanes_down == 0
        assert len(engine.recovering) == 0
    counters = snapshot()["devices"][0]
    assert counters["live_bytes"] == 0
    assert counters["loads"] == counters["unloads"] == 2


def test_engine_backoff_doubles_up_to_its_cap(cfg, oms):
    clock = FakeClock()
    data = np.ones((1, 16), np.float32)
    with identity_engine(cfg, oms, clock, warmup="0") as engine:
        faults.inject("mdl.execute_async", C.ACL_ERROR_RT_MODEL_EXECUTE, nth=1)
        faults.inject("mdl.load_from_file", C.ACL_ERROR_GE_LOAD_MODEL, every=1)
        engine.execute([{"INPUT0": data}])
        delays = []
        for _ in range(12):
            down = engine.recovering[0]
            delays.append(round(down.retry_at - clock.now, 6))
            clock.now = down.retry_at
            (result,) = engine.execute([{"INPUT0": data}])
            assert isinstance(result, UnavailableError)
        assert delays[:4] == [0.1, 0.2, 0.4, 0.8]
        assert max(delays) == recovery.RECOVERY_MAX_S
        assert delays == sorted(delays)
        assert engine.stats.lane_rebuild_failures == 13
        faults.clear()
        clock.now = engine.recovering[0].retry_at
        (result,) = engine.execute([{"INPUT0": data}])
        np.testing.assert_array_equal(result["OUTPUT0"], data)
    assert snapshot()["devices"][0]["live_bytes"] == 0


def test_engine_second_lane_serves_while_the_first_recovers(cfg, oms):
    clock = FakeClock()
    data = np.ones((1, 16), np.float32)
    with identity_engine(cfg, oms, clock, warmup="0", streams_per_instance="2") as engine:
        faults.inject("mdl.execute_async", C.ACL_ERROR_RT_MODEL_EXECUTE, nth=1)
        faults.inject("mdl.load_from_file", C.ACL_ERROR_GE_LOAD_MODEL, nth=1)  # the rebuild
        (hit,) = engine.execute([{"INPUT0": data}])
        assert isinstance(hit, AclError)
        assert engine.stats.lanes_down == 1
        for _ in range(5):
            results = engine.execute([{"INPUT0": data * k} for k in range(3)])
            for k, result in enumerate(results):
                np.testing.assert_array_equal(result["OUTPUT0"], data * k)


def test_engine_finds_the_request_that_fails_on_the_device_and_serves_the_rest(cfg, oms):
    # The tiny LLaMA's embedding is a Gather: id 32000 is out of range and fails the execute on the
    # device. Of 10 good and 2 bad requests in one execute, only the 2 bad ones may fail.
    good = np.array([[5, 6, 7]], dtype=np.int64)
    bad = np.array([[32000, 1]], dtype=np.int64)
    kinds = ["good"] * 3 + ["bad"] + ["good"] * 5 + ["bad"] + ["good"] * 2
    requests = [{"input_ids": good if kind == "good" else bad} for kind in kinds]
    with Engine.from_model_config(cfg.llama(oms["llama"], warmup="0"), version_dir="/") as engine:
        (expected,) = engine.execute([{"input_ids": good}])
        results = engine.execute(requests)
        for kind, result in zip(kinds, results):
            if kind == "good":
                np.testing.assert_array_equal(result["logits"], expected["logits"])
            else:
                assert isinstance(result, AclError), result
                assert result.code == C.ACL_ERROR_RT_MODEL_EXECUTE
                assert "Gather" in str(result) or "indices" in str(result)
        assert engine.stats.device_errors == 2
        # 12 requests: at most 2 * ceil(log2 12) extra executes per bad request
        assert 0 < engine.stats.isolation_executes <= 2 * 2 * math.ceil(math.log2(12))


def test_engine_all_bad_batch_costs_at_most_the_halving_tree(cfg, oms):
    bad = np.array([[32000]], dtype=np.int64)
    with Engine.from_model_config(cfg.llama(oms["llama"], warmup="0"), version_dir="/") as engine:
        results = engine.execute([{"input_ids": bad} for _ in range(8)])
        assert all(isinstance(r, AclError) for r in results)
        assert engine.stats.device_errors == 8
        assert engine.stats.isolation_executes <= 2 * 8 - 2


def test_engine_refused_requests_hold_no_memory_after_execute(cfg, oms):
    # An error that kept its traceback would keep execute()'s frames, the request arrays (in Triton, views
    # of its shared memory) and the results list alive in a cycle; with the collector off, nothing frees it.
    with Engine.from_model_config(cfg.llama(oms["llama"]), version_dir="/") as engine:
        gc.collect()
        gc.disable()
        try:
            too_long = np.zeros((1, 4096), np.int64)
            wrong_type = np.zeros((1, 4), np.float32)
            refs = [weakref.ref(too_long), weakref.ref(wrong_type)]
            results = engine.execute([{"input_ids": too_long}, {"input_ids": wrong_type}, {}])
            assert all(isinstance(r, RequestError) for r in results)
            assert all(r.__traceback__ is None and r.__context__ is None for r in results)
            del too_long, wrong_type, results
            assert [ref() for ref in refs] == [None, None]
        finally:
            gc.enable()


def test_engine_device_errors_hold_no_request_memory(cfg, oms):
    data = np.ones((1, 16), np.float32)
    with identity_engine(cfg, oms, warmup="0") as engine:
        gc.collect()
        gc.disable()
        try:
            faults.inject("mdl.execute_async", C.ACL_ERROR_RT_MODEL_EXECUTE, nth=1)
            request = data.copy()
            ref = weakref.ref(request)
            (result,) = engine.execute([{"INPUT0": request}])
            assert isinstance(result, AclError)
            assert result.__traceback__ is None
            del request, result
            assert ref() is None
        finally:
            gc.enable()
