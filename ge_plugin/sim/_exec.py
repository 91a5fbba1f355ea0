"""A loaded model and how it executes: the gear comes from the dataset, the data from device memory.

As on an NPU, execute reads everything from memory: the gear from the ``ascend_mbatch_shape_data`` buffer
(written there by set_dynamic_batch_size / set_dynamic_hw_size / set_input_dynamic_dims), the inputs from
the input buffers (each at least the gear's size), and it writes the outputs into the output buffers. The
buffer addresses and sizes are taken when the execute is submitted, as the runtime builds a task's arguments
at submit time; the memory itself is read when the task runs. The computation (or, in timing-only mode, none)
happens while the execute holds its device (``device_time.occupy``) for the gear's device time.

Codes: a dataset whose buffer count or sizes do not match the model returns ACL_ERROR_GE_PARAM_INVALID
(145000, what GE's input checks return); a buffer that is not device memory of the model's device returns
ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID (145007); an mbatch buffer holding no gear (never set) returns
ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID (145013); one model executing on two streams at once returns
ACL_ERROR_RT_STREAM_MODEL (107005).
"""

from __future__ import annotations

import ctypes
import threading
from typing import NamedTuple

import numpy as np

from ge_plugin import acl_constants as C
from ge_plugin.sim import _state, counters, device_time, sanitizer
from ge_plugin.sim._fail import Fail
from ge_plugin.sim._objects import DataBuffer, Dataset, lookup
from ge_plugin.sim._sites import UNKNOWN, Origin
from ge_plugin.sim._state import SIM, Context
from ge_plugin.sim.memory import DEVICE, INVALID, Allocation, malloc_size
from ge_plugin.sim.model import ModelInfo, OmGear
from ge_plugin.sim.onnx_runner import OnnxRunner
from ge_plugin.sim.streams import Stream


class BufferEntry(NamedTuple):
    """A dataset entry as taken at submit: the buffer, and its address and size then."""

    buffer: DataBuffer
    addr: int
    size: int


#: every entry of a dataset, as taken at submit
Snapshot = list[BufferEntry]

#: the acl.mdl call that sets a gear, per gear mode
SETTERS = {
    "batch": "set_dynamic_batch_size",
    "hw": "set_dynamic_hw_size",
    "dims": "set_input_dynamic_dims",
}


class LoadedModel:
    def __init__(
        self,
        model_id: int,
        info: ModelInfo,
        runner: OnnxRunner,
        context: Context,
        charged: int = 0,
        user_memory: list[Allocation] | None = None,
    ):
        self.id = model_id
        self.info = info
        self.runner = runner
        self.context = context
        self.cur_gear: OmGear | None = None
        self.released = False
        self.lock = threading.Lock()
        self.pending = 0  #: execute_async tasks queued or running
        self.pending_stream: Stream | None = None
        self.charged = charged  #: work + weight bytes the runtime holds on the device for this model
        #: the caller's work/weight allocations (load_from_file_with_mem)
        self.user_memory = user_memory or []

    def release(self) -> None:
        """Unload: the runtime's memory goes back to the device (once)."""
        if self.released:
            return
        self.released = True
        if self.charged and SIM.memory is not None:
            SIM.memory.devices[self.context.device].unreserve(self.charged)


def _snapshot(ds: Dataset) -> Snapshot:
    return [BufferEntry(b, b.addr, b.size) for b in ds.buffers]


def loaded_model(model_id: int, ctx: _state.Context) -> LoadedModel:
    """The model ``model_id``, which must have been loaded in ``ctx``; raises Fail."""
    model = SIM.models.get(model_id)
    if model is None:
        raise Fail(C.ACL_ERROR_INVALID_MODEL_ID, f"model id {model_id} is not loaded")
    if model.context is not ctx:
        raise Fail(
            C.ACL_ERROR_RT_MODEL_CONTEXT,
            f"model {model_id} was loaded in context 0x{model.context.handle:x}; this thread's current context "
            f"is 0x{ctx.handle:x} (load, execute and unload must share one context)",
        )
    return model


def prepare(model_id: int, in_handle: int, out_handle: int) -> tuple[LoadedModel, Snapshot, Snapshot]:
    """The submit-time checks every execute does (after acl.init was checked); raises Fail."""
    model = loaded_model(model_id, _state.current_context())
    in_ds = lookup("datasets", in_handle, "input dataset")
    out_ds = lookup("datasets", out_handle, "output dataset")
    for ds, what in ((in_ds, "input"), (out_ds, "output")):
        for n, buf in enumerate(ds.buffers):
            if buf.handle not in SIM.buffers:
                raise Fail(C.ACL_ERROR_INVALID_PARAM, f"{what} dataset entry {n} is a destroyed data buffer")
    info = model.info
    if len(in_ds.buffers) != len(info.inputs):
        extra = " (including ascend_mbatch_shape_data)" if info.mbatch_index is not None else ""
        raise Fail(
            C.ACL_ERROR_GE_PARAM_INVALID,
            f"the input dataset has {len(in_ds.buffers)} buffers; model {model_id} has {len(info.inputs)} inputs{extra}",
        )
    if len(out_ds.buffers) != len(info.outputs):
        raise Fail(
            C.ACL_ERROR_GE_PARAM_INVALID,
            f"the output dataset has {len(out_ds.buffers)} buffers; model {model_id} has {len(info.outputs)} outputs",
        )
    ins, outs = _snapshot(in_ds), _snapshot(out_ds)
    if sanitizer.STATE.enabled:
        _check_buffers(model, ins, "input")
        _check_buffers(model, outs, "output")
    return model, ins, outs


def _check_buffers(model: LoadedModel, entries: Snapshot, what: str) -> None:
    """The sanitizer's look at a dataset at submit: every data buffer lies inside live device memory of the
    model's device, for all the bytes it claims (the runtime may use them all, e.g. at a bigger gear). A
    buffer unchanged since it last passed, over memory still allocated, passes without a lookup."""
    device = model.context.device
    names = model.info.inputs if what == "input" else model.info.outputs
    for n, (buf, addr, size) in enumerate(entries):
        if addr == 0 and size == 0 and what == "output":
            continue  # the runtime allocates this output
        seen = buf.checked
        if (
            seen is not None
            and seen[0] == addr
            and seen[1] == size
            and seen[2] == device
            and not seen[3].freed
        ):
            continue
        label = f"{what} {n} ({names[n].name})" if n < len(names) else f"{what} {n}"
        buf.checked = (addr, size, device, device_memory(addr, size, device, f"{label} data buffer"))


def device_memory(addr: int, nbytes: int, device: int, what: str) -> Allocation:
    """The device allocation of ``device`` holding ``nbytes`` at ``addr`` (``what`` names it); raises Fail."""
    place = _state.memory().locate(addr)
    alloc = place.alloc
    if place.kind != DEVICE or alloc is None:
        if place.kind == INVALID:
            raise Fail(C.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID, f"{what}: {place.why}", place.fault)
        kind = "pinned host memory" if alloc is not None else "host memory"
        source = f" ({alloc.describe()})" if alloc is not None else ""
        raise Fail(
            C.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID,
            f"{what}: 0x{addr:x} is {kind}{source}; in the ACL_HOST run mode model inputs and outputs must be "
            "device memory from acl.rt.malloc",
            sanitizer.WRONG_MEMORY_KIND,
        )
    if alloc.device != device:
        raise Fail(
            C.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID,
            f"{what}: 0x{addr:x} is in {alloc.describe()}; the model runs on device {device}",
            sanitizer.WRONG_MEMORY_KIND,
        )
    end = alloc.base + (alloc.requested if sanitizer.STATE.enabled else alloc.size)  # alloc.limit(), inlined
    if addr + nbytes > end:
        raise Fail(
            C.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID,
            f"{what}: 0x{addr:x}+{nbytes} runs {addr + nbytes - end} bytes past the end of {alloc.describe()}",
            sanitizer.OUT_OF_BOUNDS,
        )
    return alloc


def mbatch_slot(model: LoadedModel, addr: int, size: int) -> np.ndarray:
    """The gear values in the ``ascend_mbatch_shape_data`` buffer at ``addr``, as int64s in device memory
    (setters write them, execute reads them); raises Fail."""
    count = len(model.info.gears[0].values)
    if size < count * 8:
        raise Fail(
            C.ACL_ERROR_GE_DYNAMIC_INPUT_LENGTH_INVALID,
            f"the {C.ACL_DYNAMIC_TENSOR_NAME} buffer holds {size} bytes; it needs {count * 8}",
        )
    try:
        alloc = device_memory(addr, count * 8, model.context.device, C.ACL_DYNAMIC_TENSOR_NAME)
    except Fail as fail:
        raise Fail(C.ACL_ERROR_GE_DYNAMIC_INPUT_ADDR_INVALID, fail.message, fail.kind) from None
    return alloc.view(addr - alloc.base, count * 8).view(np.int64)


def read_gear(model: LoadedModel, entry: BufferEntry) -> OmGear:
    """The gear the mbatch buffer selects."""
    info = model.info
    values = tuple(int(v) for v in mbatch_slot(model, entry.addr, entry.size))
    gear = info.gear_by_values.get(values)
    if gear is None:
        raise Fail(
            C.ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID,
            f"the {C.ACL_DYNAMIC_TENSOR_NAME} buffer selects no gear of model {model.id} (it was never set?); call "
            f"acl.mdl.{SETTERS[info.mode]}(model_id, dataset, {info.mbatch_index}, ...) with one of the gears "
            "before execute",
        )
    return gear


def run(model: LoadedModel, ins: Snapshot, outs: Snapshot) -> None:
    """Execute now, in this thread; raises Fail."""
    if model.released:
        raise Fail(C.ACL_ERROR_INVALID_MODEL_ID, f"model {model.id} was unloaded before its execute ran")
    for alloc in model.user_memory:
        if alloc.freed:
            raise Fail(
                C.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID,
                f"model {model.id}'s work or weight memory at 0x{alloc.base:x} was freed while the model is loaded",
            )
    info = model.info
    device = model.context.device
    gear = read_gear(model, ins[info.mbatch_index]) if info.mbatch_index is not None else info.gears[0]
    compute = not device_time.timing_only()
    arrays = []
    for n in range(info.n_data):
        desc = info.inputs[n]
        _, addr, size = ins[n]
        need = gear.input_sizes[n]
        if size < need:
            raise Fail(
                C.ACL_ERROR_GE_PARAM_INVALID,
                f"input {n} ({desc.name}) data buffer is {size} bytes; gear {gear.label} needs {need} bytes "
                f"({list(gear.input_dims[n])} {desc.np.name})",
            )
        alloc = device_memory(addr, need, device, f"input {n} ({desc.name})")
        if compute:
            arrays.append(alloc.view(addr - alloc.base, need).view(desc.np).reshape(gear.input_dims[n]))
    latency = device_time.latency_s(gear.label, gear.rows)
    with device_time.occupy(device) as start:  # the device computes one execute at a time
        outputs = model.runner.run(arrays, gear) if compute else None
        device_time.hold(start, latency)
    for n in range(len(info.outputs)):
        desc = info.outputs[n]
        buf, addr, size = outs[n]
        need = gear.output_sizes[n]
        if addr == 0 and size == 0:
            made_by = f"the runtime, for the empty output {n} ({desc.name}) data buffer of a model {model.id} execute"
            addr = _allocate_output(device, need, Origin(made_by, UNKNOWN))
            buf.addr, buf.size = addr, need
        elif size < need:
            raise Fail(
                C.ACL_ERROR_GE_PARAM_INVALID,
                f"output {n} ({desc.name}) data buffer is {size} bytes; gear {gear.label} produces {need} bytes "
                f"({list(gear.output_dims[n])} {desc.np.name}); allocate get_output_size_by_index bytes",
            )
        alloc = device_memory(addr, need, device, f"output {n} ({desc.name})")
        if outputs is None:  # timing only: one memset, no per-element work
            ctypes.memset(alloc.addr + (addr - alloc.base), 0, need)
        else:
            alloc.view(addr - alloc.base, need)[:] = (
                np.ascontiguousarray(outputs[n]).reshape(-1).view(np.uint8)
            )
    model.cur_gear = gear
    counters.device(device).executed(gear.label)


def _allocate_output(device: int, nbytes: int, origin: Origin) -> int:
    """An output buffer created with (0, 0): the runtime allocates; the user frees it with acl.rt.free."""
    arena = SIM.memory.devices[device]  # type: ignore[union-attr]
    alloc = arena.malloc(nbytes, malloc_size(max(nbytes, 1)), origin)
    if alloc is None:
        raise Fail(
            C.ACL_ERROR_RT_MEMORY_ALLOCATION,
            f"device {device} is out of memory for an output of {nbytes} bytes",
        )
    return alloc.base


def execute_sync(model: LoadedModel, ins: Snapshot, outs: Snapshot) -> None:
    if model.pending:
        raise Fail(
            C.ACL_ERROR_RT_STREAM_MODEL,
            f"model {model.id} still has execute_async work on a stream; synchronize that stream before a "
            "synchronous execute (one model may not run on two streams at once)",
        )
    run(model, ins, outs)


def submit(model: LoadedModel, ins: Snapshot, outs: Snapshot, stream: Stream, injected: int) -> None:
    """Queue an execute on ``stream``; an injected fault is reported by synchronize_stream."""
    with model.lock:
        if model.pending and model.pending_stream is not stream:
            raise Fail(
                C.ACL_ERROR_RT_STREAM_MODEL,
                f"model {model.id} is already executing on another stream; one model may not run on two streams "
                "at once (synchronize the other stream first)",
            )
        model.pending += 1
        model.pending_stream = stream
    stream.submit(_task, model, ins, outs, injected)


def _task(model: LoadedModel, ins: Snapshot, outs: Snapshot, injected: int) -> None:
    try:
        if injected:
            gear = model.cur_gear or model.info.gears[0]
            latency = device_time.latency_s(gear.label, gear.rows)
            with device_time.occupy(model.context.device) as start:  # the fault strikes after the device time
                device_time.hold(start, latency)
            raise _state.injected(injected, "mdl.execute_async")
        run(model, ins, outs)
    finally:
        with model.lock:
            model.pending -= 1
            if not model.pending:
                model.pending_stream = None
