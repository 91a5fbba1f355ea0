"""Conformance of the top-level calls: init/finalize rules, data buffers, tensor descs, versions, messages."""

from __future__ import annotations

import json
import sys

import pytest

from ge_plugin import acl_constants as C


def test_import_forms_give_the_same_module(acl):
    import ge_plugin.sim.acl as by_attribute
    from ge_plugin.sim import acl as by_from

    assert by_attribute is by_from is acl
    assert acl.rt.__name__ == "ge_plugin.sim.rt"
    assert acl.mdl.__name__ == "ge_plugin.sim.mdl"
    assert acl.util.__name__ == "ge_plugin.sim.util"


def test_install_makes_import_acl_the_simulator(acl, monkeypatch):
    import ge_plugin.sim

    monkeypatch.delitem(sys.modules, "acl", raising=False)
    ge_plugin.sim.install()
    import acl as imported

    assert imported is acl
    assert imported.rt.malloc is acl.rt.malloc


def test_modules_export_no_constants_like_pyacl(acl):
    for module in (acl, acl.rt, acl.mdl, acl.util, acl.media):
        public = [n for n in dir(module) if not n.startswith("_")]
        assert public, module
        for name in public:
            value = getattr(module, name)
            assert callable(value) or name in ("rt", "mdl", "media", "util"), (
                f"{module.__name__}.{name} is a constant"
            )
        assert sorted(module.__all__) == sorted(public)


def test_init_succeeds_once_then_repeat_initialize(acl):
    assert acl.init() == 0
    assert acl.init() == C.ACL_ERROR_REPEAT_INITIALIZE
    assert "once per process" in acl.get_recent_err_msg()


def test_init_after_finalize_is_refused(acl):
    assert acl.init() == 0
    assert acl.finalize() == 0
    assert acl.init() == C.ACL_ERROR_REPEAT_INITIALIZE


def test_finalize_codes(acl):
    assert acl.finalize() == C.ACL_ERROR_UNINITIALIZE
    assert acl.init() == 0
    assert acl.finalize() == 0
    assert acl.finalize() == C.ACL_ERROR_REPEAT_FINALIZE


def test_calls_before_init_return_uninitialize(acl):
    assert acl.rt.set_device(0) == C.ACL_ERROR_UNINITIALIZE
    assert acl.rt.malloc(64, 0) == (0, C.ACL_ERROR_UNINITIALIZE)
    assert acl.rt.get_device_count() == (0, C.ACL_ERROR_UNINITIALIZE)
    assert acl.mdl.load_from_file("x.om") == (0, C.ACL_ERROR_UNINITIALIZE)
    assert "acl.init() has not been called" in acl.get_recent_err_msg()


def test_host_structures_work_before_init(acl):
    buf = acl.create_data_buffer(0, 0)
    ds = acl.mdl.create_dataset()
    assert buf and ds
    assert acl.mdl.add_dataset_buffer(ds, buf) == (ds, 0)
    assert acl.mdl.get_dataset_num_buffers(ds) == 1


def test_init_with_config_file(acl, tmp_path):
    config = tmp_path / "acl.json"
    config.write_text(json.dumps({"dump": {}, "ge_plugin_sim": {"devices": 2, "soc_version": "Ascend310P3"}}))
    assert acl.init(str(config)) == 0
    assert acl.rt.get_device_count() == (2, 0)
    assert acl.get_soc_name() == "Ascend310P3"


def test_init_config_errors(acl, tmp_path):
    assert acl.init(str(tmp_path / "missing.json")) == C.ACL_ERROR_INVALID_FILE
    assert "missing.json" in acl.get_recent_err_msg()
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert acl.init(str(bad)) == C.ACL_ERROR_PARSE_FILE
    typo = tmp_path / "typo.json"
    typo.write_text(json.dumps({"ge_plugin_sim": {"device": 2}}))
    assert acl.init(str(typo)) == C.ACL_ERROR_PARSE_FILE
    assert "unknown keys device" in acl.get_recent_err_msg()
    assert acl.init() == 0  # none of the failures counted as the one init


def test_init_environment_errors_name_the_variable(acl, monkeypatch):
    monkeypatch.setenv("GE_PLUGIN_SIM_DEVICES", "lots")
    assert acl.init() == C.ACL_ERROR_INVALID_PARAM
    assert "GE_PLUGIN_SIM_DEVICES='lots'" in acl.get_recent_err_msg()


def test_init_rejects_wrong_argument_types(acl):
    with pytest.raises(TypeError):
        acl.init(None)
    with pytest.raises(TypeError):
        acl.init(b"/tmp/x.json")
    with pytest.raises(TypeError):
        acl.init("a", "b")


def test_version_and_soc_name(acl, monkeypatch):
    major, minor, patch, ret = acl.get_version()
    assert ret == 0 and major >= 5 and minor >= 0 and patch >= 0
    assert acl.get_soc_name() is None  # aclrtGetSocName returns NULL before init
    monkeypatch.setenv("GE_PLUGIN_SIM_SOC", "Ascend910B4")
    assert acl.init() == 0
    assert acl.get_soc_name() == "Ascend910B4"


def test_recent_err_msg_is_per_thread_newest_first_and_cleared(acl):
    import threading

    assert acl.get_recent_err_msg() is None
    assert acl.rt.malloc(64, 0)[1] == C.ACL_ERROR_UNINITIALIZE
    assert acl.rt.free(1 << 48)  # a second failure stacks on top
    seen = []
    thread = threading.Thread(target=lambda: seen.append(acl.get_recent_err_msg()))
    thread.start()
    thread.join()
    assert seen == [None]
    text = acl.get_recent_err_msg()
    assert text.index("acl.rt.free") < text.index("acl.rt.malloc")
    assert acl.get_recent_err_msg() is None


def test_data_buffer_lifecycle(acl):
    buf = acl.create_data_buffer(0x1000, 256)
    assert acl.get_data_buffer_addr(buf) == 0x1000
    assert acl.get_data_buffer_size_v2(buf) == 256
    assert acl.get_data_buffer_size(buf) == 256
    assert acl.update_data_buffer(buf, 0x2000, 512) == 0
    assert (acl.get_data_buffer_addr(buf), acl.get_data_buffer_size_v2(buf)) == (0x2000, 512)
    assert acl.destroy_data_buffer(buf) == 0
    assert acl.destroy_data_buffer(buf) == C.ACL_ERROR_INVALID_PARAM
    assert acl.get_data_buffer_addr(buf) == 0
    assert acl.get_data_buffer_size_v2(buf) == 0
    assert acl.update_data_buffer(buf, 1, 1) == C.ACL_ERROR_INVALID_PARAM


def test_handles_of_the_wrong_kind_are_named(acl):
    ds = acl.mdl.create_dataset()
    assert acl.destroy_data_buffer(ds) == C.ACL_ERROR_INVALID_PARAM
    assert "is a dataset handle, not a data buffer" in acl.get_recent_err_msg()


def test_data_buffer_rejects_wrong_types(acl):
    with pytest.raises(TypeError):
        acl.create_data_buffer(1.5, 4)
    with pytest.raises(TypeError):
        acl.create_data_buffer(True, 4)
    with pytest.raises(TypeError):
        acl.create_data_buffer("0x10", 4)
    with pytest.raises(TypeError):
        acl.create_data_buffer(data=1, size=2)
    with pytest.raises(TypeError):
        acl.get_data_buffer_addr(None)


def test_data_type_size(acl):
    assert acl.data_type_size(C.ACL_FLOAT) == 4
    assert acl.data_type_size(C.ACL_FLOAT16) == 2
    assert acl.data_type_size(C.ACL_INT64) == 8
    assert acl.data_type_size(C.ACL_BF16) == 2
    assert acl.data_type_size(C.ACL_STRING) == 0
    with pytest.raises(TypeError):
        acl.data_type_size(0.0)


def test_tensor_desc_getters(acl):
    desc = acl.create_tensor_desc(C.ACL_FLOAT16, [2, 3, 4], C.ACL_FORMAT_ND)
    assert desc
    assert acl.get_tensor_desc_type(desc) == C.ACL_FLOAT16
    assert acl.get_tensor_desc_format(desc) == C.ACL_FORMAT_ND
    assert acl.get_tensor_desc_num_dims(desc) == 3
    assert acl.get_tensor_desc_dim_v2(desc, 1) == (3, 0)
    assert acl.get_tensor_desc_dim_v2(desc, 3) == (-1, C.ACL_ERROR_INVALID_PARAM)
    assert acl.get_tensor_desc_dim(desc, 2) == 4
    assert acl.get_tensor_desc_element_count(desc) == 24
    assert acl.get_tensor_desc_size(desc) == 48
    assert acl.set_tensor_desc_name(desc, "x") is None
    assert acl.get_tensor_desc_name(desc) == "x"
    assert acl.destroy_tensor_desc(desc) is None
    assert acl.get_tensor_desc_type(desc) == C.ACL_DT_UNDEFINED
    assert acl.get_tensor_desc_num_dims(desc) == 0


def test_tensor_desc_dims_are_int64(acl):
    desc = acl.create_tensor_desc(C.ACL_INT8, [1 << 33, 2], C.ACL_FORMAT_ND)
    assert acl.get_tensor_desc_size(desc) == 1 << 34
    with pytest.raises(ValueError, match="PyLong_AsLongLong"):
        acl.create_tensor_desc(C.ACL_INT8, [1 << 64], C.ACL_FORMAT_ND)


def test_tensor_desc_dynamic_dims_have_no_size(acl):
    desc = acl.create_tensor_desc(C.ACL_FLOAT, [-1, 8], C.ACL_FORMAT_ND)
    assert acl.get_tensor_desc_size(desc) == 0
    assert acl.get_tensor_desc_element_count(desc) == 0


def test_tensor_desc_rejects_wrong_types(acl):
    with pytest.raises(TypeError):
        acl.create_tensor_desc(C.ACL_FLOAT, 8, C.ACL_FORMAT_ND)
    with pytest.raises(TypeError):
        acl.create_tensor_desc(C.ACL_FLOAT, [1.0], C.ACL_FORMAT_ND)


def test_float16_conversions(acl):
    assert acl.float_to_float16(1.0) == 0x3C00
    assert acl.float16_to_float(0xC000) == -2.0
    assert acl.float_to_float16(1e9) == 0x7C00
    with pytest.raises(TypeError):
        acl.float_to_float16("1")


def test_get_cann_version_returns_the_package_dict(acl):
    version, ret = acl.get_cann_version(0)  # ACL_PKG_NAME_CANN
    assert ret == 0
    assert set(version) == {
        "version",
        "major_version",
        "minor_version",
        "release_version",
        "patch_version",
        "reserved",
    }
    major, minor, patch, _ = acl.get_version()
    assert version["version"] == f"{major}.{minor}.{patch}" and version["major_version"] == str(major)
    assert acl.get_cann_version(7)[1] == 0  # ACL_PKG_NAME_DRIVER
    empty, ret = acl.get_cann_version(8)
    assert ret == C.ACL_ERROR_INVALID_PARAM and set(empty.values()) == {""}
    with pytest.raises(TypeError):
        acl.get_cann_version("CANN")


def test_every_code_the_simulator_adds_has_its_acl_name():
    from ge_plugin.sim import _codes

    codes = {name: value for name, value in vars(_codes).items() if name.startswith("ACL_ERROR_")}
    assert codes
    for name, value in codes.items():
        assert C.ERROR_NAMES[value] == name
