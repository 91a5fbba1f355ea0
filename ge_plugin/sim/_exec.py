"""A loaded model and how it executes: the gear comes from the dataset, the data from device memory.

As on an NPU, execute reads everything from memory: the gear from the ``ascend_mbatch_shape_data`` buffer
(written there by set_dynamic_batch_size / set_dynamic_hw_size / set_input_dynamic_dims), the inputs from
the input buffers (each at least the gear's size), and it writes the outputs into the output buffers. The
buffer addresses and sizes are taken when the execute is submitted, as the runtime builds a task's arguments
at submit time; the memory itself is read when the task runs. The computation happens while the execute
holds its device (``device_time.occupy``) for the gear's device time. In timing-only mode nothing is
computed or written: an execute is checked when it is queued and books its device for the gear's device
time (:class:`ExecuteRecord`).

Codes: a dataset whose buffer count or sizes do not match the model returns ACL_ERROR_GE_PARAM_INVALID
(145000, what GE's input checks return); a buffer that is not device memory of the model's device returns
ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID (145007); an mbatch buffer holding no gear (never set) returns
ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID (145013); one model executing on two streams at once returns
ACL_ERROR_RT_STREAM_MODEL (107005).
"""

from __future__ import annotations

import ctypes
import threading
import time

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
from ge_plugin.sim.streams import Record, Stream

#: a dataset entry as taken at submit: the buffer, and its address and size then
BufferEntry = tuple[DataBuffer, int, int]


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
        #: the datasets a timing-only execute last checked, and the gears they passed at
        self.checked: Checked | None = None
        #: the mbatch buffer a gear setter last wrote: (addr, size, frees and checking then, real address, bytes)
        self.mbatch_slot: tuple[int, int, int, int, int] | None = None

    def release(self) -> None:
        """Unload: the runtime's memory goes back to the device (once)."""
        if self.released:
            return
        self.released = True
        if self.charged and SIM.memory is not None:
            SIM.memory.devices[self.context.device].unreserve(self.charged)


def loaded_model(model_id: int, ctx: _state.Context) -> LoadedModel:
    """The model ``model_id``, which must have been loaded in ``ctx``; raises Fail."""
    model: LoadedModel | None = SIM.models.get(model_id)
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
    in_ds = SIM.datasets.get(in_handle) or lookup("datasets", in_handle, "input dataset")
    out_ds = SIM.datasets.get(out_handle) or lookup("datasets", out_handle, "output dataset")
    live = SIM.buffers
    for buf in in_ds.buffers:
        if buf.handle not in live:
            raise _destroyed(in_ds, "input")
    for buf in out_ds.buffers:
        if buf.handle not in live:
            raise _destroyed(out_ds, "output")
    ins = [(b, b.addr, b.size) for b in in_ds.buffers]
    outs = [(b, b.addr, b.size) for b in out_ds.buffers]
    info = model.info
    if len(ins) != len(info.inputs):
        extra = " (including ascend_mbatch_shape_data)" if info.mbatch_index is not None else ""
        raise Fail(
            C.ACL_ERROR_GE_PARAM_INVALID,
            f"the input dataset has {len(ins)} buffers; model {model_id} has {len(info.inputs)} inputs{extra}",
        )
    if len(outs) != len(info.outputs):
        raise Fail(
            C.ACL_ERROR_GE_PARAM_INVALID,
            f"the output dataset has {len(outs)} buffers; model {model_id} has {len(info.outputs)} outputs",
        )
    if sanitizer.STATE.enabled:
        _check_buffers(model, ins, "input")
        _check_buffers(model, outs, "output")
    return model, ins, outs


def _destroyed(ds: Dataset, what: str) -> Fail:
    n = next(n for n, buf in enumerate(ds.buffers) if buf.handle not in SIM.buffers)
    return Fail(C.ACL_ERROR_INVALID_PARAM, f"{what} dataset entry {n} is a destroyed data buffer")


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


def mbatch_slot(model: LoadedModel, addr: int, size: int) -> tuple[int, int]:
    """Where the gear values of the ``ascend_mbatch_shape_data`` buffer at ``addr`` really are, and their
    byte count: int64s in device memory (setters write them, execute reads them); raises Fail."""
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
    return alloc.addr + (addr - alloc.base), count * 8


def write_gear(model: LoadedModel, addr: int, size: int, gear: OmGear) -> None:
    """Write ``gear``'s values into the mbatch buffer at ``addr`` (what the gear setters do); raises Fail.
    The buffer's place is looked up again only when it changed or memory was freed since."""
    # the sanitizer's bounds are stricter: a place found without them is looked up again with them
    frees = SIM.memory.frees * 2 + sanitizer.STATE.enabled  # type: ignore[union-attr]
    slot = model.mbatch_slot
    if slot is None or slot[0] != addr or slot[1] != size or slot[2] != frees:
        slot = model.mbatch_slot = (addr, size, frees, *mbatch_slot(model, addr, size))
    ctypes.memmove(slot[3], gear.packed, slot[4])


def read_gear(model: LoadedModel, entry: BufferEntry) -> OmGear:
    """The gear the mbatch buffer selects."""
    info = model.info
    real, nbytes = mbatch_slot(model, entry[1], entry[2])
    gear = info.gear_by_packed.get(ctypes.string_at(real, nbytes))
    if gear is None:
        raise Fail(
            C.ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID,
            f"the {C.ACL_DYNAMIC_TENSOR_NAME} buffer selects no gear of model {model.id} (it was never set?); call "
            f"acl.mdl.{SETTERS[info.mode]}(model_id, dataset, {info.mbatch_index}, ...) with one of the gears "
            "before execute",
        )
    return gear


def _check_loaded(model: LoadedModel) -> None:
    """The model and the memory it was loaded into are still there; raises Fail."""
    if model.released:
        raise Fail(C.ACL_ERROR_INVALID_MODEL_ID, f"model {model.id} was unloaded before its execute ran")
    for alloc in model.user_memory:
        if alloc.freed:
            raise Fail(
                C.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID,
                f"model {model.id}'s work or weight memory at 0x{alloc.base:x} was freed while the model is loaded",
            )


def _gear(model: LoadedModel, ins: Snapshot) -> OmGear:
    info = model.info
    return read_gear(model, ins[info.mbatch_index]) if info.mbatch_index is not None else info.gears[0]


def _input(model: LoadedModel, gear: OmGear, ins: Snapshot, n: int) -> tuple[Allocation, int, int]:
    """Input ``n``'s allocation, address and the bytes the gear reads from it; raises Fail."""
    desc = model.info.inputs[n]
    _, addr, size = ins[n]
    need = gear.input_sizes[n]
    if size < need:
        raise Fail(
            C.ACL_ERROR_GE_PARAM_INVALID,
            f"input {n} ({desc.name}) data buffer is {size} bytes; gear {gear.label} needs {need} bytes "
            f"({list(gear.input_dims[n])} {desc.np.name})",
        )
    return device_memory(addr, need, model.context.device, f"input {n} ({desc.name})"), addr, need


def _output(model: LoadedModel, gear: OmGear, outs: Snapshot, n: int) -> tuple[Allocation, int, int]:
    """Output ``n``'s allocation, address and the bytes the gear writes (an empty buffer is given memory
    by the runtime); raises Fail."""
    device = model.context.device
    desc = model.info.outputs[n]
    buf, addr, size = outs[n]
    need = gear.output_sizes[n]
    if addr == 0 and size == 0:
        made_by = (
            f"the runtime, for the empty output {n} ({desc.name}) data buffer of a model {model.id} execute"
        )
        addr = _allocate_output(device, need, Origin(made_by, UNKNOWN))
        buf.addr, buf.size = addr, need
    elif size < need:
        raise Fail(
            C.ACL_ERROR_GE_PARAM_INVALID,
            f"output {n} ({desc.name}) data buffer is {size} bytes; gear {gear.label} produces {need} bytes "
            f"({list(gear.output_dims[n])} {desc.np.name}); allocate get_output_size_by_index bytes",
        )
    return device_memory(addr, need, device, f"output {n} ({desc.name})"), addr, need


def run(model: LoadedModel, ins: Snapshot, outs: Snapshot) -> None:
    """Compute now, in this thread, holding the device for the gear's device time; raises Fail."""
    _check_loaded(model)
    info = model.info
    device = model.context.device
    gear = _gear(model, ins)
    arrays = []
    for n in range(info.n_data):
        alloc, addr, need = _input(model, gear, ins, n)
        arrays.append(alloc.view(addr - alloc.base, need).view(info.inputs[n].np).reshape(gear.input_dims[n]))
    latency = device_time.latency_s(gear.label, gear.rows)
    with device_time.occupy(device) as start:  # the device computes one execute at a time
        outputs = model.runner.run(arrays, gear)
        device_time.hold(start, latency)
    for n in range(len(info.outputs)):
        alloc, addr, need = _output(model, gear, outs, n)
        alloc.view(addr - alloc.base, need)[:] = np.ascontiguousarray(outputs[n]).reshape(-1).view(np.uint8)
    model.cur_gear = gear
    counters.device(device).executed(gear.label)


class Checked:
    """Datasets that passed a timing-only execute's checks: every input and output is device memory of the
    model's device, as large as the gears listed need. True while the datasets hold the same buffers at the
    same addresses and sizes and no allocation was freed (``Memory.frees``), so an execute that repeats
    itself reads its gear and skips the rest."""

    __slots__ = ("frees", "gears", "ins", "mbatch", "outs", "profile")

    def __init__(self, frees: int, ins: Snapshot, outs: Snapshot, mbatch: tuple[int, int] | None):
        self.frees = frees
        self.ins = ins
        self.outs = outs
        self.mbatch = mbatch  #: where the gear values really are, and their byte count
        self.profile = device_time.STATE.profile  #: the profile the device times below are from
        self.gears: dict[OmGear, float] = {}  #: gear -> its device time


def _checked_gear(model: LoadedModel, ins: Snapshot, outs: Snapshot) -> tuple[OmGear, float] | None:
    """The gear and device time of an execute whose datasets passed before (see :class:`Checked`)."""
    checked = model.checked
    if (
        checked is None
        or checked.frees != SIM.memory.frees  # type: ignore[union-attr]
        or checked.profile is not device_time.STATE.profile
        or checked.ins != ins
        or checked.outs != outs
        or model.released
    ):
        return None
    if checked.mbatch is None:
        gear = model.info.gears[0]
    else:
        gear = model.info.gear_by_packed.get(ctypes.string_at(*checked.mbatch))  # type: ignore[assignment]
    seconds = checked.gears.get(gear)
    return None if seconds is None else (gear, seconds)


def _remember(model: LoadedModel, ins: Snapshot, outs: Snapshot, gear: OmGear, seconds: float) -> None:
    """The datasets passed every check at ``gear``: remember it for the executes that repeat them."""
    frees = SIM.memory.frees  # type: ignore[union-attr]
    checked = model.checked
    if checked is None or checked.frees != frees or checked.ins != ins or checked.outs != outs:
        index = model.info.mbatch_index
        mbatch = None if index is None else mbatch_slot(model, ins[index][1], ins[index][2])
        checked = model.checked = Checked(frees, ins, outs, mbatch)
    elif checked.profile is not device_time.STATE.profile:
        checked.profile = device_time.STATE.profile
        checked.gears.clear()
    checked.gears[gear] = seconds


class ExecuteRecord(Record):
    """A timing-only execute: checked when it is queued, as its run would check it; it books the device
    for the gear's device time (from when the stream is ready, after every execute already booked on that
    device) and, when settled, counts its window and the execute. Nothing is computed or written."""

    __slots__ = ("device", "error", "gear", "model", "queued", "seconds")

    def __init__(self, model: LoadedModel, ins: Snapshot, outs: Snapshot, injected: int, queued: bool):
        self.model = model
        self.device = model.context.device
        self.queued = queued  #: execute_async: one of the model's pending executes
        self.error: Fail | None = None
        self.seconds: float | None = None  #: device time; None for an execute that fails before the device
        self.gear: OmGear | None = None
        if injected:  # the fault strikes after the device time
            gear = model.cur_gear or model.info.gears[0]
            self.seconds = device_time.latency_s(gear.label, gear.rows)
            self.error = _state.injected(injected, "mdl.execute_async")
            return
        known = _checked_gear(model, ins, outs) if not model.user_memory else None
        if known is not None:
            self.gear, self.seconds = known
            return
        try:
            _check_loaded(model)
            gear = self.gear = _gear(model, ins)
            for n in range(model.info.n_data):
                _input(model, gear, ins, n)
        except Fail as fail:
            self.error = fail
            return
        self.seconds = device_time.latency_s(gear.label, gear.rows)
        try:
            for n in range(len(model.info.outputs)):
                _output(model, gear, outs, n)
        except Fail as fail:
            self.error = fail
            return
        if all(addr or size for _, addr, size in outs):  # an empty output buffer is the runtime's, each time
            _remember(model, ins, outs, gear, self.seconds)

    def place(self, ready: float) -> None:
        if self.seconds is None:
            self.start = self.end = ready
        else:
            self.start, self.end = device_time.reserve(self.device, ready, self.seconds)

    def settle(self) -> None:
        model = self.model
        try:
            device = counters.device(self.device)
            if self.seconds is not None:
                device.computed(self.start, self.end)  # type: ignore[arg-type]
            if self.error is not None:
                raise self.error
            model.cur_gear = self.gear
            device.executed(self.gear.label)  # type: ignore[union-attr]
        finally:
            if self.queued:
                with model.lock:
                    model.pending -= 1
                    if not model.pending:
                        model.pending_stream = None


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
    timed = device_time.STATE.timing_only
    if model.pending and timed and model.pending_stream is not None:
        model.pending_stream.catch_up()
    if model.pending:
        raise Fail(
            C.ACL_ERROR_RT_STREAM_MODEL,
            f"model {model.id} still has execute_async work on a stream; synchronize that stream before a "
            "synchronous execute (one model may not run on two streams at once)",
        )
    if not timed:
        run(model, ins, outs)
        return
    record = ExecuteRecord(model, ins, outs, 0, queued=False)
    if record.error is not None and record.seconds is None:
        raise record.error
    now = time.monotonic()
    record.place(now)
    device_time.hold(now, record.end - now)  # type: ignore[operator]
    record.settle()


def submit(model: LoadedModel, ins: Snapshot, outs: Snapshot, stream: Stream, injected: int) -> None:
    """Queue an execute on ``stream``; an injected fault is reported by synchronize_stream."""
    timed = device_time.STATE.timing_only
    if model.pending and timed:
        other = model.pending_stream
        if other is not None and other is not stream:
            other.catch_up()  # its executes may have ended already: nobody looked yet
    with model.lock:
        if model.pending and model.pending_stream is not stream:
            raise Fail(
                C.ACL_ERROR_RT_STREAM_MODEL,
                f"model {model.id} is already executing on another stream; one model may not run on two streams "
                "at once (synchronize the other stream first)",
            )
        model.pending += 1
        model.pending_stream = stream
    if timed:
        stream.enqueue(ExecuteRecord(model, ins, outs, injected, queued=True))
    else:
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
