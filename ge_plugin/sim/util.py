"""``acl.util``, simulated: host buffers as integer pointers and back.

These work on host memory only, as on real hardware. Given a device pointer, real pyACL dereferences it and
crashes the process; the simulator raises ``ValueError`` saying to copy the data to the host first. The
argument checks and exception types follow pyACL's ``util/bytes_convert.cpp`` and ``util/numpy_convert.cpp``
(hicann/runtime): a non-ndarray is a ValueError, the deprecated numpy calls warn with ``Warning`` before
they look at their argument, and ``ptr_to_numpy`` wants its shape as a tuple (anything else is a ValueError).
"""

import ctypes as _ctypes
import errno as _errno
import threading as _threading
import traceback as _traceback
import warnings as _warnings
from collections.abc import Callable as _Callable
from typing import Any as _Any

import numpy as _np
import numpy.typing as _npt

from ge_plugin.sim import _args as _a
from ge_plugin.sim import _host_objects
from ge_plugin.sim import _state as _s
from ge_plugin.sim import sanitizer as _sanitizer
from ge_plugin.sim._fail import Fail as _Fail
from ge_plugin.sim._sites import origin as _origin
from ge_plugin.sim.memory import DEVICE_SHIFT as _DEVICE_SHIFT
from ge_plugin.sim.memory import HOST as _HOST
from ge_plugin.sim.memory import INVALID as _INVALID
from ge_plugin.sim.memory import check_host as _check_host
from ge_plugin.sim.memory import explain_pinned_free as _explain_pinned_free

__all__ = [
    "bytes_to_ptr",
    "numpy_contiguous_to_ptr",
    "numpy_to_ptr",
    "ptr_to_bytes",
    "ptr_to_numpy",
    "start_thread",
    "stop_thread",
]

#: numpy C type numbers (what pyACL's ``npy_type`` takes) -> dtypes
_NPY_TYPES: dict[int, type[_np.generic]] = {
    0: _np.bool_,
    1: _np.int8,
    2: _np.uint8,
    3: _np.int16,
    4: _np.uint16,
    5: _np.int32,
    6: _np.uint32,
    7: _np.int_,
    8: _np.uint,
    9: _np.longlong,
    10: _np.ulonglong,
    11: _np.float32,
    12: _np.float64,
    23: _np.float16,
}


def _host(call: str, ptr: int, nbytes: int) -> None:
    """``nbytes`` of host memory at ``ptr`` are about to be read or wrapped: ValueError when they are not
    there (pyACL dereferences them and the process crashes); a sanitizer finding too, when checking."""
    if ptr >= 1 << _DEVICE_SHIFT:
        raise ValueError(
            f"{call}: 0x{ptr:x} is not host memory (a device pointer or a handle); copy device data to the host "
            "with acl.rt.memcpy first"
        )
    if ptr == 0:
        raise ValueError(f"{call}: null pointer")
    try:
        memory = _s.SIM.memory
        if memory is None:  # before acl.init: no pinned memory exists, freed ranges may still
            freed = _explain_pinned_free(ptr)
            if freed is not None:
                raise _Fail(0, freed, _sanitizer.USE_AFTER_FREE)
            _check_host(call, "ptr", ptr, nbytes)
            return
        place = memory.locate(ptr)
        if place.kind == _INVALID:
            raise _Fail(0, place.why, place.fault)
        if place.alloc is not None and ptr + nbytes > place.alloc.base + place.alloc.limit():
            over = ptr + nbytes - place.alloc.base - place.alloc.limit()
            raise _Fail(
                0,
                f"ptr range 0x{ptr:x}+{nbytes} runs {over} bytes past the end of {place.alloc.describe()}",
                _sanitizer.OUT_OF_BOUNDS,
            )
        if place.kind == _HOST:
            _check_host(call, "ptr", ptr, nbytes)
    except _Fail as fail:
        if fail.kind is not None:
            _sanitizer.report_error(fail.kind, call, fail.message, 0)
        raise ValueError(f"{call}: {fail.message}") from None


def bytes_to_ptr(data: bytes, /) -> int:
    """The address of ``data``'s own buffer (no copy); keep ``data`` alive while the pointer is used.

    The simulator keeps ``data`` with the line that asked, so copies through the pointer are checked against
    its length and its lifetime (``_host_objects``)."""
    if not isinstance(data, bytes):
        raise ValueError(f"acl.util.bytes_to_ptr: argument must be bytes, not {type(data).__name__}")
    ptr = _ctypes.cast(_ctypes.c_char_p(data), _ctypes.c_void_p).value or 0
    _host_objects.register(ptr, len(data), data, _origin("acl.util.bytes_to_ptr"))
    return ptr


def _register_array(call: str, array: _npt.NDArray[_Any]) -> int:
    """Remember ``array``'s memory (held through the object owning it) for checks; its data address."""
    ptr = array.ctypes.data
    extent = array.itemsize
    for dim, stride in zip(array.shape, array.strides):
        if dim == 0:
            extent = 0
            break
        extent += (dim - 1) * max(stride, 0)
    owner: object = array
    while isinstance(owner, _np.ndarray) and owner.base is not None:
        owner = owner.base
    _host_objects.register(ptr, extent, owner, _origin(call), (array.dtype, tuple(array.shape)))
    return ptr


def ptr_to_bytes(ptr: int, size: int, /) -> bytes:
    """A copy of ``size`` bytes of host memory at ``ptr``; ``b""`` when ``size`` is 0, whatever ``ptr`` is."""
    call = "acl.util.ptr_to_bytes"
    ptr = _a.k(call, 1, ptr)
    size = _a.k(call, 2, size)
    if size == 0:
        return b""
    _host(call, ptr, size)
    return _ctypes.string_at(ptr, size)


def _deprecated(name: str, instead: str) -> None:
    # pyACL warns with the base Warning class (shown by default), before it parses its argument
    _warnings.warn(
        f"acl.util.{name} will be deprecated. Please use acl.util.{instead} instead.", Warning, stacklevel=3
    )


def numpy_to_ptr(array: _npt.NDArray[_Any], /) -> int:
    """Deprecated in pyACL (it warns, and so does this): the address of ``array``'s data, no copy."""
    _deprecated("numpy_to_ptr", "bytes_to_ptr")
    if not isinstance(array, _np.ndarray):
        raise ValueError(f"acl.util.numpy_to_ptr: needs an ndarray as argument, not {type(array).__name__}")
    if not array.flags.c_contiguous:
        _warnings.warn(
            "The input ndarray is discontiguous. Please use acl.util.bytes_to_ptr instead.",
            Warning,
            stacklevel=2,
        )
    return _register_array("acl.util.numpy_to_ptr", array)


def numpy_contiguous_to_ptr(array: _npt.NDArray[_Any], /) -> tuple[int, _npt.NDArray[_Any]]:
    """Deprecated: ``(ptr, contiguous_array)``; keep the returned array alive while the pointer is used."""
    _deprecated("numpy_contiguous_to_ptr", "bytes_to_ptr")
    if not isinstance(array, _np.ndarray):
        raise ValueError(
            f"acl.util.numpy_contiguous_to_ptr: needs an ndarray as argument, not {type(array).__name__}"
        )
    contiguous = _np.ascontiguousarray(array)
    return _register_array("acl.util.numpy_contiguous_to_ptr", contiguous), contiguous


def ptr_to_numpy(ptr: int, shape: tuple[int, ...], npy_type: int, /) -> _npt.NDArray[_Any]:
    """Deprecated: a writable array over host memory at ``ptr`` (no copy); ``npy_type`` is a numpy type number."""
    call = "acl.util.ptr_to_numpy"
    _deprecated("ptr_to_numpy", "ptr_to_bytes")
    ptr = _a.k(call, 1, ptr)
    npy_type = _a.i(call, 3, npy_type)
    if not isinstance(shape, tuple):
        raise ValueError(f"{call}: the shape must be a tuple, not {type(shape).__name__} (shape is empty)")
    dims = []
    for n, d in enumerate(shape):
        if not isinstance(d, int) or isinstance(d, bool):
            raise TypeError(f"{call} args parse failed: shape[{n}] must be an int, not {type(d).__name__}")
        if d < 0:
            raise ValueError(f"{call}: negative dimensions are not allowed (shape[{n}] = {d})")
        dims.append(d)
    if npy_type not in _NPY_TYPES:
        raise ValueError(f"{call}: npy_type {npy_type} is not supported; use one of {sorted(_NPY_TYPES)}")
    dtype = _np.dtype(_NPY_TYPES[npy_type])
    count = 1
    for d in dims:
        count *= d
    _host(call, ptr, count * dtype.itemsize)
    raw = (_ctypes.c_char * (count * dtype.itemsize)).from_address(ptr)
    return _np.frombuffer(memoryview(raw), dtype=dtype, count=count).reshape(dims)


class _Started:
    """A thread of start_thread and what went wrong in it (stop_thread reports it)."""

    __slots__ = ("errors", "thread")

    def __init__(self) -> None:
        self.thread: _threading.Thread | None = None
        self.errors: list[str] = []


#: start_thread's threads by id, until stop_thread joins them
_STARTED: dict[int, _Started] = {}
_started_lock = _threading.Lock()


def _thread_main(fn: _Callable[..., object], args: object, started: _Started) -> None:
    try:
        if args is None:
            fn()
        else:
            fn(args)
    except BaseException as exc:  # pyACL's thread prints the error and keeps it for stop_thread
        _traceback.print_exception(type(exc), exc, exc.__traceback__)
        started.errors.append(f"exception={type(exc).__name__},msg=thread call failed")


def start_thread(fn: object, args: object, /) -> tuple[int, int]:
    """``thread_id, ret``: runs ``fn(args)`` (``fn()`` when ``args`` is None) in a new thread.

    ``thread_id`` is the thread's ``pthread_t``, the id ``acl.rt.subscribe_report`` takes and the value
    ``threading.get_ident()`` returns inside that thread. pyACL's ``util/thread.cpp`` starts a bare pthread,
    which Python does not wait for at exit; this thread is a daemon for the same reason.
    """
    if not callable(fn):
        raise TypeError(f"acl.util.start_thread: parameter must be callable, not {type(fn).__name__}")
    started = _Started()
    thread = _threading.Thread(
        target=_thread_main, args=(fn, args, started), name="acl-util-thread", daemon=True
    )
    started.thread = thread
    thread.start()
    with _started_lock:
        _STARTED[thread.ident] = started  # type: ignore[index]
    return thread.ident, 0  # type: ignore[return-value]


def stop_thread(thread_id: int, /) -> int:
    """``ret`` of ``pthread_join``: waits (without the GIL) for the thread to return; it does not stop it.

    An exception the thread's function raised is raised here as RuntimeError, as pyACL does
    ("exception=ValueError,msg=thread call failed;"). An unknown id returns ESRCH, the calling thread's own
    id EDEADLK, as ``pthread_join`` does.
    """
    thread_id = _a.k("acl.util.stop_thread", 1, thread_id)
    with _started_lock:
        started = _STARTED.get(thread_id)
        if started is None:
            return _errno.ESRCH
        if started.thread is _threading.current_thread():
            return _errno.EDEADLK
        del _STARTED[thread_id]
    started.thread.join()  # type: ignore[union-attr]
    if started.errors:
        raise RuntimeError("".join(f"{error};" for error in started.errors))
    return 0
