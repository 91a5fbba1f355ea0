"""RC mode (``ACL_DEVICE``): the boards where the program runs on the device (Atlas 200I/500 A2, the
Ascend310B family), chosen by the SoC or ``GE_PLUGIN_SIM_RUN_MODE``. Device memory is host memory there:
host code reads and writes it in place, malloc_host is device memory, every memcpy kind is right; the
sanitizer still knows every allocation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ge_plugin import acl_constants as C
from ge_plugin.sim import sanitizer

H2D, D2H, D2D = C.ACL_MEMCPY_HOST_TO_DEVICE, C.ACL_MEMCPY_DEVICE_TO_HOST, C.ACL_MEMCPY_DEVICE_TO_DEVICE
SAMPLES = Path(__file__).parent / "samples"
pytestmark = [
    pytest.mark.filterwarnings("ignore:acl.util.numpy_to_ptr will be deprecated"),
    pytest.mark.filterwarnings("ignore:acl.util.ptr_to_numpy will be deprecated"),
]


@pytest.fixture
def rc(acl, monkeypatch):
    monkeypatch.setenv("GE_PLUGIN_SIM_RUN_MODE", "ACL_DEVICE")
    assert acl.init() == 0 and acl.rt.set_device(0) == 0


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, C.ACL_HOST),
        ({"GE_PLUGIN_SIM_SOC": "Ascend310B1"}, C.ACL_DEVICE),
        ({"GE_PLUGIN_SIM_SOC": "Ascend310B1", "GE_PLUGIN_SIM_RUN_MODE": "ACL_HOST"}, C.ACL_HOST),
        ({"GE_PLUGIN_SIM_RUN_MODE": "device"}, C.ACL_DEVICE),
        ({"GE_PLUGIN_SIM_RUN_MODE": "1"}, C.ACL_HOST),
    ],
)
def test_the_run_mode_follows_the_soc_or_the_explicit_setting_before_and_after_init(
    acl, monkeypatch, env, expected
):
    for name in ("GE_PLUGIN_SIM_SOC", "GE_PLUGIN_SIM_RUN_MODE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert acl.rt.get_run_mode() == (expected, 0)  # acllite asks before acl.init
    assert acl.init() == 0
    assert acl.rt.get_run_mode() == (expected, 0)


def test_the_run_mode_from_the_init_json_and_a_bad_value(acl, tmp_path, monkeypatch):
    monkeypatch.setenv("GE_PLUGIN_SIM_RUN_MODE", "sideways")
    assert acl.init() == C.ACL_ERROR_INVALID_PARAM
    assert (
        "GE_PLUGIN_SIM_RUN_MODE='sideways': expected ACL_HOST (1) or ACL_DEVICE (0)"
        in acl.get_recent_err_msg()
    )
    monkeypatch.delenv("GE_PLUGIN_SIM_RUN_MODE")
    config = tmp_path / "acl.json"
    config.write_text(json.dumps({"ge_plugin_sim": {"run_mode": "ACL_DEVICE"}}))
    assert acl.init(str(config)) == 0
    assert acl.rt.get_run_mode() == (C.ACL_DEVICE, 0)


def test_device_memory_is_host_memory_in_place(acl, rc):
    dev, ret = acl.rt.malloc(64, 0)
    assert ret == 0 and dev < 1 << 48
    view = acl.util.ptr_to_numpy(dev, (16,), 11)  # float32
    view[:] = np.arange(16)
    assert acl.util.ptr_to_bytes(dev, 8) == np.arange(2, dtype=np.float32).tobytes()
    out = np.zeros(16, np.float32)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(out), 64, dev, 64, D2H) == 0
    np.testing.assert_array_equal(out, np.arange(16))
    assert acl.rt.free(dev) == 0


def test_malloc_host_is_device_memory_freed_by_free_host(acl, rc):
    host, ret = acl.rt.malloc_host(256)
    assert ret == 0 and host % 64 == 0
    assert acl.rt.free(host) == C.ACL_ERROR_INVALID_PARAM
    assert "free it with acl.rt.free_host" in acl.get_recent_err_msg()
    assert acl.rt.free_host(host) == 0
    assert acl.rt.free_host(host) == C.ACL_ERROR_INVALID_PARAM


def test_every_memcpy_kind_is_right_and_no_finding_says_otherwise(acl, rc, checking, capfd):
    """acllite copies host data with ACL_MEMCPY_DEVICE_TO_DEVICE in RC mode: host and device memory are one."""
    dev, _ = acl.rt.malloc(16, 0)
    data = bytes(range(16))
    assert acl.rt.memcpy(dev, 16, acl.util.bytes_to_ptr(data), 16, D2D) == 0
    back = np.zeros(16, np.uint8)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(back), 16, dev, 16, H2D) == 0
    assert bytes(back) == data
    assert [f for f in sanitizer.findings() if f.severity == sanitizer.ERROR] == []
    assert "warning" not in capfd.readouterr().err


def test_the_sanitizer_still_knows_every_allocation(acl, rc, checking):
    dev, _ = acl.rt.malloc(100, 0)  # rc-malloc
    assert acl.rt.memcpy(dev, 256, acl.util.bytes_to_ptr(bytes(256)), 256, H2D) == C.ACL_ERROR_INVALID_PARAM
    assert "past the end of the 100-byte device 0 allocation" in acl.get_recent_err_msg()
    with pytest.raises(ValueError, match="past the end of the 100-byte device 0 allocation"):
        acl.util.ptr_to_bytes(dev, 200)
    assert acl.rt.free(dev) == 0
    assert acl.rt.memset(dev, 8, 0, 8) == C.ACL_ERROR_INVALID_PARAM
    assert "freed by acl.rt.free" in acl.get_recent_err_msg()
    acl.rt.malloc(32, 0)  # never freed
    assert acl.finalize() == 0
    kinds = [f.kind for f in sanitizer.findings()]
    assert kinds == [
        sanitizer.OUT_OF_BOUNDS,
        sanitizer.OUT_OF_BOUNDS,
        sanitizer.USE_AFTER_FREE,
        sanitizer.LEAK,
    ]


@pytest.mark.parametrize("sample", ["lite_sample.py", "dvpp_sample.py"])
def test_samples_run_in_rc_mode_under_check(oms, graphs, tmp_path, sample):
    env = {**os.environ, "GE_PLUGIN_SIM_SOC": "Ascend310B1"}
    env.pop("GE_PLUGIN_SIM_RUN_MODE", None)
    if sample == "lite_sample.py":
        x = np.random.default_rng(5).standard_normal((4, 3, 4)).astype(np.float32)
        np.save(tmp_path / "x.npy", x)
        np.save(tmp_path / "y.npy", graphs.reference(graphs.matmul_add(), {"x": x})[0])
        args = [str(oms["batch"]), str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "1"]
    else:
        from PIL import Image

        y, x = np.mgrid[0:120, 0:160]
        Image.fromarray(np.stack([x, y, x + y], -1).astype(np.uint8)).save(tmp_path / "img.jpg")
        (tmp_path / "out").mkdir()
        args = [str(tmp_path / "img.jpg"), str(tmp_path / "out")]
    result = subprocess.run(
        [sys.executable, "-m", "ge_plugin.sim", "run", "--check", str(SAMPLES / sample), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "0 errors, 0 unchecked raw pointers, 0 leaked allocations" in result.stderr
    assert "OK" in result.stdout
    assert "ge-plugin sim: warning" not in result.stderr
