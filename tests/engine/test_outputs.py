"""Outputs handed back as views of the lane's staging: no copy and no fresh memory per response, and never a
view whose memory the next batch overwrites."""

from __future__ import annotations

import numpy as np

from ge_plugin.engine import Engine, Lifetime


def staging(engine: Engine) -> list[np.ndarray]:
    return [host.array for lane in engine.lanes for host in lane.out_host]


def test_engine_views_are_views_of_the_staging_and_equal_to_copies(cfg, oms):
    ids = [np.arange(5, 5 + n, dtype=np.int64)[None] for n in (3, 7, 16)]
    with Engine.from_model_config(cfg.llama(oms["llama"]), version_dir="/") as engine:
        copies = engine.execute([{"input_ids": a} for a in ids])
        views = engine.execute([{"input_ids": a} for a in ids], lifetime=Lifetime.UNTIL_NEXT_CALL)
        for copy, view in zip(copies, views):
            assert any(np.shares_memory(view["logits"], host) for host in staging(engine))
            assert not any(np.shares_memory(copy["logits"], host) for host in staging(engine))
            np.testing.assert_array_equal(view["logits"], copy["logits"])


def test_engine_copies_views_before_a_lane_runs_again_in_the_same_call(cfg, oms):
    # 24 one-row requests, one lane, gears up to 8: three executes on the same staging in one call. The
    # first two executes' views are copied before the staging is written again, so every answer is its own.
    rows = [np.full((1, 16), i, dtype=np.float32) for i in range(24)]
    with Engine.from_model_config(cfg.identity(oms["identity"]), version_dir="/") as engine:
        results = engine.execute([{"INPUT0": r} for r in rows], lifetime=Lifetime.UNTIL_NEXT_CALL)
        assert engine.stats.executes == 3
        shared = [any(np.shares_memory(r["OUTPUT0"], host) for host in staging(engine)) for r in results]
    assert shared == [False] * 16 + [True] * 8  # only the last execute's answers are still views
    for row, result in zip(rows, results):
        np.testing.assert_array_equal(result["OUTPUT0"], row)


def test_engine_casts_are_copies_even_when_views_are_allowed(cfg, oms):
    data = np.linspace(-1, 1, 32, dtype=np.float32).reshape(2, 16)
    with Engine.from_model_config(
        cfg.identity(oms["identity_fp16"], precision="fp16"), version_dir="/"
    ) as engine:
        (result,) = engine.execute([{"INPUT0": data}], lifetime=Lifetime.UNTIL_NEXT_CALL)
        assert not any(np.shares_memory(result["OUTPUT0"], host) for host in staging(engine))
    assert result["OUTPUT0"].dtype == np.float32


def test_lane_keeps_no_view_of_staging_it_freed_and_views_the_new_one(cfg, oms):
    first, second = np.full((1, 16), 1.0, np.float32), np.full((1, 16), 2.0, np.float32)
    with Engine.from_model_config(cfg.identity(oms["identity"]), version_dir="/") as engine:
        engine.execute([{"INPUT0": first}], lifetime=Lifetime.UNTIL_NEXT_CALL)
        lane = engine.lanes[0]
        assert lane.out_arrays
        lane.close()
        assert lane.in_arrays == [] and lane.out_arrays == []  # nothing shows the freed pinned memory
        lane.open()
        (result,) = engine.execute([{"INPUT0": second}], lifetime=Lifetime.UNTIL_NEXT_CALL)
        assert any(np.shares_memory(result["OUTPUT0"], host) for host in staging(engine))
        np.testing.assert_array_equal(result["OUTPUT0"], second)
