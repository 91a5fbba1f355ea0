"""The simulator as a sanitizer: each class of memory bug a pyACL program can make is caught, with a message
naming the call, the memory (with the line that allocated it) and the overrun.

Every refusal returns the code CANN documents for a bad argument; with checking on (the ``checking``
fixture, ``GE_PLUGIN_SIM_CHECK=1``) it is also a finding (``sanitizer.findings()``) written to stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from ge_plugin import acl_constants as C
from ge_plugin.sim import _state, sanitizer

H2D, D2H, D2D = C.ACL_MEMCPY_HOST_TO_DEVICE, C.ACL_MEMCPY_DEVICE_TO_HOST, C.ACL_MEMCPY_DEVICE_TO_DEVICE
HERE = os.path.relpath(__file__)  # how the simulator prints a file below the working directory
#: these tests use the deprecated numpy calls on purpose (pyACL warns on every call)
pytestmark = [
    pytest.mark.filterwarnings("ignore:acl.util.numpy_to_ptr will be deprecated"),
    pytest.mark.filterwarnings("ignore:acl.util.ptr_to_numpy will be deprecated"),
]


def _line(marker: str) -> int:
    """The line of this file holding ``marker`` (a comment at the call the message must name)."""
    for n, text in enumerate(Path(__file__).read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# {marker}"):
            return n
    raise AssertionError(f"no line marked {marker}")


def _site(marker: str) -> str:
    return f"{HERE}:{_line(marker)}"


def _only_finding(kind: str) -> sanitizer.Finding:
    """The one finding of the test (raw-pointer warnings aside, unless that is the kind asked for)."""
    found = [
        f
        for f in sanitizer.findings()
        if kind == sanitizer.UNKNOWN_POINTER or f.severity != sanitizer.WARNING
    ]
    assert [f.kind for f in found] == [kind], found
    return found[0]


# -- use after free -----------------------------------------------------------------------------------------


def test_memset_of_freed_pinned_memory_is_refused_naming_its_malloc_and_free(acl, ready, checking):
    host, _ = acl.rt.malloc_host(64)  # pinned-malloc
    assert acl.rt.free_host(host) == 0  # pinned-free
    assert acl.rt.memset(host, 64, 0, 64) == C.ACL_ERROR_INVALID_PARAM  # pinned-memset
    message = acl.get_recent_err_msg()
    assert f"is inside the 64-byte pinned host allocation 0x{host:x}" in message
    assert f"acl.rt.malloc_host(64) at {_site('pinned-malloc')}" in message
    assert f"freed by acl.rt.free_host at {_site('pinned-free')}" in message
    finding = _only_finding(sanitizer.USE_AFTER_FREE)
    assert finding.call == "acl.rt.memset" and str(finding.site) == _site("pinned-memset")
    assert finding.code == C.ACL_ERROR_INVALID_PARAM


def test_memcpy_into_freed_pinned_memory_is_refused_and_leaves_it_alone(acl, ready):
    dev, _ = acl.rt.malloc(64, 0)
    assert acl.rt.memset(dev, 64, 7, 64) == 0
    host, _ = acl.rt.malloc_host(64)
    assert acl.rt.free_host(host) == 0
    assert acl.rt.memcpy(host, 64, dev, 64, D2H) == C.ACL_ERROR_INVALID_PARAM
    assert "freed by acl.rt.free_host" in acl.get_recent_err_msg()
    assert acl.rt.memcpy(dev, 64, host, 64, H2D) == C.ACL_ERROR_INVALID_PARAM
    assert acl.rt.memset_async(host, 64, 0, 64, ready) == C.ACL_ERROR_INVALID_PARAM
    with pytest.raises(ValueError, match=r"freed by acl\.rt\.free_host"):
        acl.util.ptr_to_bytes(host, 8)


def test_freed_pinned_memory_is_given_back_yet_never_reused(acl, ready):
    freed = []
    for _ in range(8):
        host, _ = acl.rt.malloc_host(1 << 20)
        assert acl.rt.free_host(host) == 0
        freed.append(host)
    assert len(set(freed)) == len(freed)  # each malloc_host got fresh addresses
    assert all(acl.rt.memset(h, 64, 0, 64) == C.ACL_ERROR_INVALID_PARAM for h in freed)


def test_copy_from_a_freed_device_pointer_names_its_malloc_and_free(acl, ready, checking):
    out = np.zeros(16, np.uint8)
    dev, _ = acl.rt.malloc(16, 0)  # dev-malloc
    assert acl.rt.free(dev) == 0  # dev-free
    assert acl.rt.memcpy(out.ctypes.data, 16, dev, 16, D2H) == C.ACL_ERROR_INVALID_PARAM
    message = acl.get_recent_err_msg()
    assert f"src 0x{dev:x} is inside the 16-byte device 0 allocation" in message
    assert (
        f"acl.rt.malloc(16) at {_site('dev-malloc')}, freed by acl.rt.free at {_site('dev-free')}" in message
    )
    assert sanitizer.USE_AFTER_FREE in [f.kind for f in sanitizer.findings()]


def test_double_free_is_its_own_kind(acl, ready, checking):
    dev, _ = acl.rt.malloc(16, 0)
    host, _ = acl.rt.malloc_host(16)
    assert acl.rt.free(dev) == 0 and acl.rt.free_host(host) == 0
    assert acl.rt.free(dev) == C.ACL_ERROR_INVALID_PARAM
    assert acl.rt.free_host(host) == C.ACL_ERROR_INVALID_PARAM
    assert [f.kind for f in sanitizer.findings()] == [sanitizer.DOUBLE_FREE, sanitizer.DOUBLE_FREE]
    assert all("freed by" in f.message for f in sanitizer.findings())


def test_freeing_the_inside_of_an_allocation_or_foreign_memory_is_an_invalid_free(acl, ready, checking):
    dev, _ = acl.rt.malloc(256, 0)  # inner-malloc
    assert acl.rt.free(dev + 32) == C.ACL_ERROR_INVALID_PARAM
    message = acl.get_recent_err_msg()
    assert f"0x{dev + 32:x} is inside the 256-byte device 0 allocation 0x{dev:x}" in message
    assert f"acl.rt.malloc(256) at {_site('inner-malloc')}" in message
    assert "free takes the address malloc returned" in message
    array = np.zeros(8)
    assert acl.rt.free_host(array.ctypes.data) == C.ACL_ERROR_INVALID_PARAM
    assert "is not memory from acl.rt.malloc_host" in acl.get_recent_err_msg()
    assert [f.kind for f in sanitizer.findings()] == [sanitizer.INVALID_FREE, sanitizer.INVALID_FREE]


def test_null_and_handle_pointers_are_invalid_pointers(acl, ready, checking):
    src = np.zeros(8, np.uint8)
    ds = acl.mdl.create_dataset()
    assert acl.rt.memcpy(0, 8, src.ctypes.data, 8, H2D) == C.ACL_ERROR_INVALID_PARAM
    assert "dst 0x0 is a null pointer" in acl.get_recent_err_msg()
    assert acl.rt.memset(ds, 8, 0, 8) == C.ACL_ERROR_INVALID_PARAM
    assert f"dev_ptr 0x{ds:x} is a simulator handle" in acl.get_recent_err_msg()
    assert [f.kind for f in sanitizer.findings() if f.severity == sanitizer.ERROR] == [
        sanitizer.INVALID_POINTER,
        sanitizer.INVALID_POINTER,
    ]


def test_pointer_of_a_bytes_object_the_program_dropped_is_a_use_after_free(acl, ready, checking):
    dev, _ = acl.rt.malloc(64, 0)
    ptr = acl.util.bytes_to_ptr(np.arange(8, dtype=np.float64).tobytes())  # dropped-bytes
    assert acl.rt.memcpy(dev, 64, ptr, 64, H2D) == C.ACL_ERROR_INVALID_PARAM
    message = acl.get_recent_err_msg()
    assert f"points into a 64-byte bytes object at 0x{ptr:x}" in message
    assert f"acl.util.bytes_to_ptr at {_site('dropped-bytes')}" in message
    assert "no longer references" in message
    _only_finding(sanitizer.USE_AFTER_FREE)


def test_a_kept_bytes_object_and_a_view_of_a_kept_array_are_fine(acl, ready, checking):
    dev, _ = acl.rt.malloc(64, 0)
    data = np.arange(8, dtype=np.float64).tobytes()
    assert acl.rt.memcpy(dev, 64, acl.util.bytes_to_ptr(data), 64, H2D) == 0
    whole = np.arange(16, dtype=np.float64)
    ptr = acl.util.numpy_to_ptr(whole[8:])  # the view is dropped, the array owning its memory is not
    assert acl.rt.memcpy(dev, 64, ptr, 64, H2D) == 0
    out = np.zeros(8)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(out), 64, dev, 64, D2H) == 0
    np.testing.assert_array_equal(out, whole[8:])
    assert sanitizer.findings() == []


def test_execute_with_a_freed_output_buffer_is_refused(acl, load, oms, checking):
    model = load(oms["static"])
    out_ptr = model.outputs[1][0][0]
    assert acl.rt.free(out_ptr) == 0
    model.feed([np.zeros((2, 3, 4), np.float32)])
    assert (
        acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == C.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID
    )
    assert "freed by acl.rt.free" in acl.get_recent_err_msg()
    assert sanitizer.USE_AFTER_FREE in [f.kind for f in sanitizer.findings()]


def test_a_buffer_that_passed_once_is_checked_again_once_its_memory_is_freed(acl, load, oms, checking):
    model = load(oms["static"])
    model.run([np.zeros((2, 3, 4), np.float32)])
    assert acl.rt.free(model.outputs[1][0][0]) == 0
    assert (
        acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == C.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID
    )
    assert "output 0 (y) data buffer: " in acl.get_recent_err_msg()
    _only_finding(sanitizer.USE_AFTER_FREE)


def test_memcpy_async_whose_memory_is_freed_before_it_runs_is_reported_at_synchronize(acl, ready, checking):
    dev, _ = acl.rt.malloc(128, 0)
    host, _ = acl.rt.malloc_host(128)
    gate = threading.Event()
    _state.stream(ready, _state.current_context()).submit(gate.wait)
    assert acl.rt.memcpy_async(dev, 128, host, 128, H2D, ready) == 0
    assert acl.rt.free(dev) == 0  # async-free
    gate.set()
    assert acl.rt.synchronize_stream(ready) == C.ACL_ERROR_RT_MEMORY_FREE
    finding = _only_finding(sanitizer.USE_AFTER_FREE)
    assert finding.call == "acl.rt.synchronize_stream"
    assert f"freed by acl.rt.free at {_site('async-free')}" in finding.message


# -- out of bounds ------------------------------------------------------------------------------------------


def test_copy_past_the_end_of_a_bytes_object_is_refused(acl, ready, checking):
    data = b"\x01" * 16
    ptr = acl.util.bytes_to_ptr(data)  # short-bytes
    dev, _ = acl.rt.malloc(64, 0)
    assert acl.rt.memcpy(dev, 64, ptr, 64, H2D) == C.ACL_ERROR_INVALID_PARAM  # short-copy
    message = acl.get_recent_err_msg()
    assert f"src range 0x{ptr:x}+64 runs 48 bytes past the end of a 16-byte bytes object" in message
    assert f"acl.util.bytes_to_ptr at {_site('short-bytes')}" in message
    finding = _only_finding(sanitizer.OUT_OF_BOUNDS)
    assert str(finding.site) == _site("short-copy")
    assert acl.rt.memcpy(dev, 64, ptr, 16, H2D) == 0  # its own 16 bytes are fine


def test_copy_past_the_end_of_a_small_array_from_numpy_to_ptr_is_refused(acl, ready):
    small = np.zeros(4, dtype=np.float32)
    ptr = acl.util.numpy_to_ptr(small)
    dev, _ = acl.rt.malloc(1024, 0)
    assert acl.rt.memcpy(ptr, 1024, dev, 1024, D2H) == C.ACL_ERROR_INVALID_PARAM
    assert "dst range" in (message := acl.get_recent_err_msg())
    assert "runs 1008 bytes past the end of a float32 ndarray of shape (4,) (16 bytes)" in message
    assert not small.any()  # nothing was written


def test_copy_sized_by_the_largest_gear_from_a_short_bytes_does_not_crash_the_process(oms, tmp_path):
    """A copy size taken from the largest gear (64 MiB here) out of a 16-byte bytes object: unchecked, the
    read runs into unmapped memory and the simulator dies with SIGSEGV."""
    script = tmp_path / "short.py"
    script.write_text(
        "import acl\n"
        "assert acl.init() == 0 and acl.rt.set_device(0) == 0\n"
        "size = 64 << 20\n"
        "dev, ret = acl.rt.malloc(size, 0)\n"
        "data = b'x' * 16\n"
        "ret = acl.rt.memcpy(dev, size, acl.util.bytes_to_ptr(data), size, 1)\n"
        "print('ret', ret)\n"
        "print(acl.util.ptr_to_bytes(acl.util.numpy_to_ptr(out := __import__('numpy').zeros(0)), 0))\n"
    )
    for check, expected in (("0", "ret 0"), ("1", "ret 100000")):
        result = subprocess.run(
            [sys.executable, "-m", "ge_plugin.sim", "run", str(script)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, sanitizer.ENV: check},
        )
        assert result.returncode == 0, result.stderr
        assert expected in result.stdout and "past the end of a 16-byte bytes object" in result.stderr


def test_without_checking_a_read_past_a_bytes_object_goes_on_with_zeros_and_one_warning(
    acl, ready, not_checking, capfd
):
    """What real pyACL cannot see goes through, as on hardware: the object's bytes, then zeros (never this
    process's other memory), one warning per line however often the line runs."""
    data = b"\x01" * 16
    dev, _ = acl.rt.malloc(64, 0)
    for _ in range(3):
        assert acl.rt.memcpy(dev, 64, acl.util.bytes_to_ptr(data), 64, H2D) == 0  # tolerated-copy
    out = np.full(64, 0xEE, np.uint8)
    assert acl.rt.memcpy(out.ctypes.data, 64, dev, 64, D2H) == 0
    assert out.tolist() == [1] * 16 + [0] * 48
    err = capfd.readouterr().err
    assert err.count("ge-plugin sim: warning:") == 1
    assert f"out-of-bounds in acl.rt.memcpy at {_site('tolerated-copy')}" in err
    assert "runs 48 bytes past the end of a 16-byte bytes object" in err and "then 48 zeros" in err
    assert sanitizer.findings() == []


def test_without_checking_a_dropped_bytes_object_is_read_as_it_was(acl, ready, not_checking, capfd):
    dev, _ = acl.rt.malloc(32, 0)
    ptr = acl.util.bytes_to_ptr(np.arange(4, dtype=np.float64).tobytes())
    assert acl.rt.memcpy(dev, 32, ptr, 32, H2D) == 0
    out = np.zeros(4)
    assert acl.rt.memcpy(out.ctypes.data, 32, dev, 32, D2H) == 0
    assert out.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert "use-after-free in acl.rt.memcpy" in capfd.readouterr().err


def test_without_checking_a_kind_that_contradicts_the_pointers_copies_their_way(
    acl, ready, not_checking, capfd
):
    """The CANN docs call memcpy's kind reserved: the runtime copies in the pointers' direction."""
    dev, _ = acl.rt.malloc(16, 0)
    src = np.arange(16, dtype=np.uint8)
    assert acl.rt.memcpy(dev, 16, src.ctypes.data, 16, D2H) == 0
    back = np.zeros(16, np.uint8)
    assert acl.rt.memcpy(back.ctypes.data, 16, dev, 16, H2D) == 0
    np.testing.assert_array_equal(back, src)
    assert acl.get_recent_err_msg() is None
    err = capfd.readouterr().err
    assert err.count("wrong-memory-kind in acl.rt.memcpy") == 2 and "the copy goes h2d" in err


def test_without_checking_device_and_pinned_overruns_and_host_writes_past_an_object_stay_refused(
    acl, ready, not_checking
):
    dev, _ = acl.rt.malloc(100, 0)
    host, _ = acl.rt.malloc_host(64)
    assert acl.rt.memcpy(dev, 256, host, 256, H2D) == C.ACL_ERROR_INVALID_PARAM
    assert "past the end of the 100-byte device 0 allocation" in acl.get_recent_err_msg()
    assert acl.rt.memcpy(dev, 64, host + 32, 64, H2D) == C.ACL_ERROR_INVALID_PARAM
    assert "past the end of the 64-byte pinned host allocation" in acl.get_recent_err_msg()
    small = np.zeros(4, dtype=np.float32)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(small), 64, dev, 64, D2H) == C.ACL_ERROR_INVALID_PARAM
    assert not small.any()


def test_device_overrun_names_the_allocation_and_the_excess(acl, ready, checking):
    src = np.zeros(128, np.uint8)
    dev, _ = acl.rt.malloc(100, 0)  # small-dev
    assert acl.rt.memcpy(dev + 64, 64, src.ctypes.data, 64, H2D) == C.ACL_ERROR_INVALID_PARAM
    message = acl.get_recent_err_msg()
    assert (
        f"dst range 0x{dev + 64:x}+64 runs 28 bytes past the end of the 100-byte device 0 allocation"
        in message
    )
    assert f"acl.rt.malloc(100) at {_site('small-dev')}" in message
    assert sanitizer.OUT_OF_BOUNDS in [f.kind for f in sanitizer.findings()]


def test_bounds_are_what_the_program_asked_for_when_checking(acl, ready, checking):
    dev, _ = acl.rt.malloc(64, 0)  # the device gives 96 bytes (ALIGN_UP(64, 32) + 32)
    assert acl.rt.memset(dev, 96, 0, 96) == C.ACL_ERROR_INVALID_PARAM
    assert "runs 32 bytes past the end of the 64-byte device 0 allocation" in acl.get_recent_err_msg()


def test_bounds_are_what_the_device_gave_when_not_checking(acl, ready, not_checking):
    dev, _ = acl.rt.malloc(64, 0)
    assert acl.rt.memset(dev, 96, 0, 96) == 0  # the rounding is real memory on hardware
    assert acl.rt.memset(dev, 128, 0, 128) == C.ACL_ERROR_INVALID_PARAM
    assert sanitizer.findings() == []


def test_pointer_just_past_a_device_allocation_is_out_of_bounds(acl, ready, checking):
    src = np.zeros(8, np.uint8)
    dev, _ = acl.rt.malloc(64, 0)
    assert acl.rt.memcpy(dev + 200, 8, src.ctypes.data, 8, H2D) == C.ACL_ERROR_INVALID_PARAM
    assert "is 136 bytes past the end of the 64-byte device 0 allocation" in acl.get_recent_err_msg()
    _only_finding(sanitizer.OUT_OF_BOUNDS)


def test_execute_with_a_buffer_that_claims_more_than_its_memory_is_out_of_bounds(acl, load, oms, checking):
    model = load(oms["batch"])
    _, size, buf = model.inputs[1][0]
    small, _ = acl.rt.malloc(size // 4, 0)  # small-input
    assert acl.update_data_buffer(buf, small, size) == 0
    ret = acl.mdl.set_dynamic_batch_size(model.id, model.inputs[0], model.mbatch, 1)
    assert ret == 0
    assert (
        acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == C.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID
    )
    message = acl.get_recent_err_msg()
    assert (
        f"input 0 (x) data buffer: 0x{small:x}+{size} runs {size - size // 4} bytes past the end" in message
    )
    assert f"acl.rt.malloc({size // 4}) at {_site('small-input')}" in message
    finding = _only_finding(sanitizer.OUT_OF_BOUNDS)
    assert finding.call == "acl.mdl.execute"


def test_a_buffer_that_only_a_bigger_gear_would_overrun_runs_when_not_checking(acl, load, oms, not_checking):
    """Without checking, the simulator (like the device) only looks at the bytes this gear reads."""
    model = load(oms["batch"])
    _, size, buf = model.inputs[1][0]
    small, _ = acl.rt.malloc(size // 4, 0)
    assert acl.update_data_buffer(buf, small, size) == 0
    assert acl.mdl.set_dynamic_batch_size(model.id, model.inputs[0], model.mbatch, 1) == 0
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == 0


def test_load_from_mem_past_the_end_of_the_bytes_is_refused(acl, ready, oms):
    data = oms["static"].read_bytes()
    ptr = acl.util.bytes_to_ptr(data)
    assert acl.mdl.load_from_mem(ptr, len(data) + 4096) == (0, C.ACL_ERROR_INVALID_PARAM)
    assert "runs 4096 bytes past the end of a" in acl.get_recent_err_msg()
    model_id, ret = acl.mdl.load_from_mem(ptr, len(data))
    assert ret == 0 and acl.mdl.unload(model_id) == 0


def test_ptr_to_bytes_past_a_pinned_allocation_raises_instead_of_reading_on(acl, ready, checking):
    host, _ = acl.rt.malloc_host(16)
    assert acl.util.ptr_to_bytes(host, 16) == bytes(16)
    with pytest.raises(ValueError, match="runs 16 bytes past the end of the 16-byte pinned host allocation"):
        acl.util.ptr_to_bytes(host, 32)
    assert _only_finding(sanitizer.OUT_OF_BOUNDS).call == "acl.util.ptr_to_bytes"


# -- wrong memory kind --------------------------------------------------------------------------------------


def test_host_and_device_mixed_up_in_a_copy(acl, ready, checking):
    src = np.zeros(16, np.uint8)
    dev, _ = acl.rt.malloc(16, 0)
    assert acl.rt.memcpy(src.ctypes.data, 16, dev, 16, H2D) == C.ACL_ERROR_INVALID_PARAM
    message = acl.get_recent_err_msg()
    assert f"src 0x{dev:x} is device memory and dst 0x{src.ctypes.data:x} is host memory" in message
    _only_finding(sanitizer.WRONG_MEMORY_KIND)


def test_pinned_memory_as_a_model_input_is_the_wrong_kind(acl, load, oms, checking):
    model = load(oms["static"])
    _, size, buf = model.inputs[1][0]
    host, _ = acl.rt.malloc_host(size)  # pinned-input
    assert acl.update_data_buffer(buf, host, size) == 0
    assert (
        acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == C.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID
    )
    message = acl.get_recent_err_msg()
    assert f"is pinned host memory (the {size}-byte pinned host allocation" in message
    assert f"acl.rt.malloc_host({size}) at {_site('pinned-input')}" in message
    _only_finding(sanitizer.WRONG_MEMORY_KIND)


def test_freeing_with_the_wrong_call_is_the_wrong_kind(acl, ready, checking):
    dev, _ = acl.rt.malloc(16, 0)
    host, _ = acl.rt.malloc_host(16)
    data = b"x" * 16
    assert acl.rt.free(host) == C.ACL_ERROR_INVALID_PARAM
    assert "free it with acl.rt.free_host" in acl.get_recent_err_msg()
    assert acl.rt.free_host(dev) == C.ACL_ERROR_INVALID_PARAM
    assert "free it with acl.rt.free" in acl.get_recent_err_msg()
    assert acl.rt.free(acl.util.bytes_to_ptr(data)) == C.ACL_ERROR_INVALID_PARAM
    assert [f.kind for f in sanitizer.findings()] == [sanitizer.WRONG_MEMORY_KIND] * 3


def test_memcpy_async_with_pageable_memory_is_the_wrong_kind(acl, ready, checking):
    data = np.zeros(128, np.uint8)
    dev, _ = acl.rt.malloc(128, 0)
    ptr = acl.util.numpy_to_ptr(data)
    assert acl.rt.memcpy_async(dev, 128, ptr, 128, H2D, ready) == C.ACL_ERROR_INVALID_PARAM
    _only_finding(sanitizer.WRONG_MEMORY_KIND)


# -- leaks --------------------------------------------------------------------------------------------------


def test_finalize_reports_what_was_never_freed_with_where_it_was_allocated(acl, checking):
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    acl.rt.malloc(1000, 0)  # leaked-dev
    acl.rt.malloc_host(10)  # leaked-host
    freed, _ = acl.rt.malloc(8, 0)
    assert acl.rt.free(freed) == 0
    assert acl.finalize() == 0  # the-finalize
    leaks = [f for f in sanitizer.findings() if f.kind == sanitizer.LEAK]
    assert [f.call for f in leaks] == ["acl.finalize", "acl.finalize"]
    assert all(str(f.site) == _site("the-finalize") for f in leaks)
    assert f"acl.rt.malloc(1000) at {_site('leaked-dev')}" in leaks[0].message
    assert f"acl.rt.malloc_host(10) at {_site('leaked-host')}" in leaks[1].message
    assert sanitizer.errors() == 0


def test_the_last_reset_device_reports_the_device_memory_it_reclaims(acl, checking):
    assert acl.init() == 0 and acl.rt.set_device(1) == 0
    acl.rt.malloc(32, 0)
    assert acl.rt.reset_device(1) == 0
    (leak,) = sanitizer.findings()
    assert leak.kind == sanitizer.LEAK and leak.call == "acl.rt.reset_device(1)"
    assert "the 32-byte device 1 allocation" in leak.message


def test_a_clean_program_has_no_findings(acl, load, oms, checking):
    model = load(oms["batch"])
    x = np.ones((4, 3, 4), np.float32)
    host, _ = acl.rt.malloc_host(x.nbytes)
    acl.util.ptr_to_numpy(host, x.shape, 11)[:] = x
    ptr, size, _ = model.inputs[1][0]
    assert acl.rt.memcpy(ptr, size, host, x.nbytes, H2D) == 0
    assert acl.mdl.set_dynamic_batch_size(model.id, model.inputs[0], model.mbatch, 4) == 0
    assert acl.mdl.execute(model.id, model.inputs[0], model.outputs[0]) == 0
    model.release()
    assert acl.rt.free_host(host) == 0
    assert acl.rt.reset_device(0) == 0 and acl.finalize() == 0
    assert sanitizer.findings() == []


# -- pointers the simulator cannot know ---------------------------------------------------------------------


def test_a_raw_host_pointer_is_reported_once_per_line(acl, ready, checking):
    dev, _ = acl.rt.malloc(64, 0)
    arrays = [np.zeros(8) for _ in range(3)]
    for array in arrays:
        assert acl.rt.memcpy(dev, 64, array.ctypes.data, 64, H2D) == 0  # raw-copy
    finding = _only_finding(sanitizer.UNKNOWN_POINTER)
    assert finding.severity == sanitizer.WARNING and str(finding.site) == _site("raw-copy")
    assert "its bounds cannot be checked" in finding.message and "ndarray.ctypes.data" in finding.message
    assert acl.rt.memcpy(arrays[0].ctypes.data, 64, dev, 64, D2H) == 0  # another line, another warning
    assert len(sanitizer.findings()) == 2 and sanitizer.errors() == 0


def test_nothing_is_reported_when_not_checking(acl, ready, not_checking, capfd):
    dev, _ = acl.rt.malloc(16, 0)
    assert acl.rt.free(dev) == 0
    assert acl.rt.free(dev) == C.ACL_ERROR_INVALID_PARAM
    assert acl.rt.memcpy(dev, 8, np.zeros(8, np.uint8).ctypes.data, 8, H2D) == C.ACL_ERROR_INVALID_PARAM
    assert sanitizer.findings() == [] and capfd.readouterr().err == ""


# -- where findings go --------------------------------------------------------------------------------------


def test_findings_go_to_stderr_as_they_happen(acl, ready, checking, capfd):
    dev, _ = acl.rt.malloc(16, 0)
    assert acl.rt.free(dev) == 0
    capfd.readouterr()
    assert acl.rt.memset(dev, 16, 0, 16) == C.ACL_ERROR_INVALID_PARAM  # stderr-memset
    err = capfd.readouterr().err
    assert f"ge-plugin sim check: use-after-free in acl.rt.memset at {_site('stderr-memset')}" in err
    assert "-> acl.rt.memset returned ACL_ERROR_INVALID_PARAM (100000)" in err


def test_the_counters_report_carries_the_findings(acl, checking, tmp_path, monkeypatch):
    monkeypatch.setenv("GE_PLUGIN_SIM_REPORT_DIR", str(tmp_path))
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    dev, _ = acl.rt.malloc(8, 0)
    assert acl.rt.free(dev) == 0 and acl.rt.free(dev) == C.ACL_ERROR_INVALID_PARAM
    acl.rt.malloc(8, 0)
    assert acl.finalize() == 0
    (report,) = tmp_path.glob("sim-*.json")
    data = json.loads(report.read_text())["sanitizer"]
    assert data["enabled"] is True and data["counts"] == {"error": 1, "leak": 1}
    assert [f["kind"] for f in data["findings"]] == [sanitizer.DOUBLE_FREE, sanitizer.LEAK]


def test_init_json_turns_checking_on(acl, tmp_path, monkeypatch):
    monkeypatch.delenv(sanitizer.ENV, raising=False)
    sanitizer.enable(False)
    config = tmp_path / "acl.json"
    config.write_text(json.dumps({"ge_plugin_sim": {"check": True}}))
    assert acl.init(str(config)) == 0
    assert sanitizer.enabled()


def test_check_setting_typos_fail_init(acl, monkeypatch):
    monkeypatch.setenv(sanitizer.ENV, "maybe")
    assert acl.init() == C.ACL_ERROR_INVALID_PARAM
    assert "GE_PLUGIN_SIM_CHECK='maybe'" in acl.get_recent_err_msg()


# -- python -m ge_plugin.sim run --check --------------------------------------------------------------------


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != sanitizer.ENV}
    return subprocess.run(
        [sys.executable, "-m", "ge_plugin.sim", "run", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**environ, **(env or {})},
    )


_BUGGY = """\
import acl
assert acl.init() == 0 and acl.rt.set_device(0) == 0
dev, _ = acl.rt.malloc(64, 0)
data = b"x" * 16
acl.rt.memcpy(dev, 64, acl.util.bytes_to_ptr(data), 64, 1)  # the return code is ignored
acl.rt.malloc(8, 0)
print("done")
"""


def test_run_check_reports_errors_and_leaks_and_exits_1(tmp_path):
    script = tmp_path / "buggy.py"
    script.write_text(_BUGGY)
    result = _run("--check", str(script))
    assert result.returncode == 1 and "done" in result.stdout
    assert f"out-of-bounds in acl.rt.memcpy at {script}:5" in result.stderr
    assert "runs 48 bytes past the end of a 16-byte bytes object" in result.stderr
    assert f"acl.rt.malloc(8) at {script}:6" in result.stderr
    assert "ge-plugin sim check: 1 errors, 0 unchecked raw pointers, 2 leaked allocations" in result.stderr


def test_run_without_check_keeps_the_programs_status_and_warns_once(tmp_path):
    script = tmp_path / "buggy.py"
    script.write_text(_BUGGY)
    result = _run(str(script))
    assert result.returncode == 0 and "done" in result.stdout
    (warning, *_) = result.stderr.splitlines()
    assert warning.startswith(f"ge-plugin sim: warning: out-of-bounds in acl.rt.memcpy at {script}:5")
    assert result.stderr.count("warning") == 1 and "check:" not in result.stderr


def test_run_check_of_a_clean_program_exits_0_even_with_leaks(tmp_path):
    script = tmp_path / "leaky.py"
    script.write_text(
        "import acl\n"
        "assert acl.init() == 0 and acl.rt.set_device(0) == 0\n"
        "acl.rt.malloc(64, 0)\n"
        "assert acl.finalize() == 0\n"
    )
    result = _run("--check", str(script))
    assert result.returncode == 0, result.stderr
    assert f"leak found by acl.finalize at {script}:4" in result.stderr
    assert "0 errors, 0 unchecked raw pointers, 1 leaked allocations" in result.stderr
