"""What an inference request may ask of tritonserver 2.51: the check that keeps its HTTP front end alive.

Tritonserver 2.51 sizes a JSON request's input buffer from its declared ``shape`` before it looks at the
``data``: ``{"inputs":[{"name":"input_ids","shape":[1,1099511627776],"datatype":"INT64","data":[1,2]}]}`` ends
in ``std::bad_alloc`` and the whole server aborts, for every client. 2.51 has no setting that stops it (the
size checks came with server PRs #8174 and #8676, in 2025-26). This module decides, from an already parsed
and checked JSON header, whether a request may go on; it knows nothing of HTTP (``front.transport`` does).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ge_plugin.errors import Refused

#: bytes per element of each KServe datatype; BYTES elements have no fixed size (counted as 1)
ITEMSIZE = {
    "BOOL": 1,
    "UINT8": 1,
    "UINT16": 2,
    "UINT32": 4,
    "UINT64": 8,
    "INT8": 1,
    "INT16": 2,
    "INT32": 4,
    "INT64": 8,
    "FP16": 2,
    "FP32": 4,
    "FP64": 8,
    "BF16": 2,
}
#: the most an input may declare by default: far above any gear of a served model, far below bad_alloc
MAX_INPUT_BYTES = 4 << 30

__all__ = ["ITEMSIZE", "MAX_INPUT_BYTES", "Refused", "check_infer_header"]


def check_infer_header(header: Mapping, max_input_bytes: int = MAX_INPUT_BYTES) -> None:
    """Refused naming the input, for an input whose shape is not a list of dims, does not match its data, or
    declares more than ``max_input_bytes``.

    Triton checks the rest (names, datatypes, binary sizes against the body) itself and answers with 400:
    the front forwards a re-encoded copy of exactly this header, so what passed here is what Triton reads.
    """
    inputs = header.get("inputs")
    if not isinstance(inputs, list):
        return  # Triton answers it with its own 400 ("missing inputs")
    for item in inputs:
        if not isinstance(item, Mapping):
            continue
        name = item.get("name", "?")
        shape = item.get("shape")
        if shape is None:
            continue  # Triton: "missing shape"
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) for d in shape
        ):
            raise Refused(f"input '{name}': shape must be a list of integers, not {_short(shape)}")
        if any(d < 0 for d in shape):
            raise Refused(f"input '{name}': shape {shape} has a negative dim")
        elements = math.prod(shape)
        itemsize = ITEMSIZE.get(str(item.get("datatype", "")).upper(), 1)
        if elements * itemsize > max_input_bytes:
            raise Refused(
                f"input '{name}': shape {shape} declares {elements * itemsize} bytes, more than the "
                f"{max_input_bytes} an input may have (ge-plugin serve --max-input-bytes)"
            )
        if "data" in item:
            given = _count(item["data"])
            if given != elements:
                raise Refused(
                    f"input '{name}': shape {shape} holds {elements} elements but its data has {given}"
                )


def _count(data: object) -> int:
    """Elements in a JSON ``data`` value, flat or nested as the protocol allows (the nesting depth was
    bounded by the JSON parse, so this recursion is too). A flat list costs one pass in C, not a Python
    call per element."""
    if type(data) is not list:
        return 1
    if list not in map(type, data):
        return len(data)
    return sum(map(_count, data))


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
