"""Gear semantics: the mbatch input, max-gear sizes, -1 dims, setters and their codes, execution per gear."""

from __future__ import annotations

import numpy as np
import pytest

from ge_plugin import acl_constants as C
from ge_plugin.sim import snapshot

MBATCH = "ascend_mbatch_shape_data"


def test_batch_model_description(acl, ready, load, oms):
    model = load(oms["batch"])
    desc = model.desc
    assert acl.mdl.get_num_inputs(desc) == 2
    assert model.mbatch == 1
    assert acl.mdl.get_input_name_by_index(desc, 1) == MBATCH
    assert acl.mdl.get_input_dims(desc, 0) == ({"name": "x", "dimCount": 3, "dims": [-1, 3, 4]}, 0)
    assert acl.mdl.get_input_dims(desc, 1) == ({"name": MBATCH, "dimCount": 1, "dims": [1]}, 0)
    assert acl.mdl.get_input_size_by_index(desc, 0) == 4 * 3 * 4 * 4  # the largest gear
    assert acl.mdl.get_input_size_by_index(desc, 1) == 8
    assert acl.mdl.get_input_data_type(desc, 1) == C.ACL_INT64
    assert acl.mdl.get_output_size_by_index(desc, 0) == 4 * 3 * 3 * 4
    assert acl.mdl.get_output_dims(desc, 0)[0]["dims"] == [4, 3, 3]
    assert acl.mdl.get_dynamic_batch(desc) == ({"batchCount": 3, "batch": [1, 2, 4]}, 0)
    assert acl.mdl.get_input_dynamic_gear_count(desc, -1) == (0, 0)


@pytest.mark.parametrize("batch", [1, 2, 4])
def test_batch_gear_executes_at_that_batch(acl, ready, load, oms, graphs, batch):
    model = load(oms["batch"])
    x = np.random.default_rng(batch).standard_normal((batch, 3, 4)).astype(np.float32)
    assert acl.mdl.set_dynamic_batch_size(model.id, model.inputs[0], model.mbatch, batch) == 0
    (y,) = model.run([x])
    assert y.shape == (batch, 3, 3)
    np.testing.assert_array_equal(y, graphs.reference(graphs.matmul_add(), {"x": x})[0])
    assert snapshot()["devices"][0]["executes_by_gear"] == {str(batch): 1}


def test_gear_is_read_from_the_mbatch_buffer_not_from_the_model(acl, ready, load, oms):
    model = load(oms["batch"])
    second = acl.mdl.create_dataset()
    for ptr, size, _ in model.inputs[1]:
        acl.mdl.add_dataset_buffer(second, acl.create_data_buffer(ptr, size))
    # the same model, two datasets sharing the data buffer but each with its own mbatch memory
    own, _ = acl.rt.malloc(8, 0)
    assert acl.update_data_buffer(acl.mdl.get_dataset_buffer(second, 1), own, 8) == 0
    assert acl.mdl.set_dynamic_batch_size(model.id, model.inputs[0], 1, 4) == 0
    assert acl.mdl.set_dynamic_batch_size(model.id, second, 1, 2) == 0
    model.feed([np.zeros((4, 3, 4), np.float32)])
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == 0
    assert acl.mdl.get_cur_output_dims(model.desc, 0)[0]["dims"] == [4, 3, 3]
    assert acl.mdl.execute(model.id, second, model.outputs[0]) == 0
    assert acl.mdl.get_cur_output_dims(model.desc, 0)[0]["dims"] == [2, 3, 3]
    # the gear really sits in device memory: overwrite it by hand
    value = np.array([1], dtype=np.int64)
    assert acl.rt.memcpy(own, 8, value.ctypes.data, 8, 1) == 0
    assert acl.mdl.execute(model.id, second, model.outputs[0]) == 0
    assert snapshot()["devices"][0]["executes_by_gear"] == {"4": 1, "2": 1, "1": 1}


def test_execute_before_any_gear_is_set_fails(acl, ready, load, oms):
    model = load(oms["batch"])
    model.feed([np.zeros((4, 3, 4), np.float32)])
    assert (
        acl.mdl.execute(model.id, model.inputs[0], model.outputs[0])
        == C.ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID
    )
    message = acl.get_recent_err_msg()
    assert "never set" in message and "set_dynamic_batch_size" in message


def test_set_dynamic_batch_size_codes(acl, ready, load, oms):
    model = load(oms["batch"])
    ds = model.inputs[0]
    assert (
        acl.mdl.set_dynamic_batch_size(model.id, ds, model.mbatch, 3)
        == C.ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID
    )
    assert "its gears are [1, 2, 4]" in acl.get_recent_err_msg()
    assert acl.mdl.set_dynamic_batch_size(model.id, ds, 0, 2) == C.ACL_ERROR_INVALID_PARAM
    assert "is not the ascend_mbatch_shape_data input" in acl.get_recent_err_msg()
    assert acl.mdl.set_dynamic_batch_size(model.id + 5, ds, model.mbatch, 2) == C.ACL_ERROR_INVALID_MODEL_ID
    assert acl.mdl.set_input_dynamic_dims(model.id, ds, model.mbatch, {"dimCount": 1, "dims": [2]}) == (
        C.ACL_ERROR_INVALID_PARAM
    )
    assert "use acl.mdl.set_dynamic_batch_size" in acl.get_recent_err_msg()
    short = acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(short, model.inputs[1][0][2])
    assert acl.mdl.set_dynamic_batch_size(model.id, short, model.mbatch, 2) == C.ACL_ERROR_INVALID_PARAM
    with pytest.raises(TypeError):
        acl.mdl.set_dynamic_batch_size(model.id, ds, model.mbatch, 2.0)


def test_mbatch_buffer_must_be_device_memory_of_the_right_size(acl, ready, load, oms):
    model = load(oms["batch"])
    mb_ptr, _, mb_buf = model.inputs[1][model.mbatch]
    assert acl.update_data_buffer(mb_buf, mb_ptr, 4) == 0
    code = acl.mdl.set_dynamic_batch_size(model.id, model.inputs[0], model.mbatch, 2)
    assert code == C.ACL_ERROR_GE_DYNAMIC_INPUT_LENGTH_INVALID
    host = np.zeros(1, np.int64)
    assert acl.update_data_buffer(mb_buf, host.ctypes.data, 8) == 0
    code = acl.mdl.set_dynamic_batch_size(model.id, model.inputs[0], model.mbatch, 2)
    assert code == C.ACL_ERROR_GE_DYNAMIC_INPUT_ADDR_INVALID


def test_setter_on_a_static_model_is_model_not_dynamic(acl, ready, load, oms):
    model = load(oms["static"])
    assert acl.mdl.set_dynamic_batch_size(model.id, model.inputs[0], 1, 2) == C.ACL_ERROR_MODEL_NOT_DYNAMIC


def test_input_buffer_must_hold_the_gear(acl, ready, load, oms):
    model = load(oms["batch"])
    ptr, _, buf = model.inputs[1][0]
    assert acl.update_data_buffer(buf, ptr, 2 * 3 * 4 * 4) == 0  # holds batch 2, not 4
    assert acl.mdl.set_dynamic_batch_size(model.id, model.inputs[0], model.mbatch, 2) == 0
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == 0
    assert acl.mdl.set_dynamic_batch_size(model.id, model.inputs[0], model.mbatch, 4) == 0
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == C.ACL_ERROR_GE_PARAM_INVALID
    assert "gear 4 needs 192 bytes" in acl.get_recent_err_msg()


def test_dims_model_description(acl, ready, load, oms):
    model = load(oms["dims"])
    desc = model.desc
    assert acl.mdl.get_num_inputs(desc) == 3 and model.mbatch == 2
    assert acl.mdl.get_input_dims(desc, 0)[0]["dims"] == [-1, -1]
    assert acl.mdl.get_input_dims(desc, 2)[0]["dims"] == [4]
    assert acl.mdl.get_input_size_by_index(desc, 2) == 32
    assert acl.mdl.get_input_size_by_index(desc, 0) == 2 * 8 * 8
    assert acl.mdl.get_output_size_by_index(desc, 0) == 2 * 8 * 4
    assert acl.mdl.get_output_size_by_index(desc, 1) == 2 * 8
    assert acl.mdl.get_dynamic_batch(desc) == ({"batchCount": 0, "batch": []}, 0)
    count, ret = acl.mdl.get_input_dynamic_gear_count(desc, -1)
    assert (count, ret) == (4, 0)
    gears, ret = acl.mdl.get_input_dynamic_dims(desc, -1, count)
    assert ret == 0
    assert gears == [
        {"name": "", "dimCount": 4, "dims": [1, 4, 1, 4]},
        {"name": "", "dimCount": 4, "dims": [1, 8, 1, 8]},
        {"name": "", "dimCount": 4, "dims": [2, 4, 2, 4]},
        {"name": "", "dimCount": 4, "dims": [2, 8, 2, 8]},
    ]
    assert acl.mdl.get_input_dynamic_dims(desc, -1, 2) == (None, C.ACL_ERROR_INVALID_PARAM)
    assert acl.mdl.get_input_dynamic_dims(desc, -1, 5000) == (None, C.ACL_ERROR_INVALID_PARAM)


@pytest.mark.parametrize("batch, seq", [(1, 4), (1, 8), (2, 4), (2, 8)])
def test_dims_grid_gear_executes_at_batch_and_seq(acl, ready, load, oms, graphs, batch, seq):
    model = load(oms["dims"])
    rng = np.random.default_rng(batch * seq)
    ids = rng.integers(0, 100, (batch, seq)).astype(np.int64)
    mask = rng.integers(0, 2, (batch, seq)).astype(np.int64)
    dims = {"dimCount": 4, "name": "", "dims": [batch, seq, batch, seq]}
    assert acl.mdl.set_input_dynamic_dims(model.id, model.inputs[0], model.mbatch, dims) == 0
    summed, count = model.run([ids, mask], [np.float32, np.int64])
    want = graphs.reference(graphs.ids_mask(), {"ids": ids, "mask": mask})
    np.testing.assert_array_equal(summed, want[0])
    np.testing.assert_array_equal(count, want[1])
    assert acl.mdl.get_cur_output_dims(model.desc, 1)[0]["dims"] == [batch]


def test_set_input_dynamic_dims_codes(acl, ready, load, oms):
    model = load(oms["dims"])
    ds, idx = model.inputs[0], model.mbatch
    bad = acl.mdl.set_input_dynamic_dims(model.id, ds, idx, {"dimCount": 4, "name": "", "dims": [3, 4, 3, 4]})
    assert bad == C.ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID
    assert "[[1, 4, 1, 4], [1, 8, 1, 8]" in acl.get_recent_err_msg()
    assert acl.mdl.set_input_dynamic_dims(model.id, ds, idx, {"dimCount": 3, "dims": [1, 4, 1, 4]}) == (
        C.ACL_ERROR_INVALID_PARAM
    )
    with pytest.raises(TypeError, match="not a list"):
        acl.mdl.set_input_dynamic_dims(model.id, ds, idx, {"dimCount": 4})
    assert acl.mdl.set_dynamic_batch_size(model.id, ds, idx, 1) == C.ACL_ERROR_INVALID_PARAM
    with pytest.raises(TypeError):
        acl.mdl.set_input_dynamic_dims(model.id, ds, idx, [1, 4, 1, 4])


def test_hw_model_gears(acl, ready, load, oms, graphs):
    model = load(oms["hw"])
    desc = model.desc
    assert acl.mdl.get_input_dims(desc, 0)[0]["dims"] == [1, 3, -1, -1]
    assert acl.mdl.get_input_format(desc, 0) == C.ACL_FORMAT_NCHW
    assert acl.mdl.get_dynamic_hw(desc, -1) == ({"hwCount": 2, "hw": [[2, 2], [4, 6]]}, 0)
    assert acl.mdl.set_dynamic_hw_size(model.id, model.inputs[0], model.mbatch, 3, 3) == (
        C.ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID
    )
    assert acl.mdl.set_dynamic_hw_size(model.id, model.inputs[0], model.mbatch, 2, 2) == 0
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 2, 2)
    (y,) = model.run([x])
    np.testing.assert_array_equal(y, x * 3 + 1)


def test_cur_output_dims_before_any_gear_is_the_largest(acl, ready, load, oms):
    model = load(oms["dims"])
    assert acl.mdl.get_cur_output_dims(model.desc, 0)[0]["dims"] == [2, 8]
