"""The simulator's process state: init, devices, contexts, streams, handles and per-thread errors.

pyACL is process-global (one ``acl.init`` per process) with a current context per thread, so this module is
too. Everything here is private; the pyACL-shaped modules (``acl``, ``rt``, ``mdl``, ``util``) call it.
``reset_for_tests`` puts everything back to a fresh process, which tests need because ``acl.init`` may run
only once per process.
"""

from __future__ import annotations

import atexit
import itertools
import os
import threading
from typing import Any

from ge_plugin import acl_constants as C
from ge_plugin.acl_constants import error_name
from ge_plugin.sim import (
    _config,
    _dvpp_state,
    _host_objects,
    counters,
    device_time,
    events,
    faults,
    sanitizer,
)
from ge_plugin.sim._config import SimConfig
from ge_plugin.sim._fail import Fail
from ge_plugin.sim._sites import UNKNOWN, Origin, Site, origin
from ge_plugin.sim.memory import HANDLE_BASE, Allocation, Memory
from ge_plugin.sim.streams import Stream

#: streams per device, as on Ascend 910 (the docs cite 1024/2048)
MAX_STREAMS = 1024
#: messages kept per thread for acl.get_recent_err_msg
_MAX_MESSAGES = 32


class Context:
    __slots__ = ("default", "default_stream", "destroyed", "device", "handle", "streams")

    def __init__(self, handle: int, device: int, default: bool):
        self.handle = handle
        self.device = device
        self.default = default
        self.destroyed = False
        self.streams: dict[int, Stream] = {}
        self.default_stream: Stream | None = None


class Device:
    __slots__ = ("default_context", "id", "refcount")

    def __init__(self, device: int):
        self.id = device
        self.refcount = 0
        self.default_context: Context | None = None


class _State:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.initialized = False
        self.finalized = False
        self.config = SimConfig()
        self.memory: Memory | None = None
        self.devices: list[Device] = []
        self.contexts: dict[int, Context] = {}
        self.streams: dict[int, Stream] = {}
        self.models: dict[int, Any] = {}
        self.model_ids = itertools.count(1)
        # host-side objects: pyACL creates these without acl.init
        self.buffers: dict[int, Any] = {}
        self.datasets: dict[int, Any] = {}
        self.descs: dict[int, Any] = {}
        self.tensor_descs: dict[int, Any] = {}
        self.events: dict[int, Any] = {}
        self.exit_leaks_reported = False


SIM = _State()
_tls = threading.local()
_handles = itertools.count(1)
_atexit_registered = False


def new_handle() -> int:
    return HANDLE_BASE + 64 * next(_handles)


# -- errors ---------------------------------------------------------------------------------------------


def record(message: str) -> None:
    """Add a message for this thread's next acl.get_recent_err_msg (which returns the newest first)."""
    messages = getattr(_tls, "errors", None)
    if messages is None:
        messages = _tls.errors = []
    messages.append(message)
    if len(messages) > _MAX_MESSAGES:
        del messages[0]


def failed(call: str, fail: Fail) -> int:
    """Record ``fail`` for this thread and return its code: the one line every API uses on failure. A
    failure that is a memory bug of the program is also a sanitizer finding (reported when checking)."""
    record(f"{call} failed: {fail.message} [{error_name(fail.code)} {fail.code}]")
    if fail.kind is not None:
        sanitizer.report_error(fail.kind, call, fail.message, fail.code)
    return fail.code


def take_messages() -> str | None:
    """This thread's messages, newest first, and forget them (aclGetRecentErrMsg obtains *and clears*)."""
    messages = getattr(_tls, "errors", None)
    if not messages:
        return None
    text = "\n".join(reversed(messages))
    messages.clear()
    return text


def injected(code: int, api: str) -> Fail:
    """The failure a fault rule injects into ``api``; its message says so, wherever it is reported."""
    return Fail(code, f"fault injected by the ge-plugin simulator into acl.{api} (see ge_plugin.sim.faults)")


def check_fault(api: str) -> None:
    """Raise the injected failure for this call of ``api``, if a fault rule fires."""
    code = faults.hit(api)
    if code:
        raise injected(code, api)


# -- init -----------------------------------------------------------------------------------------------


def device_run_mode() -> bool:
    """Whether the simulated program runs on the device (RC, ACL_DEVICE): the initialised configuration's
    answer, or before acl.init the environment's (a program may ask first, as acllite does)."""
    if SIM.initialized:
        return SIM.config.device_run_mode
    try:
        return _config.load(os.environ, None).device_run_mode
    except ValueError:  # acl.init will say what is wrong
        return False


def require_init() -> None:
    if not SIM.initialized:
        if SIM.finalized:
            raise Fail(C.ACL_ERROR_UNINITIALIZE, "acl.finalize() was already called in this process")
        raise Fail(C.ACL_ERROR_UNINITIALIZE, "acl.init() has not been called")


def start(config: SimConfig) -> None:
    global _atexit_registered
    with SIM.lock:
        SIM.config = config
        events.resume()
        SIM.memory = Memory(
            config.devices, config.device_memory_bytes, device_run_mode=config.device_run_mode
        )
        SIM.devices = [Device(d) for d in range(config.devices)]
        for d in range(config.devices):
            counters.device(d)
        SIM.initialized = True
        if not _atexit_registered:
            atexit.register(_at_exit)
            _atexit_registered = True


def _at_exit() -> None:
    report_exit_leaks("process exit (acl.finalize was never called)")
    if SIM.initialized and SIM.config.report_dir:
        write_report(SIM.config.report_dir)


def report_exit_leaks(call: str) -> None:
    """At the end of a process that never finalized, what is still allocated leaked (reported once)."""
    if SIM.exit_leaks_reported or not SIM.initialized or SIM.memory is None:
        return
    SIM.exit_leaks_reported = True
    report_leaks(call, SIM.memory.live(), UNKNOWN)


#: what the report says about the data, per mode (``timing_only``)
DATA = {
    False: "computed: outputs come from onnxruntime, copies and memsets move their bytes",
    True: (
        "timing only: nothing was computed, copied, set or zero-filled; every output and copy destination "
        "kept whatever it held (the counts and bytes are the work the program queued)"
    ),
}


def write_report(directory: str) -> None:
    """The counters report, with the mode (what happened to the data) and, when checking is on, the
    sanitizer's findings."""
    data = counters.snapshot()
    timing = device_time.timing_only()
    data["mode"] = {"timing_only": timing, "data": DATA[timing]}
    if sanitizer.enabled():
        data["sanitizer"] = sanitizer.as_report()
    counters.write_report(directory, data)


def report_leaks(call: str, allocations: list[Allocation], site: Site | None = None) -> None:
    """Allocations the program never freed, now reclaimed by ``call``: leaks, when checking is on."""
    if allocations:
        sanitizer.report_leaks(call, (a.describe() for a in allocations), site)


def stop(by: Origin | None = None, report_dir: str | None = None) -> None:
    """Release everything acl.finalize releases; ``by`` is the call that asked (None: the tests' reset),
    which the freed memory remembers. The streams' queued work is waited for first; then, with
    ``report_dir``, the counters report is written, before anything is released."""
    events.abort()  # a stream blocked on an event or a callback must not hang finalize
    with SIM.lock:
        for stream in list(SIM.streams.values()):
            _stop_stream(stream)
        for ctx in SIM.contexts.values():
            if ctx.default_stream is not None:
                ctx.default_stream.stop()
            ctx.destroyed = True
        if report_dir:
            write_report(report_dir)
        for model in list(SIM.models.values()):
            model.release()
        SIM.models.clear()
        if SIM.memory is not None:
            reclaimer = by or origin("the simulator's reset")
            for arena in SIM.memory.devices:
                arena.reclaim_all(reclaimer)
            SIM.memory.pinned.reclaim_all(reclaimer)
        SIM.contexts.clear()
        SIM.streams.clear()
        for device in SIM.devices:
            device.refcount = 0
            device.default_context = None
        SIM.initialized = False
        SIM.finalized = True
    events.forget()


def reset_for_tests() -> None:
    """A fresh process, as far as the simulator can tell: finalized, workers joined, state and counters gone,
    no faults, and every thread without a context or pending error messages."""
    global _tls
    if SIM.initialized:
        stop()
    with SIM.lock:
        for name in (
            "buffers",
            "datasets",
            "descs",
            "tensor_descs",
            "events",
            "contexts",
            "streams",
            "models",
        ):
            getattr(SIM, name).clear()
        SIM.initialized = False
        SIM.finalized = False
        SIM.memory = None
        SIM.devices = []
        SIM.config = SimConfig()
        SIM.model_ids = itertools.count(1)
        SIM.exit_leaks_reported = False
    counters.forget()
    _host_objects.forget()
    _dvpp_state.forget()
    sanitizer.reset()
    faults.reset()
    events.forget()
    events.resume()
    _tls = threading.local()


# -- devices, contexts, streams -------------------------------------------------------------------------


def device(device_id: int) -> Device:
    if not 0 <= device_id < len(SIM.devices):
        raise Fail(
            C.ACL_ERROR_RT_INVALID_DEVICEID,
            f"device {device_id} does not exist; the simulator has {len(SIM.devices)} devices "
            "(GE_PLUGIN_SIM_DEVICES)",
        )
    return SIM.devices[device_id]


def current_context() -> Context:
    """This thread's current context; Fail(107002) when there is none or it was destroyed."""
    ctx: Context | None = getattr(_tls, "ctx", None)
    if ctx is not None and ctx.destroyed:
        _tls.ctx = None
        raise Fail(
            C.ACL_ERROR_RT_CONTEXT_NULL,
            "this thread's current context was destroyed (destroy_context or reset_device); call "
            "acl.rt.set_context or acl.rt.set_device again",
        )
    if ctx is None:
        raise Fail(
            C.ACL_ERROR_RT_CONTEXT_NULL,
            "this thread has no current context; call acl.rt.set_device(device_id) or "
            "acl.rt.set_context(context) in this thread first",
        )
    return ctx


def memory() -> Memory:
    """The memory of the initialised simulator (call require_init first)."""
    if SIM.memory is None:
        raise Fail(C.ACL_ERROR_UNINITIALIZE, "acl.init() has not been called")
    return SIM.memory


def set_current(ctx: Context | None) -> None:
    _tls.ctx = ctx


def create_context(device_id: int, *, default: bool) -> Context:
    ctx = Context(new_handle(), device_id, default)
    SIM.contexts[ctx.handle] = ctx
    return ctx


def context(handle: int) -> Context:
    ctx = SIM.contexts.get(handle)
    if ctx is None or ctx.destroyed:
        if handle == 0:
            raise Fail(C.ACL_ERROR_INVALID_PARAM, "context is a null handle")
        raise Fail(
            C.ACL_ERROR_INVALID_PARAM,
            f"0x{handle:x} is not a live context (destroyed, or not a context handle)",
        )
    return ctx


def destroy_context(ctx: Context) -> None:
    for stream in list(ctx.streams.values()):
        _stop_stream(stream)
    if ctx.default_stream is not None:
        events.unsubscribe(ctx.default_stream)
        ctx.default_stream.stop()
        ctx.default_stream = None
    ctx.destroyed = True
    SIM.contexts.pop(ctx.handle, None)


def create_stream(ctx: Context) -> Stream:
    with SIM.lock:
        on_device = sum(len(c.streams) for c in SIM.contexts.values() if c.device == ctx.device)
        if on_device >= MAX_STREAMS:
            raise Fail(
                C.ACL_ERROR_RT_NO_STREAM_RESOURCE, f"device {ctx.device} already has {MAX_STREAMS} streams"
            )
        handle = new_handle()
        stream = Stream(handle, ctx, f"ge-plugin-sim-stream-{handle & 0xFFFFFF:x}")
        ctx.streams[handle] = stream
        SIM.streams[handle] = stream
    return stream


def stream(handle: int, ctx: Context) -> Stream:
    """The stream ``handle`` (0 = the context's default stream), which must belong to ``ctx``."""
    if handle == 0:
        if ctx.default_stream is None:
            with SIM.lock:
                if ctx.default_stream is None:
                    ctx.default_stream = Stream(
                        0, ctx, f"ge-plugin-sim-default-stream-{ctx.handle & 0xFFFFFF:x}"
                    )
        return ctx.default_stream
    s = SIM.streams.get(handle)
    if s is None or s.destroyed:
        raise Fail(
            C.ACL_ERROR_INVALID_PARAM,
            f"0x{handle:x} is not a live stream (destroyed, or not a stream handle)",
        )
    if s.context is not ctx:
        raise Fail(
            C.ACL_ERROR_RT_STREAM_CONTEXT,
            f"stream 0x{handle:x} belongs to context 0x{s.context.handle:x} (device {s.context.device}), not to "
            f"this thread's current context 0x{ctx.handle:x}; call acl.rt.set_context first",
        )
    return s


def _stop_stream(s: Stream) -> None:
    events.unsubscribe(s)
    s.synchronize()
    s.destroyed = True
    s.stop()
    SIM.streams.pop(s.handle, None)
    s.context.streams.pop(s.handle, None)


def destroy_stream(s: Stream) -> Fail | None:
    """Wait for the stream's work, end its worker; the stream's pending error, if any."""
    error = s.synchronize()
    _stop_stream(s)
    return error


def release_device(dev: Device, by: Origin) -> None:
    """The last reset_device (``by``): contexts, streams, models and memory of the device go away; what the
    program never freed is reported as leaked."""
    for ctx in [c for c in SIM.contexts.values() if c.device == dev.id]:
        destroy_context(ctx)
    for model_id, model in list(SIM.models.items()):
        if model.context.device == dev.id:
            model.release()
            del SIM.models[model_id]
    if SIM.memory is not None:
        arena = SIM.memory.devices[dev.id]
        report_leaks(by.call, list(arena.allocs.values()))
        arena.reclaim_all(by)
    dev.default_context = None
