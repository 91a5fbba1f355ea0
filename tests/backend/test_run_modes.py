"""The backend adapter serves on an RC board (ACL_DEVICE: device memory is host memory) as on a PCIe card."""

from __future__ import annotations

import numpy as np
import pytest

from ge_plugin.sim import snapshot


@pytest.mark.parametrize("run_mode", ["ACL_HOST", "ACL_DEVICE"])
def test_adapter_serves_a_batch_in_both_run_modes(pb_utils, identity_repo, args_for, monkeypatch, run_mode):
    monkeypatch.setenv("GE_PLUGIN_SIM_RUN_MODE", run_mode)
    from ge_plugin.backend import model as backend

    model = backend.TritonPythonModel()
    model.initialize(args_for(identity_repo))
    data = [np.full((rows, 16), rows, np.float32) for rows in (1, 3, 2)]
    responses = model.execute([pb_utils.InferenceRequest({"INPUT0": d}) for d in data])
    assert responses is not None and len(responses) == len(data)  # a one-lane quick model answers at once
    for response, sent in zip(responses, data):
        assert not response.has_error()
        np.testing.assert_array_equal(response.output_tensors()[0].as_numpy(), sent)
    from ge_plugin.sim.acl import rt

    assert rt.get_run_mode()[0] == (0 if run_mode == "ACL_DEVICE" else 1)
    model.finalize()
    assert snapshot()["devices"][0]["live_bytes"] == 0
