"""``acl.rt``, simulated: devices, contexts, streams and memory.

Rules enforced as the runtime does: a current context per thread (``set_device`` makes the device's default
context current, ``create_context`` makes the new one current; calls that need one without it return
ACL_ERROR_RT_CONTEXT_NULL, 107002); a stream belongs to the context that created it (using it from another
returns ACL_ERROR_RT_STREAM_CONTEXT, 107003); device memory is accounted against each device's capacity
(ACL_ERROR_RT_MEMORY_ALLOCATION, 207001, when full); copies are checked against where each pointer lives.
``synchronize_*`` release the GIL while they wait; ``memcpy`` holds it, as in pyACL. In timing-only mode
copies and memsets are checked and counted but move no byte (see ``device_time``).
"""

import ctypes as _ctypes
import os as _os
from typing import NamedTuple as _NamedTuple
from typing import Protocol as _Protocol

from ge_plugin import acl_constants as _C
from ge_plugin.sim import _args as _a
from ge_plugin.sim import _codes as _K
from ge_plugin.sim import _state as _s
from ge_plugin.sim import device_time as _device_time
from ge_plugin.sim import faults as _faults
from ge_plugin.sim import sanitizer as _sanitizer
from ge_plugin.sim._api import acl_call as _acl_call
from ge_plugin.sim._api import value_and_ret as _value_and_ret
from ge_plugin.sim._fail import Fail as _Fail
from ge_plugin.sim._rt_events import (
    create_event,
    create_event_with_flag,
    destroy_event,
    event_elapsed_time,
    launch_callback,
    process_report,
    query_event,
    query_event_status,
    record_event,
    reset_event,
    stream_wait_event,
    subscribe_report,
    synchronize_event,
    synchronize_event_with_timeout,
    unsubscribe_report,
)
from ge_plugin.sim._rt_events import seconds as _seconds
from ge_plugin.sim._rt_events import timeout_ms as _timeout_ms
from ge_plugin.sim._sites import origin as _origin
from ge_plugin.sim.memory import DEVICE as _DEVICE
from ge_plugin.sim.memory import HOST as _HOST
from ge_plugin.sim.memory import PINNED as _PINNED
from ge_plugin.sim.memory import Allocation as _Allocation
from ge_plugin.sim.memory import align_up as _align_up
from ge_plugin.sim.memory import malloc_size as _malloc_size
from ge_plugin.sim.streams import FailedRecord as _FailedRecord
from ge_plugin.sim.streams import Record as _Record
from ge_plugin.sim.streams import Stream as _Stream

__all__ = [
    "create_context",
    "create_event",
    "create_event_with_flag",
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
    "get_phy_dev_id_by_logic_dev_id",
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
    "query_event",
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
_TIMING = _device_time.STATE


# -- devices and contexts -------------------------------------------------------------------------------


@_acl_call("acl.rt.set_device", _a.i)
def set_device(device_id: int, /) -> int:
    """``ret``; opens the device (reference-counted) and makes its default context current in this thread."""
    with _SIM.lock:
        dev = _s.device(device_id)
        dev.refcount += 1
        if dev.default_context is None:
            dev.default_context = _s.create_context(device_id, default=True)
        _s.set_current(dev.default_context)
    return 0


@_acl_call("acl.rt.reset_device", _a.i)
def reset_device(device_id: int, /) -> int:
    """``ret``; the last reset releases the device's contexts, streams, models and memory."""
    with _SIM.lock:
        dev = _s.device(device_id)
        if dev.refcount > 0:
            dev.refcount -= 1
            if dev.refcount == 0:
                _s.release_device(dev, _origin(f"acl.rt.reset_device({device_id})"))
    return 0


@_acl_call("acl.rt.get_device", failure=_value_and_ret(0))
def get_device() -> tuple[int, int]:
    """``device_id, ret``: the device of this thread's current context."""
    return _s.current_context().device, 0


@_acl_call("acl.rt.get_device_count", failure=_value_and_ret(0))
def get_device_count() -> tuple[int, int]:
    """``count, ret``."""
    return len(_SIM.devices), 0


@_acl_call("acl.rt.get_phy_dev_id_by_logic_dev_id", _a.i, failure=_value_and_ret(0))
def get_phy_dev_id_by_logic_dev_id(device_id: int, /) -> tuple[int, int]:
    """``phy_dev_id, ret``: the chip behind a device id as a process numbers it (CANN says the argument is
    really the user device id). Outside a container the two are the same; in one, the Ascend container
    runtime mounts the chips its ``ASCEND_VISIBLE_DEVICES`` lists (``4,5`` or ``Ascend910-4,Ascend910-5``)
    and the process sees them as 0..N-1 in the order of their ids."""
    _s.device(device_id)
    chips = _visible_chips()
    if chips is None:
        return device_id, 0
    if device_id >= len(chips):
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"device {device_id} is not one of the {len(chips)} NPUs ASCEND_VISIBLE_DEVICES gives this container",
        )
    return chips[device_id], 0


def _visible_chips() -> list[int] | None:
    text = _os.environ.get("ASCEND_VISIBLE_DEVICES", "").strip()
    if not text:
        return None
    try:
        return sorted(int(item.rsplit("-", 1)[-1]) for item in text.split(","))
    except ValueError:
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM, f"ASCEND_VISIBLE_DEVICES={text!r} is not a list of NPU ids"
        ) from None


@_acl_call("acl.rt.create_context", _a.i, failure=_value_and_ret(0))
def create_context(device_id: int, /) -> tuple[int, int]:
    """``context, ret``; the new context becomes this thread's current context."""
    with _SIM.lock:
        _s.device(device_id)
        ctx = _s.create_context(device_id, default=False)
    _s.set_current(ctx)
    return ctx.handle, 0


@_acl_call("acl.rt.set_context", _a.k)
def set_context(context: int, /) -> int:
    """``ret``; makes ``context`` this thread's current context (every worker thread must)."""
    _s.set_current(_s.context(context))
    return 0


@_acl_call("acl.rt.get_context", failure=_value_and_ret(0))
def get_context() -> tuple[int, int]:
    """``context, ret``; (0, 107002) when this thread has none."""
    return _s.current_context().handle, 0


@_acl_call("acl.rt.destroy_context", _a.k)
def destroy_context(context: int, /) -> int:
    """``ret``; only for contexts from create_context. Its streams are destroyed with it."""
    with _SIM.lock:
        ctx = _s.context(context)
        if ctx.default:
            raise _Fail(
                _C.ACL_ERROR_INVALID_PARAM,
                f"0x{context:x} is the default context of device {ctx.device}; acl.rt.reset_device releases it",
            )
        _s.destroy_context(ctx)
    return 0


@_acl_call("acl.rt.get_run_mode", init=False, failure=_value_and_ret(0))
def get_run_mode() -> tuple[int, int]:
    """``run_mode, ret``: ACL_HOST (1), a PCIe card in a server, or ACL_DEVICE (0) on the boards where the
    program runs on the device (GE_PLUGIN_SIM_RUN_MODE, or the SoC); asked before acl.init too."""
    return (_C.ACL_DEVICE if _s.device_run_mode() else _C.ACL_HOST), 0


# -- streams --------------------------------------------------------------------------------------------


@_acl_call("acl.rt.create_stream", failure=_value_and_ret(0))
def create_stream() -> tuple[int, int]:
    """``stream, ret``: a stream of the current context, with its own worker thread."""
    return _s.create_stream(_s.current_context()).handle, 0


@_acl_call("acl.rt.create_stream_with_config", _a.i, _a.i, failure=_value_and_ret(0))
def create_stream_with_config(priority: int, flag: int, /) -> tuple[int, int]:
    """``stream, ret``: create_stream with a priority (0 highest .. 7, clamped) and ACL_STREAM_* flags.

    The simulated device serves executes first come, first served, so neither changes scheduling here; any
    flag value is accepted, as the CANN docs say other values give a plain stream.
    """
    return _s.create_stream(_s.current_context()).handle, 0


@_acl_call("acl.rt.destroy_stream", _a.k)
def destroy_stream(stream: int, /) -> int:
    """``ret``; waits for the stream's pending work first."""
    if stream == 0:
        raise _Fail(_C.ACL_ERROR_INVALID_PARAM, "the default stream (0) cannot be destroyed")
    _s.destroy_stream(_s.stream(stream, _s.current_context()))
    return 0


def _synchronize(call: str, stream: int, timeout_s: "float | None") -> int:
    error = _s.stream(stream, _s.current_context()).synchronize(timeout_s)
    # Reported, not raised: raising would tie the stored error's traceback to this frame, whose ``error``
    # refers back to it, a cycle that keeps the caller's frames (and their arrays) until a gc run.
    return 0 if error is None else _s.failed(call, error)


@_acl_call("acl.rt.synchronize_stream", _a.k)
def synchronize_stream(stream: int, /) -> int:
    """``ret``: waits (without the GIL) for the stream's tasks; the first error any of them hit."""
    return _synchronize("acl.rt.synchronize_stream", stream, None)


@_acl_call("acl.rt.synchronize_stream_with_timeout", _a.k, _timeout_ms)
def synchronize_stream_with_timeout(stream: int, timeout: int, /) -> int:
    """``ret``; ``timeout`` in ms, -1 waits forever; 507046 when it expires."""
    return _synchronize("acl.rt.synchronize_stream_with_timeout", stream, _seconds(timeout))


@_acl_call("acl.rt.synchronize_device")
def synchronize_device() -> int:
    """``ret``: waits for every stream of the current context's device."""
    device = _s.current_context().device
    streams: list[_Stream] = []
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


# -- memory ---------------------------------------------------------------------------------------------


def _check_policy(policy: int) -> None:
    if policy < 0 or (policy & 0xFF) > 7 or policy & ~0x11FF:
        raise _Fail(_C.ACL_ERROR_INVALID_PARAM, f"malloc policy {policy} is not an aclrtMemMallocPolicy")


def _device_malloc(call: str, size: int, policy: int, accounted: int) -> int:
    """``size`` bytes of the current device, ``accounted`` charged to it; raises Fail."""
    ctx = _s.current_context()
    if size == 0:
        raise _Fail(_C.ACL_ERROR_INVALID_PARAM, "size must not be 0")
    _check_policy(policy)
    arena = _s.memory().devices[ctx.device]
    alloc = arena.malloc(size, accounted, _origin(f"{call}({size})"))
    if alloc is None:
        raise _Fail(
            _C.ACL_ERROR_RT_MEMORY_ALLOCATION,
            f"device {ctx.device} is out of memory: {size} bytes ({accounted} with rounding) requested, "
            f"{arena.capacity - arena.used} of {arena.capacity} free (GE_PLUGIN_SIM_DEVICE_MEMORY_MB)",
        )
    return alloc.base


@_acl_call("acl.rt.malloc", _a.k, _a.i, failure=_value_and_ret(0))
def malloc(size: int, policy: int, /) -> tuple[int, int]:
    """``dev_ptr, ret``; the device takes ``size`` rounded up to 32 bytes plus 32; not initialised."""
    return _device_malloc("acl.rt.malloc", size, policy, _malloc_size(size)), 0


@_acl_call("acl.rt.malloc_align32", _a.k, _a.i, failure=_value_and_ret(0))
def malloc_align32(size: int, policy: int, /) -> tuple[int, int]:
    """``dev_ptr, ret``; rounded up to 32 bytes only."""
    return _device_malloc("acl.rt.malloc_align32", size, policy, _align_up(max(size, 1), 32)), 0


@_acl_call("acl.rt.malloc_cached", _a.k, _a.i, failure=_value_and_ret(0))
def malloc_cached(size: int, policy: int, /) -> tuple[int, int]:
    """``dev_ptr, ret``; the simulator has no cache, so this is malloc."""
    return _device_malloc("acl.rt.malloc_cached", size, policy, _malloc_size(size)), 0


@_acl_call("acl.rt.free", _a.k)
def free(dev_ptr: int, /) -> int:
    """``ret``; only the start of an allocation from malloc; no implicit synchronisation."""
    kind, alloc, why, fault = _s.memory().locate(dev_ptr)
    if kind == _PINNED:
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"0x{dev_ptr:x} is {alloc.describe()}; free it with acl.rt.free_host",  # type: ignore[union-attr]
            _sanitizer.WRONG_MEMORY_KIND,
        )
    if kind != _DEVICE or alloc is None:
        if kind == _HOST:
            raise _Fail(
                _C.ACL_ERROR_INVALID_PARAM,
                f"0x{dev_ptr:x} is host memory, not device memory from acl.rt.malloc",
                _sanitizer.WRONG_MEMORY_KIND,
            )
        raise _Fail(_C.ACL_ERROR_INVALID_PARAM, why, _freeing(fault))
    if alloc.base != dev_ptr:
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"0x{dev_ptr:x} is inside {alloc.describe()}; free takes the address malloc returned",
            _sanitizer.INVALID_FREE,
        )
    if _from_malloc_host(alloc):
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"0x{dev_ptr:x} is {alloc.describe()}; free it with acl.rt.free_host",
            _sanitizer.WRONG_MEMORY_KIND,
        )
    if alloc.origin.call.startswith("acl.media.dvpp_malloc"):
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"0x{dev_ptr:x} is {alloc.describe()}, DVPP memory; free it with acl.media.dvpp_free",
            _sanitizer.WRONG_MEMORY_KIND,
        )
    _s.memory().devices[alloc.device].free(dev_ptr, _origin("acl.rt.free"))
    return 0


_MALLOC_HOST = "acl.rt.malloc_host"


def _from_malloc_host(alloc: _Allocation) -> bool:
    """RC mode: device memory that malloc_host made (free_host frees it)."""
    return alloc.origin.call.startswith(_MALLOC_HOST)


def _freeing(fault: "str | None") -> "str | None":
    """Freeing memory that was freed is a double free; any other bad pointer, an invalid free."""
    return _sanitizer.DOUBLE_FREE if fault == _sanitizer.USE_AFTER_FREE else _sanitizer.INVALID_FREE


@_acl_call("acl.rt.malloc_host", _a.k, failure=_value_and_ret(0))
def malloc_host(size: int, /) -> tuple[int, int]:
    """``host_ptr, ret``: pinned, page-aligned host memory (real memory: host code writes into it); in RC mode
    (ACL_DEVICE) the device's own memory, as the pyACL docs say of that mode (free_host frees it)."""
    _s.current_context()
    if size == 0:
        raise _Fail(_C.ACL_ERROR_INVALID_PARAM, "size must not be 0")
    memory = _s.memory()
    if memory.device_run_mode:  # on the device, "host" memory is the device's own (the pyACL docs)
        return _device_malloc(_MALLOC_HOST, size, 0, _align_up(size, 64)), 0
    try:
        return memory.pinned.malloc(size, _origin(f"{_MALLOC_HOST}({size})")).base, 0
    except MemoryError:
        raise _Fail(_C.ACL_ERROR_BAD_ALLOC, f"the host cannot provide {size} bytes") from None


@_acl_call("acl.rt.free_host", _a.k)
def free_host(host_ptr: int, /) -> int:
    """``ret``; only for memory from malloc_host."""
    kind, alloc, why, fault = _s.memory().locate(host_ptr)
    if kind == _DEVICE and alloc is not None and _from_malloc_host(alloc) and alloc.base == host_ptr:
        _s.memory().devices[alloc.device].free(host_ptr, _origin("acl.rt.free_host"))
        return 0
    if kind == _DEVICE:
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"0x{host_ptr:x} is {alloc.describe()}; free it with acl.rt.free",  # type: ignore[union-attr]
            _sanitizer.WRONG_MEMORY_KIND,
        )
    if kind == _HOST:
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"0x{host_ptr:x} is not memory from acl.rt.malloc_host",
            _sanitizer.INVALID_FREE,
        )
    if kind != _PINNED or alloc is None:
        raise _Fail(_C.ACL_ERROR_INVALID_PARAM, why, _freeing(fault))
    if alloc.base != host_ptr:
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"0x{host_ptr:x} is inside {alloc.describe()}; free_host takes the address malloc_host returned",
            _sanitizer.INVALID_FREE,
        )
    _s.memory().pinned.free(host_ptr, _origin("acl.rt.free_host"))
    return 0


@_acl_call("acl.rt.memcpy", _a.k, _a.k, _a.k, _a.k, _a.i)
def memcpy(dst: int, dest_max: int, src: int, count: int, kind: int, /) -> int:
    """``ret``: a synchronous copy; ``kind`` must match where ``dst`` and ``src`` live (or be ACL_MEMCPY_DEFAULT)."""
    ctx = _s.current_context()
    plan = _s.memory().plan_copy(dst, dest_max, src, count, kind, ctx.device, asynchronous=False)
    if _TIMING.timing_only:
        plan.timed()
    else:
        plan.run()
    return 0


def _injected_task(code: int, api: str) -> None:
    raise _s.injected(code, api)


class _Plan(_Protocol):
    def run(self) -> None: ...

    def timed(self, at: "float | None" = None) -> None: ...


class _PlanRecord(_Record):
    """A copy or memset on a timing-only stream: checked and counted when its time comes, no byte moved."""

    __slots__ = ("plan",)

    def __init__(self, plan: _Plan):
        self.plan = plan

    def place(self, ready: float) -> None:
        """A copy lasts its bytes over the profile's bandwidth (device_time.copy_s); a memset takes none."""
        self.start = ready
        direction = getattr(self.plan, "direction", None)
        self.end = ready + (_device_time.copy_s(direction, self.plan.count) if direction else 0.0)  # type: ignore[attr-defined]

    def settle(self) -> None:
        self.plan.timed(self.start)


def _queue(target: _Stream, api: str, plan: _Plan) -> None:
    """Queue ``plan`` (a copy, a memset, ``acl.media``'s DVPP work) on ``target``; when a fault rule of ``api`` fires, work failing with its code instead
    (the call succeeds, synchronize_stream reports it)."""
    injected = _faults.hit(api) if _faults.RULES else 0
    if _TIMING.timing_only:
        target.enqueue(_FailedRecord(_s.injected(injected, api)) if injected else _PlanRecord(plan))
    elif injected:
        target.submit(_injected_task, injected, api)
    else:
        target.submit(plan.run)


@_acl_call("acl.rt.memcpy_async", _a.k, _a.k, _a.k, _a.k, _a.i, _a.k, fault=None)
def memcpy_async(dst: int, dest_max: int, src: int, count: int, kind: int, stream: int, /) -> int:
    """``ret``: queues the copy on ``stream``; host memory must come from malloc_host, addresses 64-byte aligned.

    An injected fault is the task's: the call succeeds and synchronize_stream reports it."""
    ctx = _s.current_context()
    target = _s.stream(stream, ctx)
    plan = _s.memory().plan_copy(
        dst, dest_max, src, count, kind, ctx.device, asynchronous=True, call="acl.rt.memcpy_async"
    )
    _queue(target, "rt.memcpy_async", plan)
    return 0


class _MemsetPlan(_NamedTuple):
    """A checked memset, run now (memset) or by the stream (memset_async)."""

    addr: int  #: where the bytes really are in this process
    value: int  #: the byte to write
    nbytes: int
    alloc: "_Allocation | None"  #: the allocation written into, None for other host memory

    def run(self) -> None:
        self.timed(None)
        if self.nbytes:
            _ctypes.memset(self.addr, self.value, self.nbytes)

    def timed(self, at: "float | None" = None) -> None:
        """Fail if the memory was freed before the memset ran (at ``at``; None: now); no byte written."""
        alloc = self.alloc
        if alloc is not None and alloc.freed and (at is None or alloc.freed_at < at):
            raise _Fail(
                _C.ACL_ERROR_RT_MEMORY_FREE,
                f"{alloc.describe()} was freed before the memset ran",
                _sanitizer.USE_AFTER_FREE,
            )


def _memset_plan(call: str, ptr: int, max_count: int, value: int, count: int) -> _MemsetPlan:
    place = _s.memory().plan_memset(ptr, max_count, count, call)
    return _MemsetPlan(place.real(ptr), value & 0xFF, count, place.alloc)


@_acl_call("acl.rt.memset", _a.k, _a.k, _a.i, _a.k)
def memset(dev_ptr: int, max_count: int, value: int, count: int, /) -> int:
    """``ret``: sets ``count`` bytes to ``value`` (its low byte), on device or host memory."""
    _s.current_context()
    plan = _memset_plan("acl.rt.memset", dev_ptr, max_count, value, count)
    if _TIMING.timing_only:
        plan.timed()
    else:
        plan.run()
    return 0


@_acl_call("acl.rt.memset_async", _a.k, _a.k, _a.i, _a.k, _a.k, fault=None)
def memset_async(dev_ptr: int, max_count: int, value: int, count: int, stream: int, /) -> int:
    """``ret``: memset queued on ``stream`` (an injected fault is the task's, as for memcpy_async)."""
    target = _s.stream(stream, _s.current_context())
    _queue(target, "rt.memset_async", _memset_plan("acl.rt.memset_async", dev_ptr, max_count, value, count))
    return 0


@_acl_call("acl.rt.get_mem_info", _a.i, failure=_value_and_ret(0, 0))
def get_mem_info(attr: int, /) -> tuple[int, int, int]:
    """``free, total, ret`` of the current device (every aclrtMemAttr reports the same device memory)."""
    ctx = _s.current_context()
    if not _C.ACL_DDR_MEM <= attr <= _C.ACL_HBM_MEM_NORMAL:
        raise _Fail(_C.ACL_ERROR_INVALID_PARAM, f"attr {attr} is not an aclrtMemAttr (0..5)")
    arena = _s.memory().devices[ctx.device]
    return arena.capacity - arena.used, arena.capacity, 0


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


@_acl_call("acl.rt.get_device_info", _a.u32, _a.u32, failure=_value_and_ret(0))
def get_device_info(device_id: int, attr: int, /) -> tuple[int, int]:
    """``value, ret`` for an aclrtDevAttr: core counts and ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE (301).

    pyACL builds ``value`` (an int64) with ``"i"``, so it is truncated to a C int: a 32 GiB total reads 0.
    """
    _s.device(device_id)
    if attr == _K.ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE:
        return _c_int(_s.memory().devices[device_id].capacity), 0
    if attr not in _DEVICE_INFO:
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"attr {attr} is not an aclrtDevAttr the simulator answers ({sorted(_DEVICE_INFO)} and 301)",
        )
    return _DEVICE_INFO[attr], 0
