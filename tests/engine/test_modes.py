"""What the engine tells its caller: the mode it is built for, and how long the outputs it hands over live."""

from __future__ import annotations

import numpy as np
import pytest

from ge_plugin.engine import Engine, Lifetime, Mode


@pytest.mark.parametrize(("streams", "mode"), [("1", Mode.SYNCHRONOUS), ("2", Mode.PIPELINED)])
def test_engine_mode_is_pipelined_when_it_has_lanes_to_pipeline_on(cfg, oms, streams, mode):
    config = cfg.identity(oms["identity"], streams_per_instance=streams, warmup="0")
    with Engine.from_model_config(config, version_dir="/") as engine:
        assert engine.mode is mode


def test_engine_execute_refuses_outputs_that_would_die_with_put(cfg, oms):
    # execute() returns its outputs: views valid only until put returns would be dead by then
    config = cfg.identity(oms["identity"], warmup="0")
    with Engine.from_model_config(config, version_dir="/") as engine:
        with pytest.raises(ValueError, match="use submit"):
            engine.execute([{"INPUT0": np.ones((1, 16), np.float32)}], lifetime=Lifetime.UNTIL_PUT_RETURNS)
        assert engine.stats.requests == 0


@pytest.mark.parametrize("lifetime", [Lifetime.OWNED, Lifetime.UNTIL_NEXT_CALL])
def test_engine_outputs_are_views_only_when_their_lifetime_allows(cfg, oms, lifetime):
    config = cfg.identity(oms["identity"], warmup="0")
    with Engine.from_model_config(config, version_dir="/") as engine:
        (result,) = engine.execute([{"INPUT0": np.ones((1, 16), np.float32)}], lifetime=lifetime)
        staging = engine.lanes[0].out_host[0].array
        assert np.shares_memory(result["OUTPUT0"], staging) is lifetime.views
        assert bool(engine.lanes[0].lent) is lifetime.kept
