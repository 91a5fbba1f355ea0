"""pyACL's top-level module, simulated on the CPU: ``import ge_plugin.sim.acl as acl``.

Same call forms, return shapes and error codes as ``import acl`` on an Ascend host: the open-source pyACL
extension (hicann/runtime ``python/pyACL/py_init_acl.cpp``) and the pyACL API docs; docs/simulator.md lists
the sources and every deliberate difference. Like pyACL it exports no constants; ``acl.rt``,
``acl.mdl`` and ``acl.util`` are submodules. Runtime failures never raise: they return the code, and
``acl.get_recent_err_msg()`` says why. Wrong argument types raise ``TypeError``.

Data buffers, datasets and tensor descriptions are host-side structures, so, as in pyACL, they can be created
before ``acl.init``; everything that touches a device needs ``acl.init`` (else ACL_ERROR_UNINITIALIZE,
100001).
"""

import json as _json
import logging as _logging
import math as _math
import os as _os
import struct as _struct
import sys as _sys
import time as _time

from ge_plugin import acl_constants as _C
from ge_plugin.sim import _args as _a
from ge_plugin.sim import _codes as _K
from ge_plugin.sim import _config, mdl, media, rt, util
from ge_plugin.sim import _state as _s
from ge_plugin.sim import device_time as _device_time
from ge_plugin.sim import faults as _faults
from ge_plugin.sim import sanitizer as _sanitizer
from ge_plugin.sim._api import acl_call as _acl_call
from ge_plugin.sim._api import value_and_ret as _value_and_ret
from ge_plugin.sim._api import value_only as _value_only
from ge_plugin.sim._fail import Fail as _Fail
from ge_plugin.sim._objects import DataBuffer as _DataBuffer
from ge_plugin.sim._objects import TensorDesc as _TensorDesc
from ge_plugin.sim._objects import lookup as _lookup
from ge_plugin.sim._sites import origin as _origin
from ge_plugin.sim._sites import user_site as _user_site

__all__ = [
    "app_log",
    "create_data_buffer",
    "create_tensor_desc",
    "data_type_size",
    "destroy_data_buffer",
    "destroy_tensor_desc",
    "finalize",
    "float16_to_float",
    "float_to_float16",
    "get_cann_version",
    "get_data_buffer_addr",
    "get_data_buffer_size",
    "get_data_buffer_size_v2",
    "get_recent_err_msg",
    "get_soc_name",
    "get_tensor_desc_dim",
    "get_tensor_desc_dim_v2",
    "get_tensor_desc_element_count",
    "get_tensor_desc_format",
    "get_tensor_desc_name",
    "get_tensor_desc_num_dims",
    "get_tensor_desc_size",
    "get_tensor_desc_type",
    "get_version",
    "init",
    "mdl",
    "media",
    "rt",
    "set_tensor_desc_name",
    "update_data_buffer",
    "util",
]

#: the CANN release the simulator stands in for (acl.get_version)
_VERSION = (8, 0, 0)


def _init_args(call: str, *args: object) -> tuple[str, ...]:
    if len(args) > 1:
        raise TypeError(f"acl.init() takes at most 1 argument ({len(args)} given)")
    return (_a.s(call, 1, args[0]),) if args else ()


def _config_section(path: str) -> object:
    """The ``ge_plugin_sim`` section of the JSON config file ``path`` (None when it has none)."""
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except OSError as exc:
        raise _Fail(
            _C.ACL_ERROR_INVALID_FILE, f"cannot read the config file {path}: {exc.strerror or exc}"
        ) from None
    try:
        data = _json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise _Fail(_C.ACL_ERROR_PARSE_FILE, f"the config file {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _Fail(_C.ACL_ERROR_PARSE_FILE, f"the config file {path} must hold a JSON object")
    return data.get(_config.SECTION)


def _configure(section: object) -> "_config.SimConfig":
    """The configuration from the environment and ``section``, with its faults and device time installed."""
    try:
        config = _config.load(_os.environ, section)
        _faults.install(config.faults)
        _sanitizer.configure(config.check)
        _device_time.configure(
            _device_time.profile() if config.execute_latency is None else config.execute_latency,
            _device_time.timing_only() if config.timing_only is None else config.timing_only,
            config.device_lock_dir,
        )
    except OSError as exc:
        raise _Fail(
            _C.ACL_ERROR_INVALID_PARAM,
            f"ge-plugin simulator configuration: the device lock directory {config.device_lock_dir} "
            f"(GE_PLUGIN_SIM_DEVICE_LOCK_DIR / device_lock_dir) is unusable: {exc}",
        ) from None
    except (TypeError, ValueError) as exc:
        code = _C.ACL_ERROR_PARSE_FILE if section is not None else _C.ACL_ERROR_INVALID_PARAM
        raise _Fail(code, f"ge-plugin simulator configuration: {exc}") from None
    return config


@_acl_call("acl.init", parse=_init_args, init=False)
def init(*args: str) -> int:
    """``ret = acl.init()`` or ``acl.init(config_path)``; once per process."""
    if _s.SIM.initialized or _s.SIM.finalized:
        raise _Fail(
            _C.ACL_ERROR_REPEAT_INITIALIZE,
            "acl.init may be called once per process and it already was"
            + (" (acl.finalize does not allow another acl.init)" if _s.SIM.finalized else ""),
        )
    path = args[0] if args else ""
    _s.start(_configure(_config_section(path) if path else None))
    return 0


@_acl_call("acl.finalize", init=False)
def finalize() -> int:
    """``ret = acl.finalize()``; reports the allocations never freed (when checking) and, when
    GE_PLUGIN_SIM_REPORT_DIR is set, writes the counters report once the queued work is done and before
    anything is released."""
    if not _s.SIM.initialized:
        if _s.SIM.finalized:
            raise _Fail(_C.ACL_ERROR_REPEAT_FINALIZE, "acl.finalize was already called")
        raise _Fail(_C.ACL_ERROR_UNINITIALIZE, "acl.init() has not been called")
    by = _origin("acl.finalize")
    if _s.SIM.memory is not None:
        _s.report_leaks(by.call, _s.SIM.memory.live())
    _s.stop(by, report_dir=_s.SIM.config.report_dir)
    return 0


def get_version() -> tuple[int, int, int, int]:
    """``major, minor, patch, ret = acl.get_version()``."""
    return (*_VERSION, 0)


_CANN_VERSION_KEYS = (
    "version",
    "major_version",
    "minor_version",
    "release_version",
    "patch_version",
    "reserved",
)


@_acl_call(
    "acl.get_cann_version", _a.u32, init=False, failure=_value_and_ret(dict.fromkeys(_CANN_VERSION_KEYS, ""))
)
def get_cann_version(package: int, /) -> tuple[dict[str, str], int]:
    """``(version, ret)`` of a CANN package (aclCANNPackageName: 0 CANN ... 7 DRIVER); every package is the
    release the simulator stands in for. An unknown package returns empty strings and ACL_ERROR_INVALID_PARAM,
    as pyACL builds the dict whatever the call returned."""
    if package >= _K.ACL_PKG_NAME_COUNT:
        raise _Fail(_C.ACL_ERROR_INVALID_PARAM, f"package {package} is not an aclCANNPackageName (0..7)")
    major, minor, patch = _VERSION
    values = (f"{major}.{minor}.{patch}", str(major), str(minor), str(patch), "", "")
    return dict(zip(_CANN_VERSION_KEYS, values)), 0


def get_soc_name() -> "str | None":
    """``"Ascend910B3"`` (GE_PLUGIN_SIM_SOC), or None before acl.init, as aclrtGetSocName returns NULL."""
    if not _s.SIM.initialized:
        return None
    return _s.SIM.config.soc_version


def get_recent_err_msg() -> "str | None":
    """This thread's error messages since the last call, newest first, then cleared; None if there are none."""
    return _s.take_messages()


@_acl_call("acl.create_data_buffer", _a.k, _a.k, init=False, failure=_value_only(0))
def create_data_buffer(data: int, size: int, /) -> int:
    """``buf = acl.create_data_buffer(ptr, size)``; (0, 0) is an empty buffer (outputs: the runtime allocates)."""
    buf = _DataBuffer(_s.new_handle(), data, size)
    _s.SIM.buffers[buf.handle] = buf
    return buf.handle


@_acl_call("acl.destroy_data_buffer", _a.k, init=False)
def destroy_data_buffer(buf: int, /) -> int:
    """``ret``; destroys the wrapper, never the memory."""
    _lookup("buffers", buf, "data buffer")
    del _s.SIM.buffers[buf]
    return 0


@_acl_call("acl.update_data_buffer", _a.k, _a.k, _a.k, init=False)
def update_data_buffer(buf: int, data: int, size: int, /) -> int:
    """``ret``; points an existing buffer at new memory (every dataset holding it sees the change)."""
    obj = _lookup("buffers", buf, "data buffer")
    obj.addr, obj.size = data, size
    return 0


@_acl_call("acl.get_data_buffer_addr", _a.k, fault=None, init=False, failure=_value_only(0))
def get_data_buffer_addr(buf: int, /) -> int:
    """``addr``; 0 for an invalid buffer."""
    return int(_lookup("buffers", buf, "data buffer").addr)


@_acl_call("acl.get_data_buffer_size_v2", _a.k, fault=None, init=False, failure=_value_only(0))
def get_data_buffer_size_v2(buf: int, /) -> int:
    """``size`` (size_t); 0 for an invalid buffer."""
    return int(_lookup("buffers", buf, "data buffer").size)


def get_data_buffer_size(buf: int, /) -> int:
    """Deprecated uint32 form of get_data_buffer_size_v2 (acllite still calls it)."""
    return get_data_buffer_size_v2(buf) & 0xFFFFFFFF


def data_type_size(dtype: int, /) -> int:
    """Bytes per element of an aclDataType; 0 for types without a fixed size."""
    dtype = _a.i("acl.data_type_size", 1, dtype)
    return _C.DATA_TYPE_SIZE.get(dtype, 0)


def _tensor_desc_args(call: str, dtype: object, dims: object, fmt: object) -> tuple[int, list[int], int]:
    """``"iOi"``, then the dims list unpacked by hand: a list (pyACL refuses a tuple, "argument 2 is not list")."""
    dtype = _a.i(call, 1, dtype)
    fmt = _a.i(call, 3, fmt)
    return dtype, _a.int_list(call, 2, dims, "dims"), fmt


@_acl_call("acl.create_tensor_desc", parse=_tensor_desc_args, init=False, failure=_value_only(0))
def create_tensor_desc(dtype: int, dims: list[int], fmt: int, /) -> int:
    """``desc = acl.create_tensor_desc(dtype, [dims...], format)``; 0 on failure."""
    if len(dims) > _C.ACL_MAX_DIM_CNT:
        raise _Fail(_C.ACL_ERROR_INVALID_PARAM, f"{len(dims)} dims; at most {_C.ACL_MAX_DIM_CNT}")
    desc = _TensorDesc(_s.new_handle(), dtype, dims, fmt)
    _s.SIM.tensor_descs[desc.handle] = desc
    return desc.handle


@_acl_call("acl.destroy_tensor_desc", _a.k, fault=None, init=False, failure=_value_only(None))
def destroy_tensor_desc(desc: int, /) -> None:
    """Returns None, as pyACL does."""
    _tensor_desc(desc)
    del _s.SIM.tensor_descs[desc]


def _tensor_desc(desc: int) -> _TensorDesc:
    found: _TensorDesc = _lookup("tensor_descs", desc, "tensor description")
    return found


def _described_size(dims: list[int], item_size: int) -> int:
    """Elements times ``item_size``; 0 while a dim is dynamic (-1)."""
    return 0 if any(d < 0 for d in dims) else _math.prod(dims) * item_size


@_acl_call("acl.get_tensor_desc_type", _a.k, fault=None, init=False, failure=_value_only(_C.ACL_DT_UNDEFINED))
def get_tensor_desc_type(desc: int, /) -> int:
    return _tensor_desc(desc).dtype


@_acl_call(
    "acl.get_tensor_desc_format", _a.k, fault=None, init=False, failure=_value_only(_C.ACL_FORMAT_UNDEFINED)
)
def get_tensor_desc_format(desc: int, /) -> int:
    return _tensor_desc(desc).format


@_acl_call("acl.get_tensor_desc_num_dims", _a.k, fault=None, init=False, failure=_value_only(0))
def get_tensor_desc_num_dims(desc: int, /) -> int:
    return len(_tensor_desc(desc).dims)


@_acl_call("acl.get_tensor_desc_dim_v2", _a.k, _a.k, fault=None, init=False, failure=_value_and_ret(-1))
def get_tensor_desc_dim_v2(desc: int, index: int, /) -> tuple[int, int]:
    """``dim, ret``."""
    dims = _tensor_desc(desc).dims
    if index >= len(dims):
        raise _Fail(_C.ACL_ERROR_INVALID_PARAM, f"index {index} >= {len(dims)} dims")
    return dims[index], 0


def get_tensor_desc_dim(desc: int, index: int, /) -> int:
    """Deprecated: the dim alone (-1 on failure)."""
    return get_tensor_desc_dim_v2(desc, index)[0]


@_acl_call("acl.get_tensor_desc_element_count", _a.k, fault=None, init=False, failure=_value_only(0))
def get_tensor_desc_element_count(desc: int, /) -> int:
    return _described_size(_tensor_desc(desc).dims, 1)


@_acl_call("acl.get_tensor_desc_size", _a.k, fault=None, init=False, failure=_value_only(0))
def get_tensor_desc_size(desc: int, /) -> int:
    """Bytes of the described tensor; 0 when it has dynamic dims or a type without a fixed size."""
    obj = _tensor_desc(desc)
    return _described_size(obj.dims, _C.DATA_TYPE_SIZE.get(obj.dtype, 0))


@_acl_call("acl.get_tensor_desc_name", _a.k, fault=None, init=False, failure=_value_only(""))
def get_tensor_desc_name(desc: int, /) -> str:
    return _tensor_desc(desc).name


@_acl_call("acl.set_tensor_desc_name", _a.k, _a.s, fault=None, init=False, failure=_value_only(None))
def set_tensor_desc_name(desc: int, name: str, /) -> None:
    """Returns None, as pyACL does."""
    _tensor_desc(desc).name = name


#: aclLogLevel -> (name in a CANN log line, Python logging level)
_APP_LOG_LEVELS = {
    0: ("DEBUG", _logging.DEBUG),
    1: ("INFO", _logging.INFO),
    2: ("WARNING", _logging.WARNING),
    3: ("ERROR", _logging.ERROR),
}
_app_logger = _logging.getLogger("ge_plugin.sim.app_log")
_app_logger.addHandler(_logging.NullHandler())  # like plog files: seen only where logging is configured


def _app_log_args(call: str, *args: object) -> tuple[int, str]:
    """``"is"``: the level, then the message."""
    if len(args) != 2:
        raise TypeError(f"{call}() takes exactly 2 arguments ({len(args)} given)")
    return _a.i(call, 1, args[0]), _a.s(call, 2, args[1])


def _global_log_level() -> int:
    """``ASCEND_GLOBAL_LOG_LEVEL`` (0 DEBUG ... 3 ERROR, 4 NULL), ERROR when unset or not a level, as CANN."""
    text = _os.environ.get("ASCEND_GLOBAL_LOG_LEVEL", "").strip()
    return int(text) if text in ("0", "1", "2", "3", "4") else 3


@_acl_call("acl.app_log", parse=_app_log_args, fault=None, init=False, failure=_value_only(None))
def app_log(log_level: int, message: str, /) -> None:
    """Returns None, as pyACL does: ``message`` goes to the application log at ``log_level`` (aclLogLevel:
    0 DEBUG, 1 INFO, 2 WARNING, 3 ERROR; other values log nothing, as ACL_APP_LOG drops them).

    CANN writes it to the plog files under ``$ASCEND_PROCESS_LOG_PATH`` (or ``~/ascend/log``) when the level
    reaches ``ASCEND_GLOBAL_LOG_LEVEL`` (default ERROR), and to stdout as well with
    ``ASCEND_SLOG_PRINT_TO_STDOUT=1``. The simulator applies the same level and stdout switch, and hands every
    record to the Python logger ``ge_plugin.sim.app_log`` instead of plog files.
    """
    level = _APP_LOG_LEVELS.get(log_level)
    if level is None or log_level < _global_log_level():
        return None
    name, py_level = level
    site = _user_site()
    _app_logger.log(py_level, "[%s] %s", site, message)
    if _os.environ.get("ASCEND_SLOG_PRINT_TO_STDOUT", "").strip() == "1":
        now = _time.time()
        stamp = _time.strftime("%Y-%m-%d-%H:%M:%S", _time.localtime(now)) + f".{int(now % 1 * 1e6):06d}"
        process = _os.path.basename(_sys.argv[0] or "python")
        _sys.stdout.write(f"[{name}] APP({_os.getpid()},{process}):{stamp} [{site}]{message}\n")
        _sys.stdout.flush()
    return None


def float16_to_float(value: int, /) -> float:
    """The float a float16 bit pattern (an int, ``"H"``: masked to 16 bits) stands for."""
    bits = _a.u16("acl.float16_to_float", 1, value)
    return float(_struct.unpack("<e", bits.to_bytes(2, "little"))[0])


def float_to_float16(value: float, /) -> int:
    """The float16 bit pattern (an int) nearest to ``value`` (``"f"``: any real number, numpy's included,
    first rounded to a C float as pyACL's wrapper does)."""
    number = _a.f32("acl.float_to_float16", 1, value)
    try:
        return int.from_bytes(_struct.pack("<e", number), "little")
    except OverflowError:
        return 0xFC00 if number < 0 else 0x7C00
