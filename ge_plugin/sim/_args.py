"""Argument checks that behave like pyACL's ``PyArg_ParseTuple`` formats, so type bugs fail here as there.

pyACL parses every argument with a C format: ``"k"`` (unsigned long: an exact ``int``, masked to 64 bits, so
``-1`` arrives as 0xFFFF...), ``"K"`` (unsigned long long, the same), ``"i"`` / ``"I"`` (C int: anything
with ``__index__``, so numpy integers pass), ``"s"`` (``str`` only) and ``"O"`` (anything). A wrong type
raises ``TypeError``; an ``"i"`` value outside the C int range raises ``OverflowError``. One deliberate
deviation, stricter than CPython: ``bool`` is refused everywhere (CPython lets ``True`` through as 1, which is
always a bug when the argument is a pointer or a size). A program that passes these checks therefore passes
pyACL's.
"""

from __future__ import annotations

import operator

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


def i64(call: str, pos: int, value: object) -> int:
    """``"L"``: a C long long (tensor dims)."""
    value = _index(call, pos, value)
    if not -(1 << 63) <= value < 1 << 63:
        raise OverflowError(f"{call} args parse failed: argument {pos} ({value}) does not fit int64")
    return value


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
