"""Every fault-injection knob: the Python API, the environment, the init JSON, latency, async faults."""

from __future__ import annotations

import inspect
import json
import time

import numpy as np
import pytest

from ge_plugin import acl_constants as C
from ge_plugin.sim import device_time, faults

ASYNC = {"rt.memcpy_async", "rt.memset_async", "mdl.execute_async"} | {
    f"media.dvpp_{name}"
    for name in (
        "jpeg_decode_async",
        "png_decode_async",
        "jpeg_encode_async",
        "vpc_resize_async",
        "vpc_crop_async",
        "vpc_crop_resize_async",
        "vpc_crop_and_paste_async",
    )
}
_ARGS_BY_NAME = {"model_path": "x.om", "name": "x", "dims": {"dimCount": 1, "dims": [1]}, "fn": print}


def _call(acl, api: str):
    module, _, name = api.rpartition(".")
    fn = getattr(getattr(acl, module) if module else acl, name)
    params = [p for p in inspect.signature(fn).parameters.values() if p.kind is p.POSITIONAL_ONLY]
    args = [_ARGS_BY_NAME.get(p.name, 1) for p in params]
    if name == "create_tensor_desc":
        args = [0, [1], 2]
    return fn(*args)


@pytest.mark.parametrize("api", sorted(faults.FAULTABLE - ASYNC))
def test_every_faultable_call_returns_the_injected_code(acl, api):
    if api not in ("init", "finalize"):
        assert acl.init() == 0
    faults.inject(api, 507899)
    result = _call(acl, api)
    if isinstance(result, tuple):
        assert result[-1] == 507899, result
    elif (
        api.rpartition(".")[2].removeprefix("dvpp_").startswith("create_")
        and api != "media.dvpp_create_channel"
    ):
        assert result == 0  # calls that return a bare handle return a null one
    else:
        assert result == 507899
    assert f"fault injected by the ge-plugin simulator into acl.{api}" in acl.get_recent_err_msg()


def test_nth_fails_only_that_call(acl, ready):
    faults.inject("rt.malloc", C.ACL_ERROR_RT_MEMORY_ALLOCATION, nth=2)
    results = [acl.rt.malloc(64, 0)[1] for _ in range(4)]
    assert results == [0, C.ACL_ERROR_RT_MEMORY_ALLOCATION, 0, 0]


def test_every_fails_each_nth_call(acl, ready):
    faults.inject("acl.rt.malloc", 207001, every=2)
    assert [acl.rt.malloc(64, 0)[1] for _ in range(5)] == [0, 207001, 0, 207001, 0]
    faults.clear("rt.malloc")
    assert acl.rt.malloc(64, 0)[1] == 0


def test_counting_starts_when_the_fault_is_installed(acl, ready):
    for _ in range(3):
        acl.rt.malloc(64, 0)
    faults.inject("rt.malloc", 207001, nth=1)
    assert acl.rt.malloc(64, 0)[1] == 207001


def test_inject_rejects_bad_rules():
    with pytest.raises(ValueError, match="not a simulated call"):
        faults.inject("rt.mallocc", 1)
    with pytest.raises(ValueError, match="non-zero"):
        faults.inject("rt.malloc", 0)
    with pytest.raises(ValueError, match="not both"):
        faults.inject("rt.malloc", 1, nth=1, every=2)
    with pytest.raises(ValueError, match="positive"):
        faults.inject("rt.malloc", 1, nth=0)
    with pytest.raises(ValueError):
        faults.set_execute_latency_ms(-1)


def _ready_model(acl, model_class, path):
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    return model_class(acl, path)


def test_environment_faults_are_read_by_init(acl, monkeypatch, model_class, oms):
    monkeypatch.setenv(
        "GE_PLUGIN_SIM_FAULTS", "mdl.execute:nth=2:code=507011; rt.malloc:every=100:code=207001"
    )
    model = _ready_model(acl, model_class, oms["static"])
    model.feed([np.zeros((2, 3, 4), np.float32)])
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == 0
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == C.ACL_ERROR_RT_MODEL_EXECUTE
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == 0


def test_environment_fault_typos_fail_init(acl, monkeypatch):
    monkeypatch.setenv("GE_PLUGIN_SIM_FAULTS", "mdl.execute:n=2:code=507011")
    assert acl.init() == C.ACL_ERROR_INVALID_PARAM
    assert "GE_PLUGIN_SIM_FAULTS" in acl.get_recent_err_msg()
    monkeypatch.setenv("GE_PLUGIN_SIM_FAULTS", "mdl.exec:code=507011")
    assert acl.init() == C.ACL_ERROR_INVALID_PARAM
    assert "mdl.exec" in acl.get_recent_err_msg()
    monkeypatch.setenv("GE_PLUGIN_SIM_FAULTS", "mdl.execute:nth=2")
    assert acl.init() == C.ACL_ERROR_INVALID_PARAM
    assert "missing code" in acl.get_recent_err_msg()


def test_init_json_section_installs_faults_and_latency(acl, tmp_path):
    config = tmp_path / "acl.json"
    section = {"faults": [{"api": "rt.create_stream", "every": 1, "code": 207008}], "execute_latency_ms": 1.5}
    config.write_text(json.dumps({"ge_plugin_sim": section}))
    assert acl.init(str(config)) == 0
    assert acl.rt.set_device(0) == 0
    assert acl.rt.create_stream() == (0, 207008)
    assert device_time.profile() == device_time.LatencyProfile(base_ms=1.5)


def test_init_json_bad_fault_rule_is_a_parse_error(acl, tmp_path):
    config = tmp_path / "acl.json"
    config.write_text(json.dumps({"ge_plugin_sim": {"faults": [{"api": "rt.malloc", "code": 1, "when": 3}]}}))
    assert acl.init(str(config)) == C.ACL_ERROR_PARSE_FILE
    assert "unknown keys when" in acl.get_recent_err_msg()
    assert not faults.RULES


def test_execute_latency_from_environment_delays_execute(acl, monkeypatch, model_class, oms, mode):
    monkeypatch.setenv("GE_PLUGIN_SIM_EXECUTE_LATENCY_MS", "120")
    model = _ready_model(acl, model_class, oms["static"])
    model.feed([np.zeros((2, 3, 4), np.float32)])
    start = time.perf_counter()
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == 0
    assert time.perf_counter() - start >= 0.12


def test_execute_async_fault_surfaces_at_synchronize(acl, ready, load, oms, mode):
    model = load(oms["static"])
    model.feed([np.zeros((2, 3, 4), np.float32)])
    faults.inject("mdl.execute_async", C.ACL_ERROR_RT_AICORE_EXCEPTION, nth=1)
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    assert acl.rt.synchronize_stream(ready) == C.ACL_ERROR_RT_AICORE_EXCEPTION
    assert "fault injected" in acl.get_recent_err_msg()
    assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], ready) == 0
    assert acl.rt.synchronize_stream(ready) == 0


def test_memcpy_async_fault_surfaces_at_synchronize(acl, ready, mode):
    dev, _ = acl.rt.malloc(64, 0)
    host, _ = acl.rt.malloc_host(64)
    faults.inject("rt.memcpy_async", 507053, every=1)
    assert acl.rt.memcpy_async(dev, 64, host, 64, 1, ready) == 0
    assert acl.rt.synchronize_stream(ready) == 507053


def test_synchronize_itself_can_fail(acl, ready, mode):
    faults.inject("rt.synchronize_stream", C.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, nth=1)
    assert acl.rt.synchronize_stream(ready) == C.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
    assert acl.rt.synchronize_stream(ready) == 0
