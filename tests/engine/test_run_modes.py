"""The engine on both kinds of Ascend host the simulator plays: a PCIe card (ACL_HOST, device memory the
host cannot touch) and an RC board (ACL_DEVICE, the program runs on the device and its memory is host
memory; malloc_host is device memory). Same answers, same gears, no sanitizer finding (tests/conftest.py
fails the test on one), nothing left allocated."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from ge_plugin.engine import Engine
from ge_plugin.sim import snapshot
from ge_plugin.sim.acl import rt


@pytest.fixture(params=["ACL_HOST", "ACL_DEVICE"])
def run_mode(request, monkeypatch) -> str:
    monkeypatch.setenv("GE_PLUGIN_SIM_RUN_MODE", request.param)
    return request.param


def test_engine_answers_the_same_in_both_run_modes(cfg, oms, demo_models_dir, run_mode):
    ids = cfg.tokens(np.random.default_rng(31), 3, 9)
    session = ort.InferenceSession(
        str(demo_models_dir / "tiny_llama.onnx"), providers=["CPUExecutionProvider"]
    )
    with Engine.from_model_config(cfg.llama(oms["llama"]), version_dir="/") as engine:
        assert rt.get_run_mode() == ((0 if run_mode == "ACL_DEVICE" else 1), 0)
        results = engine.execute([{"input_ids": ids[i : i + 1]} for i in range(3)])
        for i, result in enumerate(results):
            np.testing.assert_array_equal(
                result["logits"], session.run(None, {"input_ids": ids[i : i + 1]})[0]
            )
        rows = [np.full((n, 16), n, np.float32) for n in (1, 4)]
    with Engine.from_model_config(cfg.identity(oms["identity"]), version_dir="/") as engine:
        for result, sent in zip(engine.execute([{"INPUT0": r} for r in rows]), rows):
            np.testing.assert_array_equal(result["OUTPUT0"], sent)
    assert snapshot()["devices"][0]["live_bytes"] == 0
