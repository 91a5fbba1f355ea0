"""``acl.mdl``, simulated: loading sim OMs, describing them, datasets, gears and execution.

A sim OM (``ge-plugin atc`` output) stands in for a real ``.om``; a real OM or any other file returns
ACL_ERROR_DESERIALIZE_MODEL (100012) and the error message says how to build a sim OM. Gear models have the
extra last input ``ascend_mbatch_shape_data``; the setters write the chosen gear into that buffer's device
memory and execute reads it from there, as on the NPU. See docs/simulator.md for every code.
"""

import ctypes as _ctypes
import os as _os
from collections.abc import Callable as _Callable
from collections.abc import Sequence as _Sequence
from typing import Any as _Any
from typing import NamedTuple as _NamedTuple
from typing import TypeVar as _TypeVar

from ge_plugin import acl_constants as _C
from ge_plugin.atc import simom as _simom
from ge_plugin.errors import ModelFileError as _ModelFileError
from ge_plugin.sim import _args as _a
from ge_plugin.sim import _exec
from ge_plugin.sim import _state as _s
from ge_plugin.sim import counters as _counters
from ge_plugin.sim import faults as _faults
from ge_plugin.sim import sanitizer as _sanitizer
from ge_plugin.sim._api import acl_call as _acl_call
from ge_plugin.sim._api import value_and_ret as _value_and_ret
from ge_plugin.sim._api import value_only as _value_only
from ge_plugin.sim._fail import Fail as _Fail
from ge_plugin.sim._objects import Dataset as _Dataset
from ge_plugin.sim._objects import ModelDesc as _ModelDesc
from ge_plugin.sim._objects import TensorDesc as _TensorDesc
from ge_plugin.sim._objects import lookup as _lookup
from ge_plugin.sim.memory import HOST as _HOST
from ge_plugin.sim.memory import PINNED as _PINNED
from ge_plugin.sim.memory import Allocation as _Allocation
from ge_plugin.sim.memory import align_up as _align_up
from ge_plugin.sim.memory import check_host as _check_host
from ge_plugin.sim.model import IoDesc as _IoDesc
from ge_plugin.sim.model import ModelInfo as _ModelInfo
from ge_plugin.sim.model import OmGear as _OmGear
from ge_plugin.sim.onnx_runner import OnnxRunner as _OnnxRunner

__all__ = [
    "add_dataset_buffer",
    "create_dataset",
    "create_desc",
    "destroy_dataset",
    "destroy_desc",
    "execute",
    "execute_async",
    "get_aipp_type",
    "get_cur_output_dims",
    "get_dataset_buffer",
    "get_dataset_num_buffers",
    "get_dataset_tensor_desc",
    "get_desc",
    "get_desc_from_file",
    "get_dynamic_batch",
    "get_dynamic_hw",
    "get_input_data_type",
    "get_input_dims",
    "get_input_dims_v2",
    "get_input_dynamic_dims",
    "get_input_dynamic_gear_count",
    "get_input_format",
    "get_input_index_by_name",
    "get_input_name_by_index",
    "get_input_size_by_index",
    "get_num_inputs",
    "get_num_outputs",
    "get_output_data_type",
    "get_output_dims",
    "get_output_format",
    "get_output_index_by_name",
    "get_output_name_by_index",
    "get_output_size_by_index",
    "get_tensor_real_name",
    "load_from_file",
    "load_from_file_with_mem",
    "load_from_mem",
    "query_size",
    "set_dataset_tensor_desc",
    "set_dynamic_batch_size",
    "set_dynamic_hw_size",
    "set_input_dynamic_dims",
    "unload",
]

_SIM = _s.SIM
_T = _TypeVar("_T")
#: aclmdlInputAippType ACL_DATA_WITHOUT_AIPP, and the "no such input" index (acl_mdl.h ACL_INVALID_NODE_INDEX)
_ACL_DATA_WITHOUT_AIPP = 0
_ACL_DATA_WITH_STATIC_AIPP = 1
_ACL_INVALID_NODE_INDEX = 0xFFFFFFFF
#: get_input_dynamic_dims refuses larger gear counts with (None, 100000), as pyACL does
_MAX_GEAR_COUNT = 4096


# -- load and unload ------------------------------------------------------------------------------------


def _parse_om(data: bytes, source: str) -> "tuple[_simom.SimOm, _ModelInfo]":
    try:
        om = _simom.loads(data, source)
    except _simom.NotSimOmError as exc:
        raise _Fail(_C.ACL_ERROR_DESERIALIZE_MODEL, str(exc)) from None
    except _simom.SimOmVersionError as exc:
        raise _Fail(_C.ACL_ERROR_DESERIALIZE_MODEL, str(exc)) from None
    except _ModelFileError as exc:
        raise _Fail(_C.ACL_ERROR_PARSE_MODEL, str(exc)) from None
    try:
        return om, _ModelInfo(om.header)
    except _ModelFileError as exc:
        raise _Fail(_C.ACL_ERROR_PARSE_MODEL, f"{source}: {exc}") from None


def _read_file(path: str) -> bytes:
    if not path or not _os.path.isfile(path):
        raise _Fail(
            _C.ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID,
            f"model file {path!r} does not exist"
            + (" (it is a directory)" if path and _os.path.isdir(path) else ""),
        )
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:
        raise _Fail(_C.ACL_ERROR_READ_MODEL_FAILURE, f"cannot read {path}: {exc.strerror or exc}") from None


def _memory_sizes(om: "_simom.SimOm", info: _ModelInfo) -> tuple[int, int]:
    """``(work, weight)`` bytes a load needs on the device, what query_size reports.

    A sim OM has no compiled memory plan, so: work is the largest gear's inputs plus outputs (the feature maps
    a static graph of that gear keeps), weight the serialized ONNX graph (its initializers, mostly); each
    rounded up to 32 bytes.
    """
    work = max(sum(g.input_sizes) + sum(g.output_sizes) for g in info.gears)
    return _align_up(max(work, 1), 32), _align_up(max(len(om.onnx), 1), 32)


class _UserMemory(_NamedTuple):
    """The caller's work or weight memory of load_from_file_with_mem; pointer 0 lets the runtime manage it."""

    ptr: int = 0
    size: int = 0


_RUNTIME_MANAGED = _UserMemory()


def _user_memory(what: str, memory: _UserMemory, need: int, device: int) -> "_Allocation":
    """The caller's device allocation holding ``need`` bytes at ``memory.ptr``; raises Fail."""
    if memory.size < need:
        raise _Fail(
            _C.ACL_ERROR_GE_EXEC_MODEL_DATA_SIZE_INVALID,
            f"{what} memory of {memory.size} bytes is smaller than the {need} bytes the model needs "
            "(acl.mdl.query_size)",
        )
    try:
        return _exec.device_memory(memory.ptr, need, device, f"{what} memory")
    except _Fail as fail:
        raise _Fail(_C.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID, fail.message) from None


def _load(
    data: bytes, source: str, work: _UserMemory = _RUNTIME_MANAGED, weight: _UserMemory = _RUNTIME_MANAGED
) -> int:
    ctx = _s.current_context()
    om, info = _parse_om(data, source)
    needs = _memory_sizes(om, info)
    held = []
    charged = 0
    for what, memory, need in zip(("work", "weight"), (work, weight), needs):
        if memory.ptr:
            held.append(_user_memory(what, memory, need, ctx.device))
        else:
            charged += need
    arena = _s.memory().devices[ctx.device]
    if charged and not arena.reserve(charged):
        raise _Fail(
            _C.ACL_ERROR_GE_DEVICE_MEMORY_ALLOCATION_FAILED,
            f"device {ctx.device} cannot hold the model's {charged} bytes of work and weight memory: "
            f"{arena.capacity - arena.used} of {arena.capacity} free (GE_PLUGIN_SIM_DEVICE_MEMORY_MB)",
        )
    try:
        runner = _OnnxRunner(om.onnx, info, _SIM.config.threads)
    except _Fail:
        if charged:
            arena.unreserve(charged)
        raise
    with _SIM.lock:
        model_id = next(_SIM.model_ids)
        _SIM.models[model_id] = _exec.LoadedModel(model_id, info, runner, ctx, charged, held)
    _counters.device(ctx.device).loads += 1
    return model_id


@_acl_call("acl.mdl.load_from_file", _a.s, failure=_value_and_ret(0))
def load_from_file(model_path: str, /) -> tuple[int, int]:
    """``model_id, ret``: loads a sim OM into the current context."""
    _s.current_context()
    return _load(_read_file(model_path), model_path), 0


@_acl_call("acl.mdl.load_from_mem", _a.k, _a.k, failure=_value_and_ret(0))
def load_from_mem(model_ptr: int, model_size: int, /) -> tuple[int, int]:
    """``model_id, ret``: ``model_ptr`` is host memory holding the OM (e.g. ``acl.util.bytes_to_ptr``)."""
    _s.current_context()
    if model_size == 0:
        raise _Fail(_C.ACL_ERROR_INVALID_PARAM, "model_size must not be 0")
    place = _s.memory().locate(model_ptr)
    if place.kind not in (_HOST, _PINNED):
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            place.why or f"0x{model_ptr:x} is device memory; load_from_mem reads host memory",
            place.fault or _sanitizer.WRONG_MEMORY_KIND,
        )
    if place.alloc is not None and model_ptr - place.alloc.base + model_size > place.alloc.limit():
        over = model_ptr + model_size - place.alloc.base - place.alloc.limit()
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"0x{model_ptr:x}+{model_size} runs {over} bytes past the end of {place.alloc.describe()}",
            _sanitizer.OUT_OF_BOUNDS,
        )
    if place.kind == _HOST:
        _check_host("acl.mdl.load_from_mem", "model_ptr", model_ptr, model_size)
    return _load(_ctypes.string_at(model_ptr, model_size), f"the model at 0x{model_ptr:x}"), 0


@_acl_call("acl.mdl.query_size", _a.s, failure=_value_and_ret(0, 0))
def query_size(model_path: str, /) -> tuple[int, int, int]:
    """``work_size, weight_size, ret``: the device memory a load of ``model_path`` needs (see _memory_sizes)."""
    om, info = _parse_om(_read_file(model_path), model_path)
    work, weight = _memory_sizes(om, info)
    return work, weight, 0


@_acl_call("acl.mdl.load_from_file_with_mem", _a.s, _a.k, _a.k, _a.k, _a.k, failure=_value_and_ret(0))
def load_from_file_with_mem(
    model_path: str, work_ptr: int, work_size: int, weight_ptr: int, weight_size: int, /
) -> tuple[int, int]:
    """``model_id, ret``: load with work and weight memory the caller allocated (acl.rt.malloc, sizes from
    query_size); a pointer of 0 leaves that part to the runtime. The memory must stay allocated until unload:
    an execute after it was freed returns ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID (145007)."""
    _s.current_context()
    data = _read_file(model_path)
    return _load(data, model_path, _UserMemory(work_ptr, work_size), _UserMemory(weight_ptr, weight_size)), 0


@_acl_call("acl.mdl.unload", _a.u32)
def unload(model_id: int, /) -> int:
    """``ret``; waits for the model's queued execute_async work first."""
    model = _exec.loaded_model(model_id, _s.current_context())
    stream = model.pending_stream
    if stream is not None:
        stream.drain()
    with _SIM.lock:
        model.release()
        _SIM.models.pop(model_id, None)
    _counters.device(model.context.device).unloads += 1
    return 0


# -- descriptions ---------------------------------------------------------------------------------------


@_acl_call("acl.mdl.create_desc", init=False, failure=_value_only(0))
def create_desc() -> int:
    """``desc`` (0 on failure)."""
    desc = _ModelDesc(_s.new_handle())
    _SIM.descs[desc.handle] = desc
    return desc.handle


@_acl_call("acl.mdl.get_desc", _a.k, _a.u32)
def get_desc(desc: int, model_id: int, /) -> int:
    """``ret``: fills ``desc`` from a loaded model."""
    obj = _lookup("descs", desc, "model description")
    model = _SIM.models.get(model_id)
    if model is None:
        raise _Fail(_C.ACL_ERROR_INVALID_MODEL_ID, f"model id {model_id} is not loaded")
    obj.info, obj.model_id = model.info, model_id
    return 0


@_acl_call("acl.mdl.get_desc_from_file", _a.k, _a.s)
def get_desc_from_file(desc: int, model_path: str, /) -> int:
    """``ret``: fills ``desc`` from an OM file without loading it."""
    obj = _lookup("descs", desc, "model description")
    _, info = _parse_om(_read_file(model_path), model_path)
    obj.info, obj.model_id = info, None
    return 0


@_acl_call("acl.mdl.destroy_desc", _a.k, init=False)
def destroy_desc(desc: int, /) -> int:
    """``ret``."""
    _lookup("descs", desc, "model description")
    del _SIM.descs[desc]
    return 0


def _info(desc: int) -> _ModelInfo:
    """The ModelInfo behind ``desc``; raises Fail."""
    obj = _lookup("descs", desc, "model description")
    info: _ModelInfo | None = obj.info
    if info is None:
        raise _Fail(_C.ACL_ERROR_INVALID_PARAM, "the model description is empty; call acl.mdl.get_desc first")
    return info


_INPUTS, _OUTPUTS = False, True


def _io_query(call: str, failure_value: object) -> "_Callable[[_Callable[..., _T]], _Callable[..., _T]]":
    """A query of one input or output of a description, ``(desc, index)``: no fault rule, no acl.init needed,
    ``failure_value`` when it fails."""
    return _acl_call(call, _a.k, _a.k, fault=None, init=False, failure=_value_only(failure_value))


def _io(desc: int, index: int, outputs: bool) -> _IoDesc:
    info = _info(desc)
    items = info.outputs if outputs else info.inputs
    if index >= len(items):
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"{'output' if outputs else 'input'} index {index} is out of range; the model has {len(items)}",
        )
    return items[index]


@_acl_call("acl.mdl.get_num_inputs", _a.k, fault=None, init=False, failure=_value_only(0))
def get_num_inputs(desc: int, /) -> int:
    """Inputs, counting ascend_mbatch_shape_data (0 for an invalid desc)."""
    return len(_info(desc).inputs)


@_acl_call("acl.mdl.get_num_outputs", _a.k, fault=None, init=False, failure=_value_only(0))
def get_num_outputs(desc: int, /) -> int:
    return len(_info(desc).outputs)


@_io_query("acl.mdl.get_input_size_by_index", 0)
def get_input_size_by_index(desc: int, index: int, /) -> int:
    """Bytes at the largest gear."""
    return _io(desc, index, _INPUTS).size


@_io_query("acl.mdl.get_output_size_by_index", 0)
def get_output_size_by_index(desc: int, index: int, /) -> int:
    """Bytes at the largest gear."""
    return _io(desc, index, _OUTPUTS).size


@_io_query("acl.mdl.get_input_data_type", _C.ACL_DT_UNDEFINED)
def get_input_data_type(desc: int, index: int, /) -> int:
    return _io(desc, index, _INPUTS).dtype


@_io_query("acl.mdl.get_output_data_type", _C.ACL_DT_UNDEFINED)
def get_output_data_type(desc: int, index: int, /) -> int:
    return _io(desc, index, _OUTPUTS).dtype


@_io_query("acl.mdl.get_input_format", _C.ACL_FORMAT_UNDEFINED)
def get_input_format(desc: int, index: int, /) -> int:
    return _io(desc, index, _INPUTS).format


@_io_query("acl.mdl.get_output_format", _C.ACL_FORMAT_UNDEFINED)
def get_output_format(desc: int, index: int, /) -> int:
    return _io(desc, index, _OUTPUTS).format


@_io_query("acl.mdl.get_input_name_by_index", "")
def get_input_name_by_index(desc: int, index: int, /) -> str:
    return _io(desc, index, _INPUTS).name


@_io_query("acl.mdl.get_output_name_by_index", "")
def get_output_name_by_index(desc: int, index: int, /) -> str:
    return _io(desc, index, _OUTPUTS).name


def _dims(name: str, dims: _Sequence[int]) -> dict[str, _Any]:
    return {"name": name, "dimCount": len(dims), "dims": list(dims)}


@_acl_call("acl.mdl.get_input_dims", _a.k, _a.k, init=False, failure=_value_and_ret({}))
def get_input_dims(desc: int, index: int, /) -> tuple[dict[str, _Any], int]:
    """``({'name', 'dimCount', 'dims'}, ret)``; -1 in dynamic dims; ``{}`` on failure."""
    item = _io(desc, index, _INPUTS)
    return _dims(item.name, item.dims), 0


@_acl_call(
    "acl.mdl.get_input_dims_v2",
    _a.k,
    _a.k,
    fault="mdl.get_input_dims",
    init=False,
    failure=_value_and_ret({}),
)
def get_input_dims_v2(desc: int, index: int, /) -> tuple[dict[str, _Any], int]:
    """As get_input_dims, but an AIPP input's dims multiply to its size in bytes (YUV420SP_U8: n, h x 1.5, w,
    1), where get_input_dims gives the image's own (n, h, w, c)."""
    item = _io(desc, index, _INPUTS)
    return _dims(item.name, item.dims_v2), 0


@_acl_call("acl.mdl.get_output_dims", _a.k, _a.k, init=False, failure=_value_and_ret({}))
def get_output_dims(desc: int, index: int, /) -> tuple[dict[str, _Any], int]:
    """``(dims dict, ret)``; gear models report the largest gear's dims."""
    item = _io(desc, index, _OUTPUTS)
    return _dims(item.name, item.dims), 0


@_acl_call("acl.mdl.get_cur_output_dims", _a.k, _a.k, init=False, failure=_value_and_ret({}))
def get_cur_output_dims(desc: int, index: int, /) -> tuple[dict[str, _Any], int]:
    """``(dims dict, ret)`` at the gear last set or executed; before that, the largest gear."""
    item = _io(desc, index, _OUTPUTS)
    obj = _SIM.descs[desc]
    if obj.model_id is None:
        return _dims(item.name, item.dims), 0
    model = _SIM.models.get(obj.model_id)
    if model is None:
        raise _Fail(_C.ACL_ERROR_INVALID_MODEL_ID, f"model {obj.model_id} of this description was unloaded")
    gear = model.cur_gear
    return _dims(item.name, item.dims if gear is None else gear.output_dims[index]), 0


def _index_by_name(desc: int, name: str, outputs: bool) -> tuple[int, int]:
    info = _info(desc)
    table = info.output_index if outputs else info.input_index
    if name not in table:
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"the model has no {'output' if outputs else 'input'} named {name!r}; it has {', '.join(table) or 'none'}",
        )
    return table[name], 0


@_acl_call("acl.mdl.get_input_index_by_name", _a.k, _a.s, init=False, failure=_value_and_ret(0))
def get_input_index_by_name(desc: int, name: str, /) -> tuple[int, int]:
    """``(index, ret)``; ``ret != 0`` for an unknown name (how acllite detects ascend_mbatch_shape_data)."""
    return _index_by_name(desc, name, _INPUTS)


@_acl_call("acl.mdl.get_output_index_by_name", _a.k, _a.s, init=False, failure=_value_and_ret(0))
def get_output_index_by_name(desc: int, name: str, /) -> tuple[int, int]:
    return _index_by_name(desc, name, _OUTPUTS)


def get_tensor_real_name(desc: int, name: str, /) -> str:
    """Names are never rewritten by the simulator (it has no 127-character limit), so this is ``name``."""
    call = "acl.mdl.get_tensor_real_name"
    _a.k(call, 1, desc)
    return _a.s(call, 2, name)


# -- gears ----------------------------------------------------------------------------------------------


@_acl_call("acl.mdl.get_dynamic_batch", _a.k, init=False, failure=_value_and_ret({}))
def get_dynamic_batch(desc: int, /) -> tuple[dict[str, _Any], int]:
    """``({'batchCount': n, 'batch': [...]}, ret)``; batchCount 0 for models without batch gears."""
    info = _info(desc)
    batch = [b for (b,) in info.gear_set.values] if info.gear_set.kind == "batch" else []
    return {"batchCount": len(batch), "batch": batch}, 0


@_acl_call("acl.mdl.get_dynamic_hw", _a.k, _a.k, init=False, failure=_value_and_ret({}))
def get_dynamic_hw(desc: int, index: int, /) -> tuple[dict[str, _Any], int]:
    """``({'hwCount': n, 'hw': [[h, w], ...]}, ret)``; ``index`` is reserved (-1)."""
    info = _info(desc)
    hw = [list(g) for g in info.gear_set.values] if info.gear_set.kind == "hw" else []
    return {"hwCount": len(hw), "hw": hw}, 0


@_acl_call("acl.mdl.get_input_dynamic_gear_count", _a.k, _a.k, init=False, failure=_value_and_ret(0))
def get_input_dynamic_gear_count(desc: int, index: int, /) -> tuple[int, int]:
    """``(n, ret)``: dims gears of a --dynamic_dims model (0 for others); ``index`` is reserved (-1)."""
    info = _info(desc)
    return (len(info.gears) if info.mode == "dims" else 0), 0


@_acl_call("acl.mdl.get_input_dynamic_dims", _a.k, _a.k, _a.k, init=False, failure=_value_and_ret(None))
def get_input_dynamic_dims(
    desc: int, index: int, gear_count: int, /
) -> "tuple[list[dict[str, _Any]] | None, int]":
    """``([{'name', 'dimCount', 'dims'}, ...], ret)``: per gear, every data input's dims concatenated."""
    if gear_count > _MAX_GEAR_COUNT:
        raise _Fail(_C.ACL_ERROR_INVALID_PARAM, f"gear_count {gear_count} exceeds {_MAX_GEAR_COUNT}")
    info = _info(desc)
    gears = info.gears if info.mode == "dims" else []
    if gear_count < len(gears):
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"gear_count {gear_count} is less than the model's {len(gears)} gears (get_input_dynamic_gear_count)",
        )
    return [_dims("", info.concatenated_dims(g)) for g in gears], 0


def _write_gear(
    model_id: int, dataset: int, index: int, mode: str, gear_of: _Callable[[_ModelInfo], _OmGear]
) -> int:
    """The shared part of the three setters: checks, then the gear's values into the mbatch buffer."""
    model = _exec.loaded_model(model_id, _s.current_context())
    info = model.info
    if info.mode == "static":
        raise _Fail(_C.ACL_ERROR_MODEL_NOT_DYNAMIC, f"model {model_id} was built without gears")
    if info.mode != mode:
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"model {model_id} has {info.mode} gears; use acl.mdl.{_exec.SETTERS[info.mode]} instead",
        )
    if index != info.mbatch_index:
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"index {index} is not the {_C.ACL_DYNAMIC_TENSOR_NAME} input; that is index {info.mbatch_index} "
            f"(acl.mdl.get_input_index_by_name(desc, '{_C.ACL_DYNAMIC_TENSOR_NAME}'))",
        )
    ds = _lookup("datasets", dataset, "dataset")
    if index >= len(ds.buffers):
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"the dataset has {len(ds.buffers)} buffers; add every input, {_C.ACL_DYNAMIC_TENSOR_NAME} last, first",
        )
    gear = gear_of(info)
    buf = ds.buffers[index]
    _exec.write_gear(model, buf.addr, buf.size, gear)
    model.cur_gear = gear
    return 0


def _not_a_gear(model_id: int, what: str, gears: list[_Any]) -> _Fail:
    return _Fail(
        _C.ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID,
        f"{what} is not a gear of model {model_id}; its gears are {gears}",
    )


@_acl_call("acl.mdl.set_dynamic_batch_size", _a.u32, _a.k, _a.k, _a.k)
def set_dynamic_batch_size(model_id: int, dataset: int, index: int, batch_size: int, /) -> int:
    """``ret``; ``batch_size`` must be one of the gears (else 145013)."""

    def gear_of(info: _ModelInfo) -> _OmGear:
        gear = info.gear_by_values.get((batch_size,))
        if gear is None:
            raise _not_a_gear(model_id, f"batch size {batch_size}", [g.values[0] for g in info.gears])
        return gear

    return _write_gear(model_id, dataset, index, "batch", gear_of)


@_acl_call("acl.mdl.set_dynamic_hw_size", _a.u32, _a.k, _a.k, _a.k, _a.k)
def set_dynamic_hw_size(model_id: int, dataset: int, index: int, height: int, width: int, /) -> int:
    """``ret``; (height, width) must be one of the gears (else 145013)."""

    def gear_of(info: _ModelInfo) -> _OmGear:
        gear = info.gear_by_values.get((height, width))
        if gear is None:
            raise _not_a_gear(model_id, f"image size {height}x{width}", [list(g.values) for g in info.gears])
        return gear

    return _write_gear(model_id, dataset, index, "hw", gear_of)


def _checked_dynamic_dims(call: str, dims: object) -> dict[str, _Any]:
    """``{'dimCount', 'name', 'dims'}`` checked as pyACL's wrapper unpacks it.

    ``dimCount`` must be an int (``PyLong_AsSize_t``); ``name``, when present, a str (pyACL raises
    RuntimeError "PyUnicode_AsUTF8String failed" otherwise); ``dims`` a list (a tuple raises TypeError) of
    at least ``dimCount`` ints (numpy integers raise TypeError).
    """
    if not isinstance(dims, dict):
        raise TypeError(f"{call} args parse failed: argument 4 is not dict, it is {type(dims).__name__}")
    count = dims.get("dimCount")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise TypeError(f"{call}: dims['dimCount'] must be an int >= 0, not {count!r}")
    name = dims.get("name")
    if "name" in dims and not isinstance(name, str):
        raise RuntimeError(
            f"{call}: dims['name'] must be a str, not {type(name).__name__} (PyUnicode_AsUTF8String failed)"
        )
    if "dims" not in dims:
        raise TypeError(f"{call}: The dims of parameter 4 is not a list (dims['dims'] is missing)")
    _a.int_list(call, 4, dims["dims"], "dims['dims']", count)
    return dims


def _dynamic_dims_args(
    call: str, model_id: object, dataset: object, index: object, dims: object
) -> tuple[int, int, int, dict[str, _Any]]:
    """``"IkkO"``, then the dims dict unpacked by hand."""
    return (
        _a.u32(call, 1, model_id),
        _a.k(call, 2, dataset),
        _a.k(call, 3, index),
        _checked_dynamic_dims(call, dims),
    )


@_acl_call("acl.mdl.set_input_dynamic_dims", parse=_dynamic_dims_args)
def set_input_dynamic_dims(model_id: int, dataset: int, index: int, dims: dict[str, _Any], /) -> int:
    """``ret``; ``dims`` = ``{'dimCount': n, 'name': '', 'dims': [...]}``, every data input's dims concatenated."""
    values = [int(v) for v in dims["dims"][: dims["dimCount"]]]  # the first dimCount, as pyACL reads them
    listed = len(dims["dims"])

    def gear_of(info: _ModelInfo) -> _OmGear:
        if len(values) != listed:
            raise _Fail(
                _C.ACL_ERROR_INVALID_PARAM,
                f"dims['dimCount'] is {len(values)} but dims['dims'] has {listed} values (pyACL would pass only "
                "the first dimCount of them)",
            )
        if len(values) > _C.ACL_MAX_DIM_CNT:
            raise _Fail(
                _C.ACL_ERROR_INVALID_PARAM,
                f"{len(values)} dims; aclmdlIODims holds at most {_C.ACL_MAX_DIM_CNT}",
            )
        gear = info.gear_for_dims(values)
        if gear is None:
            raise _not_a_gear(model_id, f"dims {values}", [info.concatenated_dims(g) for g in info.gears])
        return gear

    return _write_gear(model_id, dataset, index, "dims", gear_of)


# -- datasets -------------------------------------------------------------------------------------------


@_acl_call("acl.mdl.create_dataset", init=False, failure=_value_only(0))
def create_dataset() -> int:
    """``dataset`` (0 on failure)."""
    ds = _Dataset(_s.new_handle())
    _SIM.datasets[ds.handle] = ds
    return ds.handle


@_acl_call(
    "acl.mdl.add_dataset_buffer", _a.k, _a.k, init=False, failure=lambda ret, dataset, _: (dataset, ret)
)
def add_dataset_buffer(dataset: int, data_buffer: int, /) -> tuple[int, int]:
    """``(dataset, ret)``: appends; the buffer's index is the order of the add calls. pyACL returns the
    dataset it was given, on failure too."""
    ds = _lookup("datasets", dataset, "dataset")
    ds.buffers.append(_lookup("buffers", data_buffer, "data buffer"))
    return dataset, 0


@_acl_call("acl.mdl.get_dataset_num_buffers", _a.k, fault=None, init=False, failure=_value_only(0))
def get_dataset_num_buffers(dataset: int, /) -> int:
    return len(_lookup("datasets", dataset, "dataset").buffers)


@_acl_call("acl.mdl.get_dataset_buffer", _a.k, _a.k, fault=None, init=False, failure=_value_only(0))
def get_dataset_buffer(dataset: int, index: int, /) -> int:
    """The data buffer at ``index``; 0 when out of range."""
    ds = _lookup("datasets", dataset, "dataset")
    if index >= len(ds.buffers):
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"index {index} is out of range; the dataset has {len(ds.buffers)}",
        )
    handle: int = ds.buffers[index].handle
    return handle


@_acl_call("acl.mdl.destroy_dataset", _a.k, init=False)
def destroy_dataset(dataset: int, /) -> int:
    """``ret``; the data buffers in it are not destroyed, the tensor descriptions it holds are."""
    ds = _lookup("datasets", dataset, "dataset")
    for desc in ds.descs.values():
        _SIM.tensor_descs.pop(desc.handle, None)
    del _SIM.datasets[dataset]
    return 0


@_acl_call(
    "acl.mdl.set_dataset_tensor_desc",
    _a.k,
    _a.k,
    _a.k,
    init=False,
    failure=lambda ret, dataset, *_: (dataset, ret),
)
def set_dataset_tensor_desc(dataset: int, tensor_desc: int, index: int, /) -> tuple[int, int]:
    """``(dataset, ret)``: entry ``index`` (a buffer already added) gets a copy of ``tensor_desc``'s dims, as
    aclmdlSetDatasetTensorDesc copies it (destroying the caller's desc afterwards is fine); a null desc
    clears the entry's. For inputs this says "this execute's shape" (shape-range models); after an execute
    with input descriptions, each output's description holds the shape the model produced."""
    ds = _lookup("datasets", dataset, "dataset")
    if index >= len(ds.buffers):
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"index {index} must be smaller than the dataset's {len(ds.buffers)} buffers "
            "(add the data buffer before its tensor description)",
        )
    if tensor_desc == 0:
        old = ds.descs.pop(index, None)
        if old is not None:
            _SIM.tensor_descs.pop(old.handle, None)
        return dataset, 0
    source = _lookup("tensor_descs", tensor_desc, "tensor description")
    _own_desc(ds, index, source.dtype, list(source.dims), source.format, source.name)
    return dataset, 0


def _own_desc(ds: _Dataset, index: int, dtype: int, dims: list[int], fmt: int, name: str) -> None:
    """A tensor description that ``ds`` owns, at entry ``index`` (replacing the one there)."""
    old = ds.descs.pop(index, None)
    if old is not None:
        _SIM.tensor_descs.pop(old.handle, None)
    desc = _TensorDesc(_s.new_handle(), dtype, dims, fmt)
    desc.name = name
    _SIM.tensor_descs[desc.handle] = desc
    ds.descs[index] = desc


@_acl_call("acl.mdl.get_dataset_tensor_desc", _a.k, _a.k, fault=None, init=False, failure=_value_only(0))
def get_dataset_tensor_desc(dataset: int, index: int, /) -> int:
    """The tensor description of entry ``index`` (owned by the dataset); 0 when it has none or ``index`` is
    out of range."""
    ds = _lookup("datasets", dataset, "dataset")
    if index >= len(ds.buffers):
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"index {index} must be smaller than the dataset's {len(ds.buffers)} buffers",
        )
    desc = ds.descs.get(index)
    return 0 if desc is None else desc.handle


def _shapes_from_descs(model: _exec.LoadedModel, in_handle: int) -> bool:
    """Whether the input dataset carries tensor descriptions (CANN's "dynamic" execute), checked against the
    model: the simulator's models have fixed shapes (or gears), so each description must give the model's
    shape; gear models take their shape from the gear setters instead. Raises Fail."""
    ds = _SIM.datasets.get(in_handle)
    if ds is None or not ds.descs:
        return False
    info = model.info
    if info.mode != "static":
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"the input dataset carries tensor descriptions but model {model.id} has {info.mode} gears; set its "
            f"shape with acl.mdl.{_exec.SETTERS[info.mode]} instead (only one of the two may be used)",
        )
    gear = info.gears[0]
    for index, desc in sorted(ds.descs.items()):
        want = list(gear.input_dims[index]) if index < info.n_data else None
        if want is not None and list(desc.dims) != want:
            raise _Fail(
                _C.ACL_ERROR_GE_PARAM_INVALID,
                f"input {index} ({info.inputs[index].name}) tensor description says {list(desc.dims)}; model "
                f"{model.id} takes {want} (the simulator has no shape-range models)",
            )
    return True


def _describe_outputs(model: _exec.LoadedModel, out_handle: int) -> None:
    """After an execute with input descriptions: each output entry describes what the model produced."""
    ds = _SIM.datasets.get(out_handle)
    if ds is None:
        return
    gear = model.info.gears[0]
    for index, item in enumerate(model.info.outputs[: len(ds.buffers)]):
        _own_desc(ds, index, item.dtype, list(gear.output_dims[index]), item.format, item.name)


# -- execute --------------------------------------------------------------------------------------------


@_acl_call("acl.mdl.execute", _a.u32, _a.k, _a.k)
def execute(model_id: int, input_dataset: int, output_dataset: int, /) -> int:
    """``ret``: runs the model now and returns when the outputs are in the output buffers."""
    model, ins, outs = _exec.prepare(model_id, input_dataset, output_dataset)
    described = _shapes_from_descs(model, input_dataset)
    _exec.execute_sync(model, ins, outs)
    if described:
        _describe_outputs(model, output_dataset)
    return 0


@_acl_call("acl.mdl.execute_async", _a.u32, _a.k, _a.k, _a.k, fault=None)
def execute_async(model_id: int, input_dataset: int, output_dataset: int, stream: int, /) -> int:
    """``ret``: queues the model on ``stream``; errors while it runs come back from synchronize_stream, and so
    does an injected fault."""
    model, ins, outs = _exec.prepare(model_id, input_dataset, output_dataset)
    target = _s.stream(stream, model.context)
    described = _shapes_from_descs(model, input_dataset)
    injected = _faults.hit("mdl.execute_async") if _faults.RULES else 0
    _exec.submit(model, ins, outs, target, injected)
    if described:  # as CANN's ModelExecute, at submit: the shapes are known from the descriptions
        _describe_outputs(model, output_dataset)
    return 0


@_acl_call("acl.mdl.get_aipp_type", _a.u32, _a.k, failure=_value_and_ret(_ACL_DATA_WITHOUT_AIPP, 0))
def get_aipp_type(model_id: int, index: int, /) -> tuple[int, int, int]:
    """``(type, dynamic_attached_data_index, ret)`` of input ``index``: ACL_DATA_WITH_STATIC_AIPP (1) for an input
    that ATC's ``--insert_op_conf`` put a static AIPP in front of, else ACL_DATA_WITHOUT_AIPP (0); the index is
    0xFFFFFFFF, the docs' "not a dynamic AIPP input", as the simulator builds no dynamic AIPP."""
    model = _SIM.models.get(model_id)
    if model is None:
        raise _Fail(_C.ACL_ERROR_INVALID_MODEL_ID, f"model id {model_id} is not loaded")
    if index >= len(model.info.inputs):
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"input index {index} is out of range; model {model_id} has {len(model.info.inputs)} inputs",
        )
    kind = _ACL_DATA_WITH_STATIC_AIPP if model.info.inputs[index].aipp is not None else _ACL_DATA_WITHOUT_AIPP
    return kind, _ACL_INVALID_NODE_INDEX, 0
