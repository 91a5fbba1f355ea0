"""JSON read one way only: what tritonserver's parser and Python's could read differently is refused.

Two parsers of the same bytes disagree on duplicate keys (Python keeps the last, RapidJSON as Triton uses it
the first), on bytes that are not UTF-8, on a BOM, on NaN and Infinity, on what follows the value. The front
parses a body with :func:`loads`, which refuses each of those, checks it, and sends tritonserver
:func:`dumps` of what it parsed: the bytes Triton reads are then the front's own.

Nesting depth is checked before any parser recurses: :func:`check_depth` strips the strings out with one
regular expression and peels the innermost bracket pairs off the rest, one C-speed pass per level, so a body
of a million ``[`` costs a few passes, not a RecursionError (or a SIGSEGV in a parser that recurses on the
C stack).
"""

from __future__ import annotations

import json
import re

from ge_plugin.errors import Refused

#: deeper than any KServe request needs (the data of a rank-8 tensor nests 8 deep, inside 4 levels)
MAX_DEPTH = 32

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_INNERMOST = re.compile(rb"\[\]|\{\}|\[\}|\{\]")


def check_depth(data: bytes, limit: int = MAX_DEPTH) -> None:
    """Refused if arrays and objects nest deeper than ``limit`` anywhere in ``data`` (outside strings)."""
    if data.count(b"[") + data.count(b"{") <= limit:
        return  # cannot nest deeper than it has brackets: the common case costs two counts
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    levels = 0  # each pass removes the innermost level
    while brackets and levels <= limit:
        peeled = _INNERMOST.sub(b"", brackets)
        if len(peeled) == len(brackets):
            break  # unbalanced: closers then openers are left, the parser will say where
        brackets = peeled
        levels += 1
    if levels + brackets.count(b"[") + brackets.count(b"{") > limit:
        raise Refused(f"JSON nests deeper than {limit} levels")


def _unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise Refused(f"JSON object has the key {json.dumps(key)} more than once")
            seen.add(key)
    return result


def _constant(name: str) -> object:
    raise Refused(f"JSON holds {name}, which is not a JSON number")


def loads(data: bytes) -> object:
    """The one value ``data`` holds, or Refused saying what about it a strict parser would not accept."""
    check_depth(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(f"JSON body is not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}") from None
    try:
        return json.loads(text, object_pairs_hook=_unique, parse_constant=_constant)
    except Refused:
        raise
    except json.JSONDecodeError as exc:
        raise Refused(f"JSON body does not parse: {exc.msg} at offset {exc.pos}") from None
    except RecursionError:  # check_depth makes this unreachable; kept so a parser change cannot crash us
        raise Refused("JSON nests too deep") from None
    except ValueError as exc:  # e.g. an integer of more digits than int() takes
        raise Refused(f"JSON body does not parse: {exc}") from None


def dumps(value: object) -> bytes:
    """Compact UTF-8 JSON of a value :func:`loads` returned; Refused for what has no JSON form (a number
    too large for a double became inf, a lone surrogate escape)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except ValueError as exc:
        if isinstance(exc, UnicodeEncodeError):
            raise Refused("JSON string holds a lone surrogate (\\ud800-\\udfff escape)") from None
        raise Refused("JSON number out of range (it does not fit a double)") from None
