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


#: request parameters tritonserver 2.51 reads with a typed accessor, whose failure it answers 500: the type each
#: must have ("uint": a JSON integer in [0, 2^64); sequence_id may also be a string)
_REQUEST_PARAMETERS = {
    "priority": "uint",
    "timeout": "uint",
    "sequence_id": "uint|string",
    "sequence_start": "bool",
    "sequence_end": "bool",
    "binary_data_output": "bool",
}
_INPUT_PARAMETERS = {
    "binary_data_size": "uint",
    "shared_memory_region": "string",
    "shared_memory_byte_size": "uint",
    "shared_memory_offset": "uint",
}
_OUTPUT_PARAMETERS = {
    "binary_data": "bool",
    "classification": "uint",
    "shared_memory_region": "string",
    "shared_memory_byte_size": "uint",
    "shared_memory_offset": "uint",
}
_KINDS = {
    "uint": "an integer from 0 to 2^64-1",
    "uint|string": "a string or an integer from 0 to 2^64-1",
    "bool": "true or false",
    "string": "a string",
}


def check_parameters(header: Mapping[str, object]) -> None:
    """Refused (400) naming the field, for a request field or parameter of the wrong JSON type.

    tritonserver 2.51 reads ``id``, ``inputs``/``outputs`` and their names, and the parameters it knows, with
    typed accessors whose failure it answers 500 ("attempt to access JSON non-boolean as boolean"): a client's
    mistake counted as a server fault. Custom request parameters must be a string, a number or a boolean
    (Triton's own 400 says so; the front says it first)."""
    if "id" in header and not isinstance(header["id"], str):
        raise Refused(f"request 'id' must be a string, not {_short(header['id'])}")
    if "parameters" in header:
        parameters = header["parameters"]
        if not isinstance(parameters, Mapping):
            raise Refused(f"request 'parameters' must be an object, not {_short(parameters)}")
        for key, value in parameters.items():
            kind = _REQUEST_PARAMETERS.get(key)
            if kind is not None:
                _check_kind(f"request parameter '{key}'", value, kind)
            elif value is None or isinstance(value, (list, Mapping)):
                raise Refused(
                    f"request parameter '{key}' must be a string, a number or a boolean, not {_short(value)}"
                )
    for field, known in (("inputs", _INPUT_PARAMETERS), ("outputs", _OUTPUT_PARAMETERS)):
        if field in header:
            _check_tensors(field, header[field], known)


def _check_tensors(field: str, items: object, known: Mapping[str, str]) -> None:
    if not isinstance(items, list):
        raise Refused(f"request '{field}' must be a list, not {_short(items)}")
    for index, item in enumerate(items):
        where = f"{field}[{index}]"
        if not isinstance(item, Mapping):
            raise Refused(f"{where} must be an object, not {_short(item)}")
        for name in ("name", "datatype") if field == "inputs" else ("name",):
            if name in item and not isinstance(item[name], str):
                raise Refused(f"{where} '{name}' must be a string, not {_short(item[name])}")
        if field == "outputs" and "name" not in item:
            raise Refused(f"{where} has no 'name'")
        parameters = item.get("parameters")
        if isinstance(parameters, Mapping):  # tritonserver ignores input parameters of another type
            label = f"{field[:-1]} '{item['name']}'" if isinstance(item.get("name"), str) else where
            for key, kind in known.items():
                if key in parameters:
                    _check_kind(f"{label}: parameter '{key}'", parameters[key], kind)


def _check_kind(what: str, value: object, kind: str) -> None:
    is_uint = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 64
    ok = {
        "uint": is_uint,
        "uint|string": is_uint or isinstance(value, str),
        "bool": isinstance(value, bool),
        "string": isinstance(value, str),
    }[kind]
    if not ok:
        raise Refused(f"{what} must be {_KINDS[kind]}, not {_short(value)}")
