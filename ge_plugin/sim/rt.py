"""``acl.rt``, simulated: devices, contexts, streams and memory.

Rules enforced as the runtime does: a current context per thread (``set_device`` makes the device's default
context current, ``create_context`` makes the new one current; calls that need one without it return
ACL_ERROR_RT_CONTEXT_NULL, 107002); a stream belongs to the context that created it (using it from another
returns ACL_ERROR_RT_STREAM_CONTEXT, 107003); device memory is accounted against each device's capacity
(ACL_ERROR_RT_MEMORY_ALLOCATION, 207001, when full); copies are checked against where each pointer lives.
``synchronize_*`` release the GIL while they wait; ``memcpy`` holds it, as in pyACL.
"""

import ctypes as _ctypes

from ge_plugin import acl_constants as _C
from ge_plugin.sim import _args as _a
from ge_plugin.sim import _codes as _K
from ge_plugin.sim import _state as _s
from ge_plugin.sim import faults as _faults
from ge_plugin.sim._fail import Fail as _Fail
from ge_plugin.sim._rt_events import (
    create_event,
    destroy_event,
    event_elapsed_time,
    launch_callback,
    process_report,
    query_event_status,
    record_event,
    reset_event,
    stream_wait_event,
    subscribe_report,
    synchronize_event,
    synchronize_event_with_timeout,
    unsubscribe_report,
)
from ge_plugin.sim.memory import DEVICE as _DEVICE
from ge_plugin.sim.memory import PINNED as _PINNED
from ge_plugin.sim.memory import Allocation as _Allocation
from ge_plugin.sim.memory import align_up as _align_up
from ge_plugin.sim.memory import malloc_size as _malloc_size

__all__ = [
    "create_context",
    "create_event",
    "create_stream",
    "create_stream_with_config",
    "destroy_context",
    "destroy_event",
    "destroy_stream",
    "event_elapsed_time",
    "free",
    "free_host",
    "get_context",
    "get_device",
    "get_device_count",
    "get_device_info",
    "get_mem_info",
    "get_run_mode",
    "launch_callback",
    "malloc",
    "malloc_align32",
    "malloc_cached",
    "malloc_host",
    "memcpy",
    "memcpy_async",
    "memset",
    "memset_async",
    "process_report",
    "query_event_status",
    "record_event",
    "reset_device",
    "reset_event",
    "set_context",
    "set_device",
    "stream_wait_event",
    "subscribe_report",
    "synchronize_device",
    "synchronize_event",
    "synchronize_event_with_timeout",
    "synchronize_stream",
    "synchronize_stream_with_timeout",
    "unsubscribe_report",
]

_SIM = _s.SIM


def _fault(api: str) -> None:
    if _faults.RULES:
        _s.check_fault(api)


# -- devices and contexts -------------------------------------------------------------------------------


def set_device(device_id: int, /) -> int:
    """``ret``; opens the device (reference-counted) and makes its default context current in this thread."""
    call = "acl.rt.set_device"
    device_id = _a.i(call, 1, device_id)
    try:
        _fault("rt.set_device")
        _s.require_init()
        with _SIM.lock:
            dev = _s.device(device_id)
            dev.refcount += 1
            if dev.default_context is None:
                dev.default_context = _s.create_context(device_id, default=True)
            _s.set_current(dev.default_context)
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


def reset_device(device_id: int, /) -> int:
    """``ret``; the last reset releases the device's contexts, streams, models and memory."""
    call = "acl.rt.reset_device"
    device_id = _a.i(call, 1, device_id)
    try:
        _fault("rt.reset_device")
        _s.require_init()
        with _SIM.lock:
            dev = _s.device(device_id)
            if dev.refcount > 0:
                dev.refcount -= 1
                if dev.refcount == 0:
                    _s.release_device(dev)
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


def get_device() -> tuple[int, int]:
    """``device_id, ret``: the device of this thread's current context."""
    try:
        _fault("rt.get_device")
        _s.require_init()
        return _s.current_context().device, 0
    except _Fail as fail:
        return 0, _s.failed("acl.rt.get_device", fail)


def get_device_count() -> tuple[int, int]:
    """``count, ret``."""
    try:
        _fault("rt.get_device_count")
        _s.require_init()
        return len(_SIM.devices), 0
    except _Fail as fail:
        return 0, _s.failed("acl.rt.get_device_count", fail)


def create_context(device_id: int, /) -> tuple[int, int]:
    """``context, ret``; the new context becomes this thread's current context."""
    call = "acl.rt.create_context"
    device_id = _a.i(call, 1, device_id)
    try:
        _fault("rt.create_context")
        _s.require_init()
        with _SIM.lock:
            _s.device(device_id)
            ctx = _s.create_context(device_id, default=False)
        _s.set_current(ctx)
        return ctx.handle, 0
    except _Fail as fail:
        return 0, _s.failed(call, fail)


def set_context(context: int, /) -> int:
    """``ret``; makes ``context`` this thread's current context (every worker thread must)."""
    call = "acl.rt.set_context"
    context = _a.k(call, 1, context)
    try:
        _fault("rt.set_context")
        _s.require_init()
        _s.set_current(_s.context(context))
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


def get_context() -> tuple[int, int]:
    """``context, ret``; (0, 107002) when this thread has none."""
    try:
        _fault("rt.get_context")
        _s.require_init()
        return _s.current_context().handle, 0
    except _Fail as fail:
        return 0, _s.failed("acl.rt.get_context", fail)


def destroy_context(context: int, /) -> int:
    """``ret``; only for contexts from create_context. Its streams are destroyed with it."""
    call = "acl.rt.destroy_context"
    context = _a.k(call, 1, context)
    try:
        _fault("rt.destroy_context")
        _s.require_init()
        with _SIM.lock:
            ctx = _s.context(context)
            if ctx.default:
                raise _Fail(
                    _C.ACL_ERROR_INVALID_PARAM,
                    f"0x{context:x} is the default context of device {ctx.device}; acl.rt.reset_device releases it",
                )
            _s.destroy_context(ctx)
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


def get_run_mode() -> tuple[int, int]:
    """``run_mode, ret``: always ACL_HOST (1), a PCIe card in a server."""
    try:
        _fault("rt.get_run_mode")
        return _C.ACL_HOST, 0
    except _Fail as fail:
        return 0, _s.failed("acl.rt.get_run_mode", fail)


# -- streams --------------------------------------------------------------------------------------------


def create_stream() -> tuple[int, int]:
    """``stream, ret``: a stream of the current context, with its own worker thread."""
    try:
        _fault("rt.create_stream")
        _s.require_init()
        return _s.create_stream(_s.current_context()).handle, 0
    except _Fail as fail:
        return 0, _s.failed("acl.rt.create_stream", fail)


def create_stream_with_config(priority: int, flag: int, /) -> tuple[int, int]:
    """``stream, ret``: create_stream with a priority (0 highest .. 7, clamped) and ACL_STREAM_* flags.

    The simulated device serves executes first come, first served, so neither changes scheduling here; any
    flag value is accepted, as the CANN docs say other values give a plain stream.
    """
    call = "acl.rt.create_stream_with_config"
    _a.i(call, 1, priority)
    _a.i(call, 2, flag)
    try:
        _fault("rt.create_stream_with_config")
        _s.require_init()
        return _s.create_stream(_s.current_context()).handle, 0
    except _Fail as fail:
        return 0, _s.failed(call, fail)


def destroy_stream(stream: int, /) -> int:
    """``ret``; waits for the stream's pending work first."""
    call = "acl.rt.destroy_stream"
    stream = _a.k(call, 1, stream)
    try:
        _fault("rt.destroy_stream")
        _s.require_init()
        if stream == 0:
            raise _Fail(_C.ACL_ERROR_INVALID_PARAM, "the default stream (0) cannot be destroyed")
        _s.destroy_stream(_s.stream(stream, _s.current_context()))
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


def _synchronize(call: str, api: str, stream: int, timeout_s: "float | None") -> int:
    try:
        _fault(api)
        _s.require_init()
        error = _s.stream(stream, _s.current_context()).synchronize(timeout_s)
    except _Fail as fail:
        return _s.failed(call, fail)
    # Reported, not raised: raising would tie the stored error's traceback to this frame, whose ``error``
    # refers back to it, a cycle that keeps the caller's frames (and their arrays) until a gc run.
    return 0 if error is None else _s.failed(call, error)


def synchronize_stream(stream: int, /) -> int:
    """``ret``: waits (without the GIL) for the stream's tasks; the first error any of them hit."""
    call = "acl.rt.synchronize_stream"
    return _synchronize(call, "rt.synchronize_stream", _a.k(call, 1, stream), None)


def synchronize_stream_with_timeout(stream: int, timeout: int, /) -> int:
    """``ret``; ``timeout`` in ms, -1 waits forever; 507046 when it expires."""
    call = "acl.rt.synchronize_stream_with_timeout"
    stream = _a.k(call, 1, stream)
    timeout = _a.i(call, 2, timeout)
    if timeout < -1:
        return _s.failed(call, _Fail(_C.ACL_ERROR_INVALID_PARAM, f"timeout {timeout} ms; use -1 or >= 0"))
    return _synchronize(
        call, "rt.synchronize_stream_with_timeout", stream, None if timeout == -1 else timeout / 1000
    )


def synchronize_device() -> int:
    """``ret``: waits for every stream of the current context's device."""
    call = "acl.rt.synchronize_device"
    try:
        _fault("rt.synchronize_device")
        _s.require_init()
        device = _s.current_context().device
        streams = []
        for ctx in list(_SIM.contexts.values()):
            if ctx.device == device:
                streams.extend(ctx.streams.values())
                if ctx.default_stream is not None:
                    streams.append(ctx.default_stream)
        first = None
        for stream in streams:
            error = stream.synchronize()
            first = first or error
        if first is not None:
            raise first
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


# -- memory ---------------------------------------------------------------------------------------------


def _check_policy(policy: int) -> None:
    if policy < 0 or (policy & 0xFF) > 7 or policy & ~0x11FF:
        raise _Fail(_C.ACL_ERROR_INVALID_PARAM, f"malloc policy {policy} is not an aclrtMemMallocPolicy")


def _device_malloc(call: str, api: str, size: int, policy: int, accounted: int) -> tuple[int, int]:
    try:
        _fault(api)
        _s.require_init()
        ctx = _s.current_context()
        if size == 0:
            raise _Fail(_C.ACL_ERROR_INVALID_PARAM, "size must not be 0")
        _check_policy(policy)
        arena = _SIM.memory.devices[ctx.device]
        alloc = arena.malloc(size, accounted)
        if alloc is None:
            raise _Fail(
                _C.ACL_ERROR_RT_MEMORY_ALLOCATION,
                f"device {ctx.device} is out of memory: {size} bytes ({accounted} with rounding) requested, "
                f"{arena.capacity - arena.used} of {arena.capacity} free (GE_PLUGIN_SIM_DEVICE_MEMORY_MB)",
            )
        return alloc.base, 0
    except _Fail as fail:
        return 0, _s.failed(call, fail)


def malloc(size: int, policy: int, /) -> tuple[int, int]:
    """``dev_ptr, ret``; the device takes ``size`` rounded up to 32 bytes plus 32; not initialised."""
    call = "acl.rt.malloc"
    size = _a.k(call, 1, size)
    policy = _a.i(call, 2, policy)
    return _device_malloc(call, "rt.malloc", size, policy, _malloc_size(size))


def malloc_align32(size: int, policy: int, /) -> tuple[int, int]:
    """``dev_ptr, ret``; rounded up to 32 bytes only."""
    call = "acl.rt.malloc_align32"
    size = _a.k(call, 1, size)
    policy = _a.i(call, 2, policy)
    return _device_malloc(call, "rt.malloc_align32", size, policy, _align_up(max(size, 1), 32))


def malloc_cached(size: int, policy: int, /) -> tuple[int, int]:
    """``dev_ptr, ret``; the simulator has no cache, so this is malloc."""
    call = "acl.rt.malloc_cached"
    size = _a.k(call, 1, size)
    policy = _a.i(call, 2, policy)
    return _device_malloc(call, "rt.malloc_cached", size, policy, _malloc_size(size))


def free(dev_ptr: int, /) -> int:
    """``ret``; only the start of an allocation from malloc; no implicit synchronisation."""
    call = "acl.rt.free"
    dev_ptr = _a.k(call, 1, dev_ptr)
    try:
        _fault("rt.free")
        _s.require_init()
        kind, alloc, why = _SIM.memory.locate(dev_ptr)
        if kind == _PINNED:
            raise _Fail(
                _C.ACL_ERROR_INVALID_PARAM,
                f"0x{dev_ptr:x} is pinned host memory; free it with acl.rt.free_host",
            )
        if kind != _DEVICE:
            raise _Fail(_C.ACL_ERROR_INVALID_PARAM, why or f"0x{dev_ptr:x} is host memory, not device memory")
        if alloc.base != dev_ptr:
            raise _Fail(
                _C.ACL_ERROR_INVALID_PARAM,
                f"0x{dev_ptr:x} is inside the allocation at 0x{alloc.base:x}; free takes the address malloc returned",
            )
        _SIM.memory.devices[alloc.device].free(dev_ptr)
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


def malloc_host(size: int, /) -> tuple[int, int]:
    """``host_ptr, ret``: pinned, 64-byte aligned host memory (real memory: host code writes into it)."""
    call = "acl.rt.malloc_host"
    size = _a.k(call, 1, size)
    try:
        _fault("rt.malloc_host")
        _s.require_init()
        _s.current_context()
        if size == 0:
            raise _Fail(_C.ACL_ERROR_INVALID_PARAM, "size must not be 0")
        return _SIM.memory.pinned.malloc(size).base, 0
    except _Fail as fail:
        return 0, _s.failed(call, fail)
    except MemoryError:
        return 0, _s.failed(call, _Fail(_C.ACL_ERROR_BAD_ALLOC, f"the host cannot provide {size} bytes"))


def free_host(host_ptr: int, /) -> int:
    """``ret``; only for memory from malloc_host."""
    call = "acl.rt.free_host"
    host_ptr = _a.k(call, 1, host_ptr)
    try:
        _fault("rt.free_host")
        _s.require_init()
        kind, alloc, why = _SIM.memory.locate(host_ptr)
        if kind != _PINNED or alloc.base != host_ptr:
            detail = (
                "device memory; free it with acl.rt.free"
                if kind == _DEVICE
                else "not the start of memory from acl.rt.malloc_host"
            )
            raise _Fail(_C.ACL_ERROR_INVALID_PARAM, why or f"0x{host_ptr:x} is {detail}")
        _SIM.memory.pinned.free(host_ptr)
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


def memcpy(dst: int, dest_max: int, src: int, count: int, kind: int, /) -> int:
    """``ret``: a synchronous copy; ``kind`` must match where ``dst`` and ``src`` live (or be ACL_MEMCPY_DEFAULT)."""
    call = "acl.rt.memcpy"
    dst = _a.k(call, 1, dst)
    dest_max = _a.k(call, 2, dest_max)
    src = _a.k(call, 3, src)
    count = _a.k(call, 4, count)
    kind = _a.i(call, 5, kind)
    try:
        _fault("rt.memcpy")
        _s.require_init()
        ctx = _s.current_context()
        _SIM.memory.plan_copy(dst, dest_max, src, count, kind, ctx.device, asynchronous=False).run()
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


def _injected_task(code: int, api: str) -> None:
    raise _Fail(code, f"fault injected by the ge-plugin simulator into acl.{api} (see ge_plugin.sim.faults)")


def memcpy_async(dst: int, dest_max: int, src: int, count: int, kind: int, stream: int, /) -> int:
    """``ret``: queues the copy on ``stream``; host memory must come from malloc_host, addresses 64-byte aligned."""
    call = "acl.rt.memcpy_async"
    dst = _a.k(call, 1, dst)
    dest_max = _a.k(call, 2, dest_max)
    src = _a.k(call, 3, src)
    count = _a.k(call, 4, count)
    kind = _a.i(call, 5, kind)
    stream = _a.k(call, 6, stream)
    try:
        _s.require_init()
        ctx = _s.current_context()
        target = _s.stream(stream, ctx)
        plan = _SIM.memory.plan_copy(dst, dest_max, src, count, kind, ctx.device, asynchronous=True)
        injected = _faults.hit("rt.memcpy_async") if _faults.RULES else 0
        if injected:
            target.submit(_injected_task, injected, "rt.memcpy_async")
        else:
            target.submit(plan.run)
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


def _memset_plan(ptr: int, max_count: int, value: int, count: int) -> tuple:
    addr, alloc = _SIM.memory.plan_memset(ptr, max_count, count)
    return addr, value & 0xFF, count, alloc


def _memset_run(addr: int, value: int, count: int, alloc: "_Allocation | None") -> None:
    if alloc is not None and alloc.freed:
        raise _Fail(_C.ACL_ERROR_RT_MEMORY_FREE, f"0x{alloc.base:x} was freed before the memset ran")
    if count:
        _ctypes.memset(addr, value, count)


def memset(dev_ptr: int, max_count: int, value: int, count: int, /) -> int:
    """``ret``: sets ``count`` bytes to ``value`` (its low byte), on device or host memory."""
    call = "acl.rt.memset"
    dev_ptr = _a.k(call, 1, dev_ptr)
    max_count = _a.k(call, 2, max_count)
    value = _a.i(call, 3, value)
    count = _a.k(call, 4, count)
    try:
        _fault("rt.memset")
        _s.require_init()
        _s.current_context()
        _memset_run(*_memset_plan(dev_ptr, max_count, value, count))
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


def memset_async(dev_ptr: int, max_count: int, value: int, count: int, stream: int, /) -> int:
    """``ret``: memset queued on ``stream``."""
    call = "acl.rt.memset_async"
    dev_ptr = _a.k(call, 1, dev_ptr)
    max_count = _a.k(call, 2, max_count)
    value = _a.i(call, 3, value)
    count = _a.k(call, 4, count)
    stream = _a.k(call, 5, stream)
    try:
        _s.require_init()
        target = _s.stream(stream, _s.current_context())
        plan = _memset_plan(dev_ptr, max_count, value, count)
        injected = _faults.hit("rt.memset_async") if _faults.RULES else 0
        if injected:
            target.submit(_injected_task, injected, "rt.memset_async")
        else:
            target.submit(_memset_run, *plan)
        return 0
    except _Fail as fail:
        return _s.failed(call, fail)


def get_mem_info(attr: int, /) -> tuple[int, int, int]:
    """``free, total, ret`` of the current device (every aclrtMemAttr reports the same device memory)."""
    call = "acl.rt.get_mem_info"
    attr = _a.i(call, 1, attr)
    try:
        _fault("rt.get_mem_info")
        _s.require_init()
        ctx = _s.current_context()
        if not _C.ACL_DDR_MEM <= attr <= _C.ACL_HBM_MEM_NORMAL:
            raise _Fail(_C.ACL_ERROR_INVALID_PARAM, f"attr {attr} is not an aclrtMemAttr (0..5)")
        arena = _SIM.memory.devices[ctx.device]
        return arena.capacity - arena.used, arena.capacity, 0
    except _Fail as fail:
        return 0, 0, _s.failed(call, fail)


#: get_device_info answers, per aclrtDevAttr (an Ascend 910B3's core counts; memory is the simulated capacity)
_DEVICE_INFO = {
    _K.ACL_DEV_ATTR_AICPU_CORE_NUM: 6,
    _K.ACL_DEV_ATTR_AICORE_CORE_NUM: 20,
    _K.ACL_DEV_ATTR_CUBE_CORE_NUM: 20,
    _K.ACL_DEV_ATTR_VECTOR_CORE_NUM: 40,
}


def _c_int(value: int) -> int:
    """What ``Py_BuildValue("i", int64)`` makes of it: the low 32 bits, signed."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def get_device_info(device_id: int, attr: int, /) -> tuple[int, int]:
    """``value, ret`` for an aclrtDevAttr: core counts and ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE (301).

    pyACL builds ``value`` (an int64) with ``"i"``, so it is truncated to a C int: a 32 GiB total reads 0.
    """
    call = "acl.rt.get_device_info"
    device_id = _a.u32(call, 1, device_id)
    attr = _a.u32(call, 2, attr)
    try:
        _fault("rt.get_device_info")
        _s.require_init()
        _s.device(device_id)
        if attr == _K.ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE:
            return _c_int(_SIM.memory.devices[device_id].capacity), 0
        if attr not in _DEVICE_INFO:
            raise _Fail(
                _C.ACL_ERROR_INVALID_PARAM,
                f"attr {attr} is not an aclrtDevAttr the simulator answers ({sorted(_DEVICE_INFO)} and 301)",
            )
        return _DEVICE_INFO[attr], 0
    except _Fail as fail:
        return 0, _s.failed(call, fail)
