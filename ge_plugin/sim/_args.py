"""Argument checks that behave like pyACL's ``PyArg_ParseTuple`` formats, so type bugs fail here as there.

pyACL parses every argument with a C format (the open-source extension, hicann/runtime
``python/pyACL/**``, calls ``PyArg_ParseTuple`` in every wrapper): ``"k"`` (unsigned long: an ``int``, masked to
64 bits, so ``-1`` arrives as 0xFFFF...), ``"K"`` (unsigned long long, the same), ``"i"`` / ``"I"`` / ``"H"``
(C ints: anything with ``__index__``, so numpy integers pass), ``"f"`` (a C float: anything with
``__float__`` or ``__index__``, so numpy floats pass, strings do not), ``"s"`` (``str`` only) and ``"O"``
(anything, checked by the wrapper itself). Lists of ints that wrappers unpack by hand (tensor dims, dynamic
dims) must be a ``list`` (``PyList_Check``: a tuple is refused) of ``int`` (``PyObject_TypeCheck(..,
&PyLong_Type)``: numpy integers are refused). A wrong type raises ``TypeError``. One deliberate deviation,
stricter than CPython: ``bool`` is refused everywhere (CPython lets ``True`` through as 1, which is always a
bug when the argument is a pointer or a size). A program that passes these checks therefore passes pyACL's;
docs/simulator.md lists every place where the simulator is stricter.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Callable
from typing import Any

MASK64 = (1 << 64) - 1
_INT_MIN = -(1 << 31)
_INT_MAX = (1 << 31) - 1


def _fail(call: str, pos: int, expected: str, value: object) -> TypeError:
    return TypeError(
        f"{call} args parse failed: argument {pos} must be {expected}, not {type(value).__name__}"
    )


def k(call: str, pos: int, value: object) -> int:
    """``"k"`` / ``"K"``: an exact int (numpy integers are refused, as by ``PyLong_Check``), masked to u64."""
    if type(value) is int:
        return value if value >= 0 else value & MASK64
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value) & MASK64
    raise _fail(call, pos, "int", value)


def _index(call: str, pos: int, value: object) -> int:
    if type(value) is int:
        return value
    if isinstance(value, bool):
        raise _fail(call, pos, "int", value)
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise _fail(call, pos, "int", value) from None


def i(call: str, pos: int, value: object) -> int:
    """``"i"``: a C int; objects with ``__index__`` (numpy integers) pass, as with ``PyLong_AsLong``."""
    value = _index(call, pos, value)
    if not _INT_MIN <= value <= _INT_MAX:
        raise OverflowError(f"{call} args parse failed: argument {pos} ({value}) does not fit a C int")
    return value


def u16(call: str, pos: int, value: object) -> int:
    """``"H"``: unsigned short, masked like ``PyLong_AsUnsignedLongMask`` (no overflow check)."""
    return _index(call, pos, value) & 0xFFFF


def u32(call: str, pos: int, value: object) -> int:
    """``"I"``: unsigned int, masked to 32 bits like ``PyLong_AsUnsignedLongMask``; used for model ids."""
    return _index(call, pos, value) & 0xFFFFFFFF


def s(call: str, pos: int, value: object) -> str:
    """``"s"``: a str without NUL characters."""
    if type(value) is not str and not isinstance(value, str):
        raise _fail(call, pos, "str", value)
    if "\0" in value:
        raise ValueError(f"{call} args parse failed: argument {pos} contains a NUL character")
    return value


_FLT_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]


def f32(call: str, pos: int, value: object) -> float:
    """``"f"``: ``PyFloat_AsDouble`` (``__float__``, else ``__index__``), then the C cast to float."""
    if type(value) is float:
        number = value
    elif isinstance(value, (bool, str, bytes)):
        raise _fail(call, pos, "float", value)
    elif hasattr(type(value), "__float__"):
        number = float(value)  # type: ignore[arg-type]
    elif hasattr(type(value), "__index__"):
        number = float(operator.index(value))  # type: ignore[arg-type]
    else:
        raise _fail(call, pos, "float", value)
    if number != number or abs(number) == float("inf"):
        return number
    if abs(number) > _FLT_MAX:
        return float("inf") if number > 0 else float("-inf")
    single: float = struct.unpack("<f", struct.pack("<f", number))[0]
    return single


def int_list(call: str, pos: int, value: object, what: str, count: int | None = None) -> list[int]:
    """A hand-parsed list of int64 values, as pyACL's wrappers unpack tensor dims and dynamic dims.

    ``value`` must be a ``list`` (a tuple raises TypeError, as ``PyList_Check`` does) whose items are ``int``
    (numpy integers raise TypeError, as ``PyObject_TypeCheck(item, &PyLong_Type)`` does); a value outside
    int64 raises ValueError ("PyLong_AsLongLong failed"). ``count`` items are read when given (the wrapper
    loops to ``dimCount``): a list shorter than that raises TypeError, as ``PyList_GetItem`` returning NULL
    does there.
    """
    if not isinstance(value, list):
        raise TypeError(
            f"{call} args parse failed: {what} (argument {pos}) must be a list of int, not "
            f"{type(value).__name__}"
        )
    items = value if count is None else value[:count]
    if count is not None and len(value) < count:
        raise TypeError(
            f"{call} args parse failed: {what} has {len(value)} items, fewer than its count {count}"
        )
    out = []
    for n, item in enumerate(items):
        if not isinstance(item, int) or isinstance(item, bool):
            raise TypeError(
                f"{call} args parse failed: {what}[{n}] must be an int, not {type(item).__name__}"
            )
        if not -(1 << 63) <= item < 1 << 63:
            raise ValueError(f"{call}: {what}[{n}] = {item} does not fit int64 (PyLong_AsLongLong failed)")
        out.append(int(item))
    return out


#: parser -> the bound below which it returns a plain non-negative ``int`` unchanged, so the API wrapper can
#: let such arguments through without calling it (every pointer, size and handle of a correct program)
UNCHANGED_BELOW: dict[Callable[[str, int, Any], Any], int] = {k: 1 << 64, i: 1 << 31, u32: 1 << 32}
