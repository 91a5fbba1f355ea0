"""Conformance of acl.rt: devices, contexts (per thread), streams and memory, with their failure codes."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ge_plugin import acl_constants as C

#: these tests use the deprecated acl.util.ptr_to_numpy on purpose (pyACL warns on every call)
pytestmark = pytest.mark.filterwarnings("ignore:acl.util.ptr_to_numpy will be deprecated")


def in_thread(fn):
    """Run ``fn`` in a new thread; its result (exceptions re-raised here)."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised in the test's thread
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_device_count_follows_environment(acl, monkeypatch):
    monkeypatch.setenv("GE_PLUGIN_SIM_DEVICES", "3")
    assert acl.init() == 0
    assert acl.rt.get_device_count() == (3, 0)
    assert acl.rt.set_device(2) == 0
    assert acl.rt.set_device(3) == C.ACL_ERROR_RT_INVALID_DEVICEID
    assert acl.rt.create_context(-1) == (0, C.ACL_ERROR_RT_INVALID_DEVICEID)


def test_default_device_count_is_eight(acl):
    assert acl.init() == 0
    assert acl.rt.get_device_count() == (8, 0)


def test_physical_id_is_the_device_id_outside_a_container(acl, monkeypatch):
    monkeypatch.delenv("ASCEND_VISIBLE_DEVICES", raising=False)
    assert acl.init() == 0
    assert acl.rt.get_phy_dev_id_by_logic_dev_id(3) == (3, 0)


def test_physical_id_in_a_container_follows_the_chips_the_runtime_mounted(acl, monkeypatch):
    """The device plugin's ASCEND_VISIBLE_DEVICES, in either of its spellings: the container numbers the
    chips 0..N-1 in the order of their ids, whatever order the list has."""
    monkeypatch.setenv("GE_PLUGIN_SIM_DEVICES", "2")
    monkeypatch.setenv("ASCEND_VISIBLE_DEVICES", "Ascend910-6,Ascend910-2")
    assert acl.init() == 0
    assert acl.rt.get_phy_dev_id_by_logic_dev_id(0) == (2, 0)
    assert acl.rt.get_phy_dev_id_by_logic_dev_id(1) == (6, 0)
    monkeypatch.setenv("ASCEND_VISIBLE_DEVICES", "5")
    assert acl.rt.get_phy_dev_id_by_logic_dev_id(0) == (5, 0)
    assert acl.rt.get_phy_dev_id_by_logic_dev_id(1) == (0, C.ACL_ERROR_INVALID_PARAM)
    assert "ASCEND_VISIBLE_DEVICES" in acl.get_recent_err_msg()
    assert acl.rt.get_phy_dev_id_by_logic_dev_id(2) == (0, C.ACL_ERROR_RT_INVALID_DEVICEID)


def test_set_device_makes_default_context_current(acl):
    assert acl.init() == 0
    assert acl.rt.get_context() == (0, C.ACL_ERROR_RT_CONTEXT_NULL)
    assert acl.rt.get_device() == (0, C.ACL_ERROR_RT_CONTEXT_NULL)
    assert acl.rt.set_device(1) == 0
    ctx, ret = acl.rt.get_context()
    assert ret == 0 and ctx != 0
    assert acl.rt.get_device() == (1, 0)


def test_current_context_is_per_thread(acl, ready):
    assert in_thread(acl.rt.get_context) == (0, C.ACL_ERROR_RT_CONTEXT_NULL)
    assert in_thread(lambda: acl.rt.malloc(64, 0)) == (0, C.ACL_ERROR_RT_CONTEXT_NULL)
    ctx, _ = acl.rt.get_context()

    def worker():
        assert acl.rt.set_context(ctx) == 0
        return acl.rt.get_context(), acl.rt.get_device()

    assert in_thread(worker) == ((ctx, 0), (0, 0))


def test_create_context_becomes_current_and_destroy_rules(acl):
    assert acl.init() == 0
    ctx, ret = acl.rt.create_context(2)
    assert ret == 0
    assert acl.rt.get_context() == (ctx, 0)
    assert acl.rt.get_device() == (2, 0)
    assert acl.rt.destroy_context(ctx) == 0
    assert acl.rt.get_context() == (0, C.ACL_ERROR_RT_CONTEXT_NULL)
    assert "destroyed" in acl.get_recent_err_msg()
    assert acl.rt.destroy_context(ctx) == C.ACL_ERROR_INVALID_PARAM
    assert acl.rt.set_context(ctx) == C.ACL_ERROR_INVALID_PARAM
    assert acl.rt.set_context(0) == C.ACL_ERROR_INVALID_PARAM


def test_default_context_cannot_be_destroyed(acl, ready):
    ctx, _ = acl.rt.get_context()
    assert acl.rt.destroy_context(ctx) == C.ACL_ERROR_INVALID_PARAM
    assert "reset_device" in acl.get_recent_err_msg()


def test_reset_device_is_reference_counted(acl):
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    assert acl.rt.set_device(0) == 0
    assert acl.rt.malloc(100, 0)[1] == 0  # never freed: the last reset_device reclaims it
    assert acl.rt.reset_device(0) == 0
    assert acl.rt.get_context()[1] == 0  # one reference left
    assert acl.rt.reset_device(0) == 0
    assert acl.rt.get_context() == (0, C.ACL_ERROR_RT_CONTEXT_NULL)
    from ge_plugin.sim import snapshot

    device = snapshot()["devices"][0]
    assert device["live_allocations"] == 0 and device["reclaimed_allocations"] == 1


def test_run_mode_is_host(acl):
    assert acl.rt.get_run_mode() == (C.ACL_HOST, 0)


def test_stream_belongs_to_its_context(acl, ready):
    other, _ = acl.rt.create_context(1)
    assert acl.rt.synchronize_stream(ready) == C.ACL_ERROR_RT_STREAM_CONTEXT
    assert acl.rt.destroy_stream(ready) == C.ACL_ERROR_RT_STREAM_CONTEXT
    assert "belongs to context" in acl.get_recent_err_msg()
    assert acl.rt.destroy_context(other) == 0


def test_stream_lifecycle_and_codes(acl, ready):
    assert acl.rt.synchronize_stream(ready) == 0
    assert acl.rt.synchronize_stream_with_timeout(ready, 100) == 0
    assert acl.rt.synchronize_stream(0) == 0  # the default stream
    assert acl.rt.synchronize_device() == 0
    assert acl.rt.destroy_stream(ready) == 0
    assert acl.rt.destroy_stream(ready) == C.ACL_ERROR_INVALID_PARAM
    assert acl.rt.synchronize_stream(ready) == C.ACL_ERROR_INVALID_PARAM
    assert acl.rt.destroy_stream(0) == C.ACL_ERROR_INVALID_PARAM
    assert acl.rt.synchronize_stream_with_timeout(0, -2) == C.ACL_ERROR_INVALID_PARAM


def test_create_stream_needs_a_context(acl):
    assert acl.init() == 0
    assert acl.rt.create_stream() == (0, C.ACL_ERROR_RT_CONTEXT_NULL)


def test_malloc_rounds_and_accounts(acl, ready):
    from ge_plugin.sim import snapshot

    ptr, ret = acl.rt.malloc(100, C.ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == 0 and ptr % 64 == 0
    assert snapshot()["devices"][0]["live_bytes"] == 160  # ALIGN_UP(100, 32) + 32
    p32, _ = acl.rt.malloc_align32(100, 0)
    assert snapshot()["devices"][0]["live_bytes"] == 160 + 128
    assert acl.rt.free(ptr) == 0
    assert acl.rt.free(p32) == 0
    assert snapshot()["devices"][0]["live_bytes"] == 0


def test_malloc_failure_codes(acl, ready):
    assert acl.rt.malloc(0, 0) == (0, C.ACL_ERROR_INVALID_PARAM)
    assert acl.rt.malloc(64, 99) == (0, C.ACL_ERROR_INVALID_PARAM)
    with pytest.raises(TypeError):
        acl.rt.malloc(64.0, 0)
    with pytest.raises(TypeError):
        acl.rt.malloc(np.int64(64), 0)  # "k" needs an exact int, as PyLong_Check does
    with pytest.raises(TypeError):
        acl.rt.malloc(64)


def test_device_capacity_is_enforced(acl, monkeypatch):
    monkeypatch.setenv("GE_PLUGIN_SIM_DEVICE_MEMORY_MB", "1")
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    big, ret = acl.rt.malloc(700_000, 0)
    assert ret == 0
    assert acl.rt.malloc(400_000, 0) == (0, C.ACL_ERROR_RT_MEMORY_ALLOCATION)
    assert "out of memory" in acl.get_recent_err_msg()
    free, total, ret = acl.rt.get_mem_info(C.ACL_HBM_MEM)
    assert ret == 0 and total == 1 << 20 and free == total - (700_000 + 32)
    assert acl.rt.free(big) == 0
    assert acl.rt.malloc(400_000, 0)[1] == 0


def test_get_mem_info_codes(acl, ready):
    assert acl.rt.get_mem_info(9) == (0, 0, C.ACL_ERROR_INVALID_PARAM)
    assert in_thread(lambda: acl.rt.get_mem_info(0)) == (0, 0, C.ACL_ERROR_RT_CONTEXT_NULL)


def test_free_rules(acl, ready):
    ptr, _ = acl.rt.malloc(256, 0)
    host, _ = acl.rt.malloc_host(64)
    assert acl.rt.free(ptr + 32) == C.ACL_ERROR_INVALID_PARAM
    assert "is inside the 256-byte device 0 allocation" in acl.get_recent_err_msg()
    assert acl.rt.free(host) == C.ACL_ERROR_INVALID_PARAM
    assert "free_host" in acl.get_recent_err_msg()
    assert acl.rt.free_host(ptr) == C.ACL_ERROR_INVALID_PARAM
    assert acl.rt.free(ptr) == 0
    assert acl.rt.free(ptr) == C.ACL_ERROR_INVALID_PARAM
    assert "freed by acl.rt.free at" in acl.get_recent_err_msg()
    assert acl.rt.free_host(host) == 0
    assert acl.rt.free_host(host) == C.ACL_ERROR_INVALID_PARAM


def test_malloc_host_is_aligned_writable_host_memory(acl, ready):
    host, ret = acl.rt.malloc_host(100)
    assert ret == 0 and host % 64 == 0
    view = acl.util.ptr_to_numpy(host, (25,), 11)
    view[:] = np.arange(25)
    assert acl.util.ptr_to_bytes(host, 8) == np.arange(2, dtype=np.float32).tobytes()
    assert acl.rt.malloc_host(0) == (0, C.ACL_ERROR_INVALID_PARAM)
    assert in_thread(lambda: acl.rt.malloc_host(8)) == (0, C.ACL_ERROR_RT_CONTEXT_NULL)


def test_memcpy_roundtrip_and_direction_checks(acl, ready):
    src = np.arange(16, dtype=np.float32)
    out = np.zeros_like(src)
    dev, _ = acl.rt.malloc(src.nbytes, 0)
    dev2, _ = acl.rt.malloc(src.nbytes, 0)
    assert acl.rt.memcpy(dev, src.nbytes, src.ctypes.data, src.nbytes, C.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    assert acl.rt.memcpy(dev2, src.nbytes, dev, src.nbytes, C.ACL_MEMCPY_DEVICE_TO_DEVICE) == 0
    assert acl.rt.memcpy(out.ctypes.data, out.nbytes, dev2, src.nbytes, C.ACL_MEMCPY_DEFAULT) == 0
    np.testing.assert_array_equal(out, src)
    # kind must match where the pointers live
    assert (
        acl.rt.memcpy(dev, 64, src.ctypes.data, 64, C.ACL_MEMCPY_DEVICE_TO_HOST) == C.ACL_ERROR_INVALID_PARAM
    )
    assert "does not match the pointers" in acl.get_recent_err_msg()
    assert acl.rt.memcpy(out.ctypes.data, 64, dev, 64, C.ACL_MEMCPY_HOST_TO_HOST) == C.ACL_ERROR_INVALID_PARAM
    assert acl.rt.memcpy(dev, 64, src.ctypes.data, 64, 9) == C.ACL_ERROR_INVALID_PARAM


def test_memcpy_bounds_and_dead_pointers(acl, ready, not_checking):
    src = np.zeros(1024, dtype=np.uint8)
    dev, _ = acl.rt.malloc(64, 0)  # 96 usable bytes after rounding (ALIGN_UP(64, 32) + 32)
    assert acl.rt.memcpy(dev, 32, src.ctypes.data, 64, 1) == C.ACL_ERROR_INVALID_PARAM
    assert "larger than dest_max" in acl.get_recent_err_msg()
    assert acl.rt.memcpy(dev, 1024, src.ctypes.data, 1024, 1) == C.ACL_ERROR_INVALID_PARAM
    assert "past the end" in acl.get_recent_err_msg()
    assert acl.rt.memcpy(dev + 32, 64, src.ctypes.data, 64, 1) == 0  # inside the allocation is fine
    assert acl.rt.memcpy(dev + 64, 64, src.ctypes.data, 64, 1) == C.ACL_ERROR_INVALID_PARAM
    assert acl.rt.memcpy(0, 64, src.ctypes.data, 64, 1) == C.ACL_ERROR_INVALID_PARAM
    ds = acl.mdl.create_dataset()
    assert acl.rt.memcpy(ds, 64, src.ctypes.data, 64, 1) == C.ACL_ERROR_INVALID_PARAM
    assert "handle" in acl.get_recent_err_msg()
    assert acl.rt.free(dev) == 0
    assert acl.rt.memcpy(dev, 64, src.ctypes.data, 64, 1) == C.ACL_ERROR_INVALID_PARAM
    assert "freed" in acl.get_recent_err_msg()


def test_memcpy_needs_a_context(acl, ready):
    src = np.zeros(8, dtype=np.uint8)
    dev, _ = acl.rt.malloc(8, 0)
    assert in_thread(lambda: acl.rt.memcpy(dev, 8, src.ctypes.data, 8, 1)) == C.ACL_ERROR_RT_CONTEXT_NULL


def test_memcpy_argument_types(acl, ready):
    with pytest.raises(TypeError):
        acl.rt.memcpy(1, 2, 3, 4)
    with pytest.raises(TypeError):
        acl.rt.memcpy(1, 2, 3, 4.0, 1)
    with pytest.raises(TypeError):
        acl.rt.memcpy(1, 2, 3, 4, "1")


def test_memcpy_async_demands_pinned_aligned_memory(acl, ready):
    pageable = np.zeros(128, dtype=np.uint8)
    dev, _ = acl.rt.malloc(128, 0)
    host, _ = acl.rt.malloc_host(128)
    assert acl.rt.memcpy_async(dev, 128, pageable.ctypes.data, 128, 1, ready) == C.ACL_ERROR_INVALID_PARAM
    message = acl.get_recent_err_msg()
    assert "did not come from acl.rt.malloc_host" in message and "refuses" in message
    assert acl.rt.memcpy_async(dev, 64, host + 8, 64, 1, ready) == C.ACL_ERROR_RT_ADDR_UNALIGNED
    assert acl.rt.memcpy_async(dev + 8, 64, host, 64, 1, ready) == C.ACL_ERROR_RT_ADDR_UNALIGNED
    host2, _ = acl.rt.malloc_host(128)
    assert acl.rt.memcpy_async(host2, 128, host, 128, 0, ready) == C.ACL_ERROR_RT_FEATURE_NOT_SUPPORT
    assert acl.rt.memcpy_async(dev, 128, host, 128, 1, ready) == 0
    assert acl.rt.synchronize_stream(ready) == 0


def test_memcpy_async_of_memory_freed_before_it_runs_fails_at_sync(acl, ready):
    from ge_plugin.sim import faults

    faults.set_execute_latency_ms(0)
    dev, _ = acl.rt.malloc(128, 0)
    host, _ = acl.rt.malloc_host(128)
    gate = threading.Event()
    # hold the stream busy so the copy is still queued when the memory is freed
    from ge_plugin.sim import _state

    ctx = _state.current_context()
    _state.stream(ready, ctx).submit(gate.wait)
    assert acl.rt.memcpy_async(dev, 128, host, 128, 1, ready) == 0
    assert acl.rt.free(dev) == 0
    gate.set()
    assert acl.rt.synchronize_stream(ready) == C.ACL_ERROR_RT_MEMORY_FREE
    assert "freed before it ran" in acl.get_recent_err_msg()


def test_memset_sync_and_async(acl, ready):
    dev, _ = acl.rt.malloc(64, 0)
    out = np.zeros(64, dtype=np.uint8)
    assert acl.rt.memset(dev, 64, 0x1FF, 64) == 0  # only the low byte counts
    assert acl.rt.memcpy(out.ctypes.data, 64, dev, 64, 2) == 0
    assert (out == 0xFF).all()
    assert acl.rt.memset_async(dev, 64, 7, 32, ready) == 0
    assert acl.rt.synchronize_stream(ready) == 0
    assert acl.rt.memcpy(out.ctypes.data, 64, dev, 64, 2) == 0
    assert (out[:32] == 7).all() and (out[32:] == 0xFF).all()
    assert acl.rt.memset(dev, 16, 0, 32) == C.ACL_ERROR_INVALID_PARAM
    host = np.ones(8, dtype=np.uint8)
    assert acl.rt.memset(host.ctypes.data, 8, 0, 8) == 0
    assert not host.any()


def test_device_memory_is_poisoned_not_zero(acl, ready):
    dev, _ = acl.rt.malloc(16, 0)
    out = np.zeros(16, dtype=np.uint8)
    assert acl.rt.memcpy(out.ctypes.data, 16, dev, 16, 2) == 0
    assert (out == 0xA5).all()


def test_remaining_failure_codes(acl, ready):
    assert acl.rt.reset_device(99) == C.ACL_ERROR_RT_INVALID_DEVICEID
    assert in_thread(acl.rt.synchronize_device) == C.ACL_ERROR_RT_CONTEXT_NULL
    dev, _ = acl.rt.malloc(32, 0)
    assert acl.rt.memset_async(dev, 8, 0, 16, ready) == C.ACL_ERROR_INVALID_PARAM
    assert acl.rt.memset_async(dev, 64, 0, 16, 12345) == C.ACL_ERROR_INVALID_PARAM
    assert "not a live stream" in acl.get_recent_err_msg()


def test_create_stream_with_config_makes_a_working_stream(acl, ready, load, oms):
    model = load(oms["static"])
    model.feed([np.ones((2, 3, 4), np.float32)])
    for priority, flag in ((0, 1), (7, 2), (-1, 0x7FFFFFFF)):  # out-of-range values still give a stream
        stream, ret = acl.rt.create_stream_with_config(priority, flag)
        assert ret == 0 and stream
        assert acl.mdl.execute_async(model.id, model.inputs[0], model.outputs[0], stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        assert acl.rt.destroy_stream(stream) == 0
    with pytest.raises(TypeError):
        acl.rt.create_stream_with_config(0)
    assert in_thread(lambda: acl.rt.create_stream_with_config(0, 0)) == (0, C.ACL_ERROR_RT_CONTEXT_NULL)


def test_get_device_info_answers_core_counts_and_truncates_memory_to_a_c_int(acl, monkeypatch):
    monkeypatch.setenv("GE_PLUGIN_SIM_DEVICE_MEMORY_MB", "1")
    assert acl.init() == 0
    assert acl.rt.get_device_info(0, 101) == (20, 0)  # ACL_DEV_ATTR_AICORE_CORE_NUM
    assert acl.rt.get_device_info(0, 201) == (40, 0)  # ACL_DEV_ATTR_VECTOR_CORE_NUM
    assert acl.rt.get_device_info(0, 301) == (1 << 20, 0)  # ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE
    assert acl.rt.get_device_info(0, 999) == (0, C.ACL_ERROR_INVALID_PARAM)
    assert acl.rt.get_device_info(99, 101) == (0, C.ACL_ERROR_RT_INVALID_DEVICEID)


def test_get_device_info_of_32_gib_reads_zero_as_pyacl_builds_it_with_i(acl):
    assert acl.init() == 0
    assert acl.rt.get_device_info(0, 301) == (0, 0)  # 32768 MiB: the low 32 bits are 0


def test_get_mem_info_follows_mallocs_and_loads(acl, ready, oms):
    free0, total, _ = acl.rt.get_mem_info(C.ACL_HBM_MEM)
    ptr, _ = acl.rt.malloc(1000, 0)
    assert acl.rt.get_mem_info(C.ACL_DDR_MEM) == (free0 - 1056, total, 0)
    work, weight, _ = acl.mdl.query_size(str(oms["static"]))
    model_id, _ = acl.mdl.load_from_file(str(oms["static"]))
    assert acl.rt.get_mem_info(C.ACL_HBM_MEM)[0] == free0 - 1056 - work - weight
    assert acl.mdl.unload(model_id) == 0 and acl.rt.free(ptr) == 0
    assert acl.rt.get_mem_info(C.ACL_HBM_MEM) == (free0, total, 0)
