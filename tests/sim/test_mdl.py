"""Conformance of acl.mdl: load/unload, descriptions, datasets and execute, with their failure codes."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ge_plugin import acl_constants as C
from ge_plugin.sim import snapshot


def test_load_describe_execute_unload_static_model(acl, ready, oms, graphs):
    model_id, ret = acl.mdl.load_from_file(str(oms["static"]))
    assert ret == 0 and isinstance(model_id, int) and model_id > 0
    desc = acl.mdl.create_desc()
    assert acl.mdl.get_desc(desc, model_id) == 0
    assert acl.mdl.get_num_inputs(desc) == 1
    assert acl.mdl.get_num_outputs(desc) == 1
    assert acl.mdl.get_input_size_by_index(desc, 0) == 2 * 3 * 4 * 4
    assert acl.mdl.get_output_size_by_index(desc, 0) == 2 * 3 * 3 * 4
    assert acl.mdl.get_input_dims(desc, 0) == ({"name": "x", "dimCount": 3, "dims": [2, 3, 4]}, 0)
    assert acl.mdl.get_input_dims_v2(desc, 0) == ({"name": "x", "dimCount": 3, "dims": [2, 3, 4]}, 0)
    assert acl.mdl.get_output_dims(desc, 0) == ({"name": "y", "dimCount": 3, "dims": [2, 3, 3]}, 0)
    assert acl.mdl.get_cur_output_dims(desc, 0) == ({"name": "y", "dimCount": 3, "dims": [2, 3, 3]}, 0)
    assert acl.mdl.get_input_data_type(desc, 0) == C.ACL_FLOAT
    assert acl.mdl.get_output_data_type(desc, 0) == C.ACL_FLOAT
    assert acl.mdl.get_input_format(desc, 0) == C.ACL_FORMAT_ND
    assert acl.mdl.get_output_format(desc, 0) == C.ACL_FORMAT_ND
    assert acl.mdl.get_input_name_by_index(desc, 0) == "x"
    assert acl.mdl.get_output_name_by_index(desc, 0) == "y"
    assert acl.mdl.get_input_index_by_name(desc, "x") == (0, 0)
    assert acl.mdl.get_output_index_by_name(desc, "y") == (0, 0)
    assert acl.mdl.get_tensor_real_name(desc, "x") == "x"
    assert acl.mdl.get_dynamic_batch(desc) == ({"batchCount": 0, "batch": []}, 0)
    assert acl.mdl.get_dynamic_hw(desc, -1) == ({"hwCount": 0, "hw": []}, 0)
    assert acl.mdl.get_input_dynamic_gear_count(desc, -1) == (0, 0)
    assert acl.mdl.get_input_dynamic_dims(desc, -1, 0) == ([], 0)

    in_ds, out_ds = acl.mdl.create_dataset(), acl.mdl.create_dataset()
    in_ptr, _ = acl.rt.malloc(96, 0)
    out_ptr, _ = acl.rt.malloc(72, 0)
    in_buf, out_buf = acl.create_data_buffer(in_ptr, 96), acl.create_data_buffer(out_ptr, 72)
    assert acl.mdl.add_dataset_buffer(in_ds, in_buf) == (in_ds, 0)
    assert acl.mdl.add_dataset_buffer(out_ds, out_buf) == (out_ds, 0)
    assert acl.mdl.get_dataset_num_buffers(in_ds) == 1
    assert acl.mdl.get_dataset_buffer(in_ds, 0) == in_buf
    assert acl.mdl.get_dataset_buffer(in_ds, 1) == 0
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4)
    assert acl.rt.memcpy(in_ptr, 96, x.ctypes.data, 96, 1) == 0
    assert acl.mdl.execute(model_id, in_ds, out_ds) == 0
    y = np.empty((2, 3, 3), np.float32)
    assert acl.rt.memcpy(y.ctypes.data, 72, out_ptr, 72, 2) == 0
    np.testing.assert_array_equal(y, graphs.reference(graphs.matmul_add(), {"x": x})[0])

    for buf in (in_buf, out_buf):
        assert acl.destroy_data_buffer(buf) == 0
    assert acl.mdl.destroy_dataset(in_ds) == 0
    assert acl.mdl.destroy_dataset(out_ds) == 0
    assert acl.mdl.destroy_dataset(out_ds) == C.ACL_ERROR_INVALID_PARAM
    assert acl.rt.free(in_ptr) == 0 and acl.rt.free(out_ptr) == 0
    assert acl.mdl.unload(model_id) == 0
    assert acl.mdl.unload(model_id) == C.ACL_ERROR_INVALID_MODEL_ID
    assert acl.mdl.destroy_desc(desc) == 0
    assert acl.mdl.destroy_desc(desc) == C.ACL_ERROR_INVALID_PARAM
    device = snapshot()["devices"][0]
    assert device["live_bytes"] == 0 and device["loads"] == 1 and device["unloads"] == 1


def test_desc_getters_fail_softly(acl, ready, oms):
    desc = acl.mdl.create_desc()
    assert acl.mdl.get_num_inputs(desc) == 0  # not filled yet
    assert "get_desc first" in acl.get_recent_err_msg()
    model_id, _ = acl.mdl.load_from_file(str(oms["static"]))
    assert acl.mdl.get_desc(desc, model_id + 7) == C.ACL_ERROR_INVALID_MODEL_ID
    assert acl.mdl.get_desc(desc, model_id) == 0
    assert acl.mdl.get_input_size_by_index(desc, 5) == 0
    assert acl.mdl.get_input_size_by_index(desc, -1) == 0  # "k" turns -1 into a huge index
    assert acl.mdl.get_input_data_type(desc, 5) == C.ACL_DT_UNDEFINED
    assert acl.mdl.get_input_format(desc, 5) == C.ACL_FORMAT_UNDEFINED
    assert acl.mdl.get_input_name_by_index(desc, 5) == ""
    assert acl.mdl.get_input_dims(desc, 5) == ({}, C.ACL_ERROR_INVALID_PARAM)
    assert acl.mdl.get_output_dims(desc, 5) == ({}, C.ACL_ERROR_INVALID_PARAM)
    assert acl.mdl.get_input_index_by_name(desc, "nope") == (0, C.ACL_ERROR_INVALID_PARAM)
    assert acl.mdl.get_input_index_by_name(desc, "ascend_mbatch_shape_data")[1] != 0
    assert acl.mdl.get_num_outputs(0) == 0
    with pytest.raises(TypeError):
        acl.mdl.get_input_dims(desc, "0")
    with pytest.raises(TypeError):
        acl.mdl.get_input_index_by_name(desc, b"x")


def test_desc_from_file_without_loading(acl, ready, oms):
    desc = acl.mdl.create_desc()
    assert acl.mdl.get_desc_from_file(desc, str(oms["batch"])) == 0
    assert acl.mdl.get_num_inputs(desc) == 2
    assert acl.mdl.get_cur_output_dims(desc, 0)[0]["dims"] == [4, 3, 3]
    assert snapshot()["devices"][0]["loads"] == 0


def test_cur_output_dims_of_an_unloaded_model_fail(acl, ready, oms):
    model_id, _ = acl.mdl.load_from_file(str(oms["static"]))
    desc = acl.mdl.create_desc()
    assert acl.mdl.get_desc(desc, model_id) == 0
    assert acl.mdl.unload(model_id) == 0
    assert acl.mdl.get_cur_output_dims(desc, 0) == ({}, C.ACL_ERROR_INVALID_MODEL_ID)
    assert acl.mdl.get_output_dims(desc, 0)[1] == 0  # the description itself stays readable


def test_load_errors(acl, ready, tmp_path):
    assert acl.mdl.load_from_file(str(tmp_path / "missing.om")) == (0, C.ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID)
    assert acl.mdl.load_from_file(str(tmp_path)) == (0, C.ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID)
    with pytest.raises(TypeError):
        acl.mdl.load_from_file(tmp_path / "x.om")


def test_real_om_is_refused_with_how_to_build_a_sim_om(acl, ready, tmp_path):
    real = tmp_path / "real.om"
    real.write_bytes(b"IMOD" + bytes(252))
    assert acl.mdl.load_from_file(str(real)) == (0, C.ACL_ERROR_DESERIALIZE_MODEL)
    message = acl.get_recent_err_msg()
    assert "real Ascend OM" in message
    assert "ge-plugin atc --model=" in message and "--framework=5" in message
    other = tmp_path / "model.onnx"
    other.write_bytes(b"\x08\x07garbage")
    assert acl.mdl.load_from_file(str(other)) == (0, C.ACL_ERROR_DESERIALIZE_MODEL)
    assert "not a ge-plugin sim OM" in acl.get_recent_err_msg()


def test_corrupt_sim_om_is_a_parse_error(acl, ready, oms, tmp_path):
    data = oms["static"].read_bytes()
    truncated = tmp_path / "t.om"
    truncated.write_bytes(data[:-10])
    assert acl.mdl.load_from_file(str(truncated)) == (0, C.ACL_ERROR_PARSE_MODEL)
    assert "truncated" in acl.get_recent_err_msg()


def test_load_from_mem(acl, ready, oms):
    data = oms["batch"].read_bytes()
    model_id, ret = acl.mdl.load_from_mem(acl.util.bytes_to_ptr(data), len(data))
    assert ret == 0 and model_id > 0
    assert acl.mdl.load_from_mem(acl.util.bytes_to_ptr(data), 0) == (0, C.ACL_ERROR_INVALID_PARAM)
    dev, _ = acl.rt.malloc(64, 0)
    assert acl.mdl.load_from_mem(dev, 64) == (0, C.ACL_ERROR_INVALID_PARAM)


def test_load_needs_a_context(acl, oms):
    assert acl.init() == 0
    assert acl.mdl.load_from_file(str(oms["static"])) == (0, C.ACL_ERROR_RT_CONTEXT_NULL)


def test_model_belongs_to_its_context(acl, ready, load, oms):
    model = load(oms["static"])
    ctx, _ = acl.rt.get_context()
    other, _ = acl.rt.create_context(0)  # now current
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == C.ACL_ERROR_RT_MODEL_CONTEXT
    assert "must share one context" in acl.get_recent_err_msg()
    assert acl.mdl.unload(model.id) == C.ACL_ERROR_RT_MODEL_CONTEXT
    box = []

    def worker():  # a worker thread that forgot set_context
        box.append(acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert box == [C.ACL_ERROR_RT_CONTEXT_NULL]
    assert acl.rt.set_context(ctx) == 0
    model.feed([np.zeros((2, 3, 4), np.float32)])
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == 0
    assert acl.rt.destroy_context(other) == 0


def test_execute_dataset_mismatches(acl, ready, load, oms):
    model = load(oms["static"])
    empty = acl.mdl.create_dataset()
    assert acl.mdl.execute(model.id, empty, model.outputs[0]) == C.ACL_ERROR_GE_PARAM_INVALID
    assert "has 0 buffers" in acl.get_recent_err_msg()
    assert acl.mdl.execute(model.id, model.inputs[0], empty) == C.ACL_ERROR_GE_PARAM_INVALID
    assert acl.mdl.execute(model.id + 9, model.inputs[0], model.outputs[0]) == C.ACL_ERROR_INVALID_MODEL_ID
    assert acl.mdl.execute(model.id, 0, model.outputs[0]) == C.ACL_ERROR_INVALID_PARAM
    with pytest.raises(TypeError):
        acl.mdl.execute(model.id, model.inputs[0])
    with pytest.raises(TypeError):
        acl.mdl.execute(str(model.id), model.inputs[0], model.outputs[0])


def test_execute_rejects_host_memory_and_small_outputs(acl, ready, load, oms):
    model = load(oms["static"])
    x = np.zeros((2, 3, 4), np.float32)
    in_ptr, in_size, in_buf = model.inputs[1][0]
    assert acl.update_data_buffer(in_buf, x.ctypes.data, x.nbytes) == 0
    assert (
        acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == C.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID
    )
    assert "must be device memory" in acl.get_recent_err_msg()
    assert acl.update_data_buffer(in_buf, in_ptr, in_size) == 0
    out_ptr, _, out_buf = model.outputs[1][0]
    assert acl.update_data_buffer(out_buf, out_ptr, 16) == 0
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == C.ACL_ERROR_GE_PARAM_INVALID
    assert "produces 72 bytes" in acl.get_recent_err_msg()


def test_execute_with_destroyed_buffer_fails(acl, ready, load, oms):
    model = load(oms["static"])
    ptr, size, _ = model.inputs[1][0]
    stale = acl.create_data_buffer(ptr, size)
    ds = acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(ds, stale)
    assert acl.destroy_data_buffer(stale) == 0
    assert acl.mdl.execute(model.id, ds, model.outputs[0]) == C.ACL_ERROR_INVALID_PARAM
    assert "destroyed data buffer" in acl.get_recent_err_msg()


def test_empty_output_buffer_is_allocated_by_the_runtime(acl, ready, load, oms, graphs):
    model = load(oms["static"])
    x = np.ones((2, 3, 4), np.float32)
    model.feed([x])
    out = acl.mdl.create_dataset()
    buf = acl.create_data_buffer(0, 0)
    acl.mdl.add_dataset_buffer(out, buf)
    before = snapshot()["devices"][0]["mallocs"]
    assert acl.mdl.execute(model.id, model.inputs[0], out) == 0
    ptr, size = acl.get_data_buffer_addr(buf), acl.get_data_buffer_size_v2(buf)
    assert ptr != 0 and size == 72
    assert snapshot()["devices"][0]["mallocs"] == before + 1
    y = np.empty((2, 3, 3), np.float32)
    assert acl.rt.memcpy(y.ctypes.data, 72, ptr, 72, 2) == 0
    np.testing.assert_allclose(y, x @ graphs.W + graphs.B, rtol=1e-6)
    assert acl.rt.free(ptr) == 0


def test_update_data_buffer_is_seen_by_the_dataset(acl, ready, load, oms, graphs):
    model = load(oms["static"])
    x = np.full((2, 3, 4), 3.0, np.float32)
    other, _ = acl.rt.malloc(96, 0)
    assert acl.rt.memcpy(other, 96, x.ctypes.data, 96, 1) == 0
    assert acl.update_data_buffer(model.inputs[1][0][2], other, 96) == 0
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == 0
    np.testing.assert_allclose(model.fetch([np.float32])[0], x @ graphs.W + graphs.B, rtol=1e-6)


def test_dataset_calls_reject_bad_handles(acl):
    assert acl.mdl.add_dataset_buffer(0, 0)[1] == C.ACL_ERROR_INVALID_PARAM
    ds = acl.mdl.create_dataset()
    assert acl.mdl.add_dataset_buffer(ds, ds) == (ds, C.ACL_ERROR_INVALID_PARAM)
    assert acl.mdl.get_dataset_num_buffers(12345) == 0
    assert acl.mdl.get_dataset_buffer(ds, 0) == 0
    assert acl.mdl.destroy_dataset(0) == C.ACL_ERROR_INVALID_PARAM
    with pytest.raises(TypeError):
        acl.mdl.add_dataset_buffer(ds, None)


def test_no_leak_after_unload(acl, ready, load, oms):
    before = snapshot()["devices"][0]
    model = load(oms["batch"])
    model.release()
    after = snapshot()["devices"][0]
    assert after["live_bytes"] == before["live_bytes"] == 0
    assert after["mallocs"] == after["frees"] == 3
    assert after["loads"] == after["unloads"] == 1


def test_no_allocation_per_request_after_warm_up(acl, ready, load, oms):
    model = load(oms["static"])
    model.run([np.zeros((2, 3, 4), np.float32)])
    before = snapshot()["devices"][0]
    for _ in range(5):
        model.run([np.ones((2, 3, 4), np.float32)])
    after = snapshot()["devices"][0]
    assert after["mallocs"] == before["mallocs"]
    assert after["executes"] == before["executes"] + 5
    assert after["memcpy_calls"]["h2d"] == before["memcpy_calls"]["h2d"] + 5
    assert after["memcpy_bytes"]["d2h"] == before["memcpy_bytes"]["d2h"] + 5 * 72


def test_gear_queries_on_an_invalid_desc(acl, ready):
    desc = acl.mdl.create_desc()
    assert acl.mdl.get_dynamic_batch(desc) == ({}, C.ACL_ERROR_INVALID_PARAM)
    assert acl.mdl.get_dynamic_hw(desc, -1) == ({}, C.ACL_ERROR_INVALID_PARAM)
    assert acl.mdl.get_input_dynamic_gear_count(desc, -1) == (0, C.ACL_ERROR_INVALID_PARAM)
    assert acl.mdl.get_input_dynamic_dims(desc, -1, 4) == (None, C.ACL_ERROR_INVALID_PARAM)
    assert acl.mdl.get_cur_output_dims(desc, 0) == ({}, C.ACL_ERROR_INVALID_PARAM)


def test_execute_async_submit_failures(acl, ready, load, oms):
    model = load(oms["static"])
    assert (
        acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], 424242)
        == C.ACL_ERROR_INVALID_PARAM
    )
    ctx, _ = acl.rt.get_context()
    other, _ = acl.rt.create_context(0)
    foreign, _ = acl.rt.create_stream()
    assert acl.rt.set_context(ctx) == 0
    code = acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], foreign)
    assert code == C.ACL_ERROR_RT_STREAM_CONTEXT
    with pytest.raises(TypeError):
        acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], None)
    assert acl.rt.destroy_context(other) == 0
