"""Model memory: query_size, load_from_file_with_mem (memory the caller owns) and the runtime's own share.

A load takes work and weight memory on the device. load_from_file leaves both to the runtime, which charges
them to the device (``model_bytes``, and the free memory get_mem_info reports); load_from_file_with_mem uses
the caller's acl.rt.malloc'ed blocks, which are already counted as the caller's allocations.
"""

from __future__ import annotations

import numpy as np
import pytest

from ge_plugin import acl_constants as C
from ge_plugin.sim import snapshot


def _free(acl) -> int:
    free, _, ret = acl.rt.get_mem_info(C.ACL_HBM_MEM)
    assert ret == 0
    return free


def test_query_size_reports_work_and_weight_bytes(acl, ready, oms):
    work, weight, ret = acl.mdl.query_size(str(oms["batch"]))
    assert ret == 0
    assert work > 0 and weight > 0 and work % 32 == 0 and weight % 32 == 0
    assert work >= (4 * 3 * 4 + 4 * 3 * 3) * 4  # the largest gear's input and output, at least


def test_query_size_codes(acl, oms, tmp_path):
    assert acl.mdl.query_size(str(oms["static"])) == (0, 0, C.ACL_ERROR_UNINITIALIZE)
    assert acl.init() == 0
    assert acl.mdl.query_size(str(tmp_path / "missing.om")) == (0, 0, C.ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID)
    (tmp_path / "real.om").write_bytes(b"IMOD" + bytes(64))
    assert acl.mdl.query_size(str(tmp_path / "real.om"))[2] == C.ACL_ERROR_DESERIALIZE_MODEL
    with pytest.raises(TypeError):
        acl.mdl.query_size(b"x.om")


def test_load_from_file_charges_the_runtimes_memory_until_unload(acl, ready, oms):
    work, weight, _ = acl.mdl.query_size(str(oms["static"]))
    before = _free(acl)
    model_id, ret = acl.mdl.load_from_file(str(oms["static"]))
    assert ret == 0
    assert _free(acl) == before - work - weight
    device = snapshot()["devices"][0]
    assert device["model_bytes"] == work + weight and device["mallocs"] == 0
    assert acl.mdl.unload(model_id) == 0
    assert _free(acl) == before and snapshot()["devices"][0]["model_bytes"] == 0


def test_load_from_file_with_mem_runs_on_the_callers_memory(acl, ready, oms, model_class, graphs):
    work, weight, _ = acl.mdl.query_size(str(oms["static"]))
    work_ptr, _ = acl.rt.malloc(work, 0)
    weight_ptr, _ = acl.rt.malloc(weight, 0)
    before = snapshot()["devices"][0]
    model_id, ret = acl.mdl.load_from_file_with_mem(str(oms["static"]), work_ptr, work, weight_ptr, weight)
    assert ret == 0, acl.get_recent_err_msg()
    after = snapshot()["devices"][0]
    assert after["model_bytes"] == 0 and after["live_bytes"] == before["live_bytes"]
    model = model_class(acl, None, model_id)
    x = np.full((2, 3, 4), 0.5, np.float32)
    np.testing.assert_allclose(model.run([x])[0], x @ graphs.W + graphs.B, rtol=1e-6)
    assert acl.rt.free(work_ptr) == 0  # freed while loaded: the next execute refuses to run
    assert (
        acl.mdl.execute(model_id, model.inputs[0], model.outputs[0]) == C.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID
    )
    assert "freed while the model is loaded" in acl.get_recent_err_msg()
    model.release()
    assert acl.rt.free(weight_ptr) == 0


def test_load_from_file_with_mem_null_pointers_leave_that_part_to_the_runtime(acl, ready, oms):
    work, weight, _ = acl.mdl.query_size(str(oms["static"]))
    weight_ptr, _ = acl.rt.malloc(weight, 0)
    model_id, ret = acl.mdl.load_from_file_with_mem(str(oms["static"]), 0, 0, weight_ptr, weight)
    assert ret == 0
    assert snapshot()["devices"][0]["model_bytes"] == work
    assert acl.mdl.unload(model_id) == 0
    assert snapshot()["devices"][0]["model_bytes"] == 0


def test_load_from_file_with_mem_codes(acl, ready, oms):
    path = str(oms["static"])
    work, weight, _ = acl.mdl.query_size(path)
    work_ptr, _ = acl.rt.malloc(work, 0)
    weight_ptr, _ = acl.rt.malloc(weight, 0)
    small = acl.mdl.load_from_file_with_mem(path, work_ptr, work - 32, weight_ptr, weight)
    assert small == (0, C.ACL_ERROR_GE_EXEC_MODEL_DATA_SIZE_INVALID)
    host = np.zeros(work, np.uint8)
    on_host = acl.mdl.load_from_file_with_mem(path, host.ctypes.data, work, weight_ptr, weight)
    assert on_host == (0, C.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID)
    assert "host memory" in acl.get_recent_err_msg()
    with pytest.raises(TypeError):
        acl.mdl.load_from_file_with_mem(path, work_ptr, work, weight_ptr)


def test_a_model_that_does_not_fit_the_device_fails_to_load(acl, monkeypatch, oms):
    monkeypatch.setenv("GE_PLUGIN_SIM_DEVICE_MEMORY_MB", "1")
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    hog, ret = acl.rt.malloc((1 << 20) - 64, 0)  # leaves 32 bytes
    assert ret == 0
    assert acl.mdl.load_from_file(str(oms["static"])) == (0, C.ACL_ERROR_GE_DEVICE_MEMORY_ALLOCATION_FAILED)
    assert "work and weight memory" in acl.get_recent_err_msg()
    assert acl.rt.free(hog) == 0
    assert acl.mdl.load_from_file(str(oms["static"]))[1] == 0


def test_reset_device_returns_the_memory_of_models_left_loaded(acl, ready, oms):
    _, total, _ = acl.rt.get_mem_info(C.ACL_HBM_MEM)
    assert acl.mdl.load_from_file(str(oms["static"]))[1] == 0
    assert acl.rt.reset_device(0) == 0
    assert snapshot()["devices"][0]["model_bytes"] == 0
    assert acl.rt.set_device(0) == 0
    assert _free(acl) == total
