"""The pyACL calls acllite and the public samples use that the simulator gained, against their documented form.

Each test names the wrapper of the open-source pyACL extension (hicann/runtime ``python/pyACL``) whose
``PyArg_ParseTuple`` format and ``Py_BuildValue`` return it checks, and the CANN doc or source of the
semantics: ``acl.app_log`` (acllite's logger), ``acl.mdl.set_dataset_tensor_desc`` /
``get_dataset_tensor_desc`` (the dynamic-shape samples), ``acl.mdl.get_aipp_type`` (samples that look for
AIPP inputs), ``acl.rt.create_event_with_flag`` and the deprecated ``acl.rt.query_event``.
"""

from __future__ import annotations

import logging
import os
import re
import threading

import numpy as np
import pytest

from ge_plugin import acl_constants as C
from ge_plugin.sim import _state

# -- acl.app_log (py_init_acl.cpp WrapAclAppLog: "is", returns None; levels aclLogLevel 0..3) ---------------


def test_app_log_returns_none_at_every_level_before_and_after_init(acl):
    assert [acl.app_log(level, "message") for level in range(4)] == [None] * 4
    assert acl.init() == 0
    assert acl.app_log(3, "after init") is None
    assert acl.app_log(np.int32(2), 'a numpy level is an int to "i"') is None


def test_app_log_refuses_what_its_format_refuses(acl):
    with pytest.raises(TypeError):
        acl.app_log(3, b"bytes is not a str")
    with pytest.raises(TypeError):
        acl.app_log(3.0, "a float is not a C int")
    with pytest.raises(TypeError):
        acl.app_log("3", "a str is not a C int")
    with pytest.raises(TypeError):
        acl.app_log(3)
    with pytest.raises(ValueError):
        acl.app_log(3, "a NUL \0 inside")


def test_app_log_records_at_the_matching_level_from_the_global_level_up(acl, caplog, monkeypatch):
    monkeypatch.setenv("ASCEND_GLOBAL_LOG_LEVEL", "1")
    with caplog.at_level(logging.DEBUG, logger="ge_plugin.sim.app_log"):
        for level in range(4):
            acl.app_log(level, f"level {level}")
        acl.app_log(9, "not an aclLogLevel")
    assert [(r.levelno, r.getMessage().split("] ")[1]) for r in caplog.records] == [
        (logging.INFO, "level 1"),
        (logging.WARNING, "level 2"),
        (logging.ERROR, "level 3"),
    ]
    assert caplog.records[0].getMessage().startswith(f"[{os.path.relpath(__file__)}:")


def test_app_log_default_level_is_error_and_stdout_prints_cann_lines(acl, capsys, monkeypatch):
    monkeypatch.delenv("ASCEND_GLOBAL_LOG_LEVEL", raising=False)
    monkeypatch.setenv("ASCEND_SLOG_PRINT_TO_STDOUT", "1")
    acl.app_log(2, "a warning is below the default ERROR level")
    acl.app_log(3, "model load failed")
    out = capsys.readouterr().out
    assert "warning" not in out
    pattern = rf"^\[ERROR\] APP\({os.getpid()},[^)]*\):\d{{4}}-\d\d-\d\d-\d\d:\d\d:\d\d\.\d{{6}} \[[^]]+\]model load failed$"
    assert re.match(pattern, out.strip()), out


def test_app_log_stays_off_stderr_without_logging_configured(acl, capfd):
    acl.app_log(3, "goes to the application log, not the terminal")
    assert capfd.readouterr().err == ""


# -- acl.mdl.set_dataset_tensor_desc ("kkk" -> "ki") / get_dataset_tensor_desc ("kk" -> "k") -------------------


def _dataset_with(acl, buffers: int) -> int:
    ds = acl.mdl.create_dataset()
    for _ in range(buffers):
        assert acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(0, 0))[1] == 0
    return ds


def test_set_dataset_tensor_desc_returns_the_dataset_and_ret_and_copies_the_desc(acl):
    ds = _dataset_with(acl, 2)
    desc = acl.create_tensor_desc(C.ACL_FLOAT, [2, 3, 4], C.ACL_FORMAT_ND)
    assert acl.mdl.set_dataset_tensor_desc(ds, desc, 1) == (ds, 0)
    assert acl.mdl.get_dataset_tensor_desc(ds, 0) == 0  # none set there
    held = acl.mdl.get_dataset_tensor_desc(ds, 1)
    assert held not in (0, desc)  # aclmdlSetDatasetTensorDesc keeps its own copy
    acl.destroy_tensor_desc(desc)  # so destroying the caller's is fine
    assert acl.get_tensor_desc_num_dims(held) == 3
    assert [acl.get_tensor_desc_dim_v2(held, i) for i in range(3)] == [(2, 0), (3, 0), (4, 0)]


def test_set_dataset_tensor_desc_index_must_be_an_added_buffer(acl):
    ds = _dataset_with(acl, 1)
    desc = acl.create_tensor_desc(C.ACL_FLOAT, [1], C.ACL_FORMAT_ND)
    assert acl.mdl.set_dataset_tensor_desc(ds, desc, 1) == (ds, C.ACL_ERROR_INVALID_PARAM)
    assert "smaller than the dataset's 1 buffers" in acl.get_recent_err_msg()
    assert acl.mdl.get_dataset_tensor_desc(ds, 5) == 0
    assert acl.mdl.set_dataset_tensor_desc(ds, ds, 0) == (ds, C.ACL_ERROR_INVALID_PARAM)
    assert "is a dataset handle, not a tensor description" in acl.get_recent_err_msg()


def test_a_null_tensor_desc_clears_the_entry_and_destroy_dataset_frees_its_copies(acl):
    ds = _dataset_with(acl, 1)
    desc = acl.create_tensor_desc(C.ACL_FLOAT, [1], C.ACL_FORMAT_ND)
    assert acl.mdl.set_dataset_tensor_desc(ds, desc, 0) == (ds, 0)
    held = acl.mdl.get_dataset_tensor_desc(ds, 0)
    assert acl.mdl.set_dataset_tensor_desc(ds, 0, 0) == (ds, 0)
    assert acl.mdl.get_dataset_tensor_desc(ds, 0) == 0
    assert acl.get_tensor_desc_num_dims(held) == 0  # the dataset's copy is gone
    assert acl.mdl.set_dataset_tensor_desc(ds, desc, 0) == (ds, 0)
    held = acl.mdl.get_dataset_tensor_desc(ds, 0)
    assert acl.mdl.destroy_dataset(ds) == 0
    assert (
        "not a live tensor description" in (acl.get_tensor_desc_num_dims(held), acl.get_recent_err_msg())[1]
    )


def test_dataset_tensor_desc_calls_refuse_wrong_types(acl):
    with pytest.raises(TypeError):
        acl.mdl.set_dataset_tensor_desc(1, 2, "0")
    with pytest.raises(TypeError):
        acl.mdl.set_dataset_tensor_desc(1, 2)
    with pytest.raises(TypeError):
        acl.mdl.get_dataset_tensor_desc(1, 2.0)


def test_execute_with_input_descs_fills_the_output_descs(acl, load, oms, graphs):
    model = load(oms["static"])
    in_ds, out_ds = model.inputs[0], model.outputs[0]
    desc = acl.create_tensor_desc(C.ACL_FLOAT, [2, 3, 4], C.ACL_FORMAT_ND)
    assert acl.mdl.set_dataset_tensor_desc(in_ds, desc, 0) == (in_ds, 0)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    (y,) = model.run([x])
    np.testing.assert_allclose(y, graphs.reference(graphs.matmul_add(), {"x": x})[0], rtol=1e-6)
    out = acl.mdl.get_dataset_tensor_desc(out_ds, 0)
    assert out != 0
    dims = [acl.get_tensor_desc_dim_v2(out, i)[0] for i in range(acl.get_tensor_desc_num_dims(out))]
    assert dims == [2, 3, 3] and acl.get_tensor_desc_type(out) == C.ACL_FLOAT
    assert acl.get_tensor_desc_size(out) == y.nbytes


def test_execute_with_an_input_desc_of_another_shape_is_refused(acl, load, oms):
    model = load(oms["static"])
    desc = acl.create_tensor_desc(C.ACL_FLOAT, [1, 3, 4], C.ACL_FORMAT_ND)
    assert acl.mdl.set_dataset_tensor_desc(model.inputs[0], desc, 0)[1] == 0
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == C.ACL_ERROR_GE_PARAM_INVALID
    assert "says [1, 3, 4]; model" in acl.get_recent_err_msg()


def test_input_descs_and_gear_setters_do_not_mix(acl, load, oms, ready):
    model = load(oms["batch"])
    desc = acl.create_tensor_desc(C.ACL_FLOAT, [4, 3, 4], C.ACL_FORMAT_ND)
    assert acl.mdl.set_dataset_tensor_desc(model.inputs[0], desc, 0)[1] == 0
    assert acl.mdl.set_dynamic_batch_size(model.id, model.inputs[0], model.mbatch, 4) == 0
    assert (
        acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == C.ACL_ERROR_INVALID_PARAM
    )
    assert "with acl.mdl.set_dynamic_batch_size instead" in acl.get_recent_err_msg()


# -- acl.mdl.get_aipp_type (mdl_wrap.cpp WrapAclMdlGetAippType: "Ik" -> "iki") ---------------------------


def test_get_aipp_type_says_no_aipp_with_the_invalid_index(acl, load, oms):
    model = load(oms["batch"])
    assert [acl.mdl.get_aipp_type(model.id, i) for i in range(2)] == [(0, 0xFFFFFFFF, 0)] * 2


def test_get_aipp_type_codes(acl, load, oms):
    model = load(oms["static"])
    assert acl.mdl.get_aipp_type(model.id, 1) == (0, 0, C.ACL_ERROR_INVALID_PARAM)
    assert acl.mdl.get_aipp_type(model.id + 100, 0) == (0, 0, C.ACL_ERROR_INVALID_MODEL_ID)
    with pytest.raises(TypeError):
        acl.mdl.get_aipp_type(model.id, "0")


# -- acl.rt.create_event_with_flag ("I" -> "ki") and query_event ("k" -> "Ii", aclrtEventStatus) --------


@pytest.mark.parametrize("flag", [0, 0x1, 0x8, 0x9])
def test_create_event_with_flag_gives_an_event_that_works(acl, ready, flag):
    start, ret = acl.rt.create_event_with_flag(flag)
    end, _ = acl.rt.create_event_with_flag(flag)
    assert ret == 0 and start != 0
    assert acl.rt.record_event(start, ready) == 0 and acl.rt.record_event(end, ready) == 0
    assert acl.rt.synchronize_event(end) == 0
    ms, ret = acl.rt.event_elapsed_time(start, end)
    assert ret == 0 and ms >= 0
    assert acl.rt.destroy_event(start) == 0 and acl.rt.destroy_event(end) == 0


def test_create_event_with_flag_codes(acl, ready):
    assert acl.rt.create_event_with_flag(0x4) == (0, C.ACL_ERROR_INVALID_PARAM)
    assert "not aclrtEventFlag values" in acl.get_recent_err_msg()
    result = []
    thread = threading.Thread(target=lambda: result.append(acl.rt.create_event_with_flag(0x8)))
    thread.start()
    thread.join()
    assert result == [(0, C.ACL_ERROR_RT_CONTEXT_NULL)]
    with pytest.raises(TypeError):
        acl.rt.create_event_with_flag(8.0)


def test_query_event_follows_the_latest_record(acl, ready):
    event, _ = acl.rt.create_event()
    assert acl.rt.query_event(event) == (0, 0)  # never recorded: nothing to wait for
    gate = threading.Event()
    _state.stream(ready, _state.current_context()).submit(gate.wait)
    assert acl.rt.record_event(event, ready) == 0
    assert acl.rt.query_event(event) == (1, 0)  # ACL_EVENT_STATUS_NOT_READY
    gate.set()
    assert acl.rt.synchronize_stream(ready) == 0
    assert acl.rt.query_event(event) == (0, 0)  # ACL_EVENT_STATUS_COMPLETE
    assert acl.rt.destroy_event(event) == 0
    assert acl.rt.query_event(event) == (0, C.ACL_ERROR_INVALID_PARAM)
    with pytest.raises(TypeError):
        acl.rt.query_event()
