"""What an inference request may ask of tritonserver 2.51: the one rule both fronts apply, HTTP and gRPC.

Tritonserver 2.51 computes an input's byte size from its shape with wrapping 64-bit arithmetic and trusts it:
a JSON request declaring ``[1, 1099511627776]`` with two values ends in ``std::bad_alloc`` (the server aborts,
for every client), and a gRPC request declaring INT64 ``[1, 2^61]`` with no bytes, ``[1, 2^61 + 2]`` with 16,
or ``[1, -2^63]`` wraps to exactly what was sent, passes, and aborts the model's Python stub. 2.51 has no
setting that stops it (the checks came with server PRs #8174 and #8676, in 2025-26).

The rule, for every input: a shape of non-negative integer dims whose bytes (elements x the datatype's item
size, counted exactly, never wrapped) are at most ``max_input_bytes``, and data that fills exactly that shape:
JSON ``data`` values, a binary or raw part of exactly that many bytes, BYTES elements as many as the shape
holds. Request, input and output parameters that tritonserver reads with a type must have that type.

The rule itself (``check_shape``, ``check_data``, ``check_parameter``) knows no protocol. Each front reads its
own form into it: ``check_infer_header`` and ``check_parameters`` an HTTP request's parsed JSON header,
``check_infer_request`` a gRPC ``ModelInferRequest`` parsed with protobuf. Refusals are ``Refused`` (HTTP 400,
gRPC INVALID_ARGUMENT) with a message naming the input or parameter.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ge_plugin.errors import Refused

if TYPE_CHECKING:
    from tritonclient.grpc import service_pb2

#: bytes per element of each KServe datatype; BYTES elements have no fixed size (counted as 1: each holds at
#: least its 4-byte length on the wire, so a BYTES shape is bounded by its data the same way)
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
#: the most dims a shape may have: far more than any model takes, few enough that a shape's product is computed
#: at once (a list of millions of dims near 2^63 would keep Python's big-integer product busy for hours)
MAX_RANK = 64
#: the largest request a front takes by default (``--max-body-bytes``): an HTTP body, as sent and once
#: inflated, or a gRPC message; each front holds a request whole while it checks it
MAX_BODY_BYTES = 256 << 20
#: the typed ``InferTensorContents`` field that holds each datatype's values in a gRPC request (FP16 and BF16
#: have none: they travel as raw bytes only)
CONTENTS_FIELD = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}
_LENGTH = struct.Struct("<I")

__all__ = [
    "ITEMSIZE",
    "MAX_BODY_BYTES",
    "MAX_INPUT_BYTES",
    "MAX_RANK",
    "Refused",
    "check_data",
    "check_infer_header",
    "check_infer_request",
    "check_parameter",
    "check_parameters",
    "check_shape",
]


# -- the rule ---------------------------------------------------------------------------------------------


def check_shape(name: str, datatype: str, shape: Sequence[int], max_input_bytes: int) -> int:
    """The elements ``shape`` holds; Refused for more than MAX_RANK dims, a negative dim or more than
    ``max_input_bytes`` declared (computed with Python's integers: what wraps in tritonserver is counted here
    as it is)."""
    if len(shape) > MAX_RANK:
        raise Refused(
            f"input '{name}': shape has {len(shape)} dims, more than the {MAX_RANK} a shape may have"
        )
    if any(d < 0 for d in shape):
        raise Refused(f"input '{name}': shape {_dims(shape)} has a negative dim")
    elements = math.prod(shape)
    declared = elements * ITEMSIZE.get(datatype.upper(), 1)
    if declared > max_input_bytes:
        raise Refused(
            f"input '{name}': shape {_dims(shape)} declares {declared} bytes, more than the "
            f"{max_input_bytes} an input may have (ge-plugin serve --max-input-bytes)"
        )
    return elements


def check_data(
    name: str,
    datatype: str,
    shape: Sequence[int],
    elements: int,
    *,
    count: int | None = None,
    nbytes: int | None = None,
    raw: bytes | memoryview | None = None,
) -> None:
    """Refused unless the data fills the shape exactly: ``count`` values (JSON ``data``, typed contents),
    ``nbytes`` bytes of a fixed-size datatype (a binary part, raw contents, a shared-memory size), or ``raw``
    BYTES elements (each a 4-byte little-endian length and that many bytes) as many as ``elements``."""
    if count is not None and count != elements:
        raise Refused(
            f"input '{name}': shape {_dims(shape)} holds {elements} elements but its data has {count}"
        )
    itemsize = ITEMSIZE.get(datatype.upper())
    if nbytes is not None and itemsize is not None and nbytes != elements * itemsize:
        raise Refused(
            f"input '{name}': shape {_dims(shape)} of {datatype} is {elements * itemsize} bytes but its data "
            f"has {nbytes}"
        )
    if raw is not None and itemsize is None:
        found = _bytes_elements(name, raw, elements)
        if found != elements:
            raise Refused(
                f"input '{name}': shape {_dims(shape)} holds {elements} elements but its BYTES data has {found}"
            )


def _bytes_elements(name: str, raw: bytes | memoryview, most: int) -> int:
    """The length-prefixed elements in ``raw`` (stopping once past ``most``); Refused if one overruns it."""
    found = offset = 0
    size = len(raw)
    while offset < size and found <= most:
        if offset + 4 > size:
            raise Refused(f"input '{name}': BYTES element {found} has a truncated length")
        (length,) = _LENGTH.unpack_from(raw, offset)
        offset += 4 + length
        if offset > size:
            raise Refused(f"input '{name}': BYTES element {found} claims {length} bytes past the data's end")
        found += 1
    return found


#: request parameters tritonserver 2.51 reads with a type, and that type ("uint": an integer in [0, 2^64);
#: sequence_id may also be a string). Over HTTP a wrong JSON type was a 500 (a client's mistake counted as a
#: server fault); over gRPC tritonserver refuses most itself: the fronts refuse them first, in the same words
REQUEST_PARAMETERS = {
    "priority": "uint",
    "timeout": "uint",
    "sequence_id": "uint|string",
    "sequence_start": "bool",
    "sequence_end": "bool",
    "binary_data_output": "bool",
}
INPUT_PARAMETERS = {
    "binary_data_size": "uint",
    "shared_memory_region": "string",
    "shared_memory_byte_size": "uint",
    "shared_memory_offset": "uint",
}
OUTPUT_PARAMETERS = {
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


def check_parameter(what: str, value: object, kind: str | None) -> None:
    """Refused naming ``what`` unless ``value`` has ``kind``; with no kind (a parameter tritonserver does not
    read itself), unless it is a string, a number or a boolean."""
    if kind is None:
        if value is None or isinstance(value, (list, Mapping)):
            raise Refused(f"{what} must be a string, a number or a boolean, not {_short(value)}")
        return
    is_uint = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 64
    ok = {
        "uint": is_uint,
        "uint|string": is_uint or isinstance(value, str),
        "bool": isinstance(value, bool),
        "string": isinstance(value, str),
    }[kind]
    if not ok:
        raise Refused(f"{what} must be {_KINDS[kind]}, not {_short(value)}")


# -- HTTP: a parsed JSON header -------------------------------------------------------------------------


def check_infer_header(header: Mapping[str, object], max_input_bytes: int = MAX_INPUT_BYTES) -> None:
    """The rule on an HTTP inference request's JSON header: Refused naming the input whose shape is not a list
    of dims, whose data (JSON values, or ``binary_data_size`` bytes) does not fill it, or that declares more
    than ``max_input_bytes``.

    Triton checks the rest (names, datatypes, binary sizes against the body) itself and answers with 400:
    the front forwards a re-encoded copy of exactly this header, so what passed here is what Triton reads.
    """
    inputs = header.get("inputs")
    if not isinstance(inputs, list):
        return  # Triton answers it with its own 400 ("missing inputs")
    for item in inputs:
        if not isinstance(item, Mapping):
            continue
        name = str(item.get("name", "?"))
        shape = item.get("shape")
        if shape is None:
            continue  # Triton: "missing shape"
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) for d in shape
        ):
            raise Refused(f"input '{name}': shape must be a list of integers, not {_short(shape)}")
        datatype = str(item.get("datatype", ""))
        elements = check_shape(name, datatype, shape, max_input_bytes)
        if "data" in item:
            check_data(name, datatype, shape, elements, count=_count(item["data"]))
        parameters = item.get("parameters")
        if isinstance(parameters, Mapping):
            key = "shared_memory_byte_size" if "shared_memory_region" in parameters else "binary_data_size"
            size = parameters.get(key)
            if isinstance(size, int) and not isinstance(size, bool):
                check_data(name, datatype, shape, elements, nbytes=size)


def _count(data: object) -> int:
    """Elements in a JSON ``data`` value, flat or nested as the protocol allows (the nesting depth was
    bounded by the JSON parse, so this recursion is too). A flat list costs one pass in C, not a Python
    call per element."""
    if type(data) is not list:
        return 1
    if list not in map(type, data):
        return len(data)
    return sum(map(_count, data))


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
            check_parameter(f"request parameter '{key}'", value, REQUEST_PARAMETERS.get(key))
    for field, known in (("inputs", INPUT_PARAMETERS), ("outputs", OUTPUT_PARAMETERS)):
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
                    check_parameter(f"{label}: parameter '{key}'", parameters[key], kind)


# -- gRPC: a parsed ModelInferRequest ---------------------------------------------------------------------


def check_infer_request(
    request: service_pb2.ModelInferRequest, max_input_bytes: int = MAX_INPUT_BYTES
) -> None:
    """The rule on a gRPC ``ModelInferRequest``: every input's shape bounded, its data (``raw_input_contents``
    by position, the typed ``contents`` field of its datatype, or a shared-memory byte size) filling it
    exactly, and every parameter tritonserver reads of its type. Raw contents beyond the inputs, or both
    raw and typed data, are left to tritonserver, which refuses them itself."""
    for key, value in request.parameters.items():
        check_parameter(f"request parameter '{key}'", _value(value), REQUEST_PARAMETERS.get(key))
    raw = request.raw_input_contents
    for index, tensor in enumerate(request.inputs):
        name, datatype = tensor.name, tensor.datatype
        shape = list(tensor.shape) if len(tensor.shape) <= MAX_RANK else tensor.shape
        for key, kind in INPUT_PARAMETERS.items():
            if key in tensor.parameters:
                check_parameter(f"input '{name}': parameter '{key}'", _value(tensor.parameters[key]), kind)
        elements = check_shape(name, datatype, shape, max_input_bytes)
        if "shared_memory_region" in tensor.parameters:
            size = tensor.parameters.get("shared_memory_byte_size")
            value = _value(size) if size is not None else 0
            check_data(name, datatype, shape, elements, nbytes=value if isinstance(value, int) else 0)
        elif index < len(raw):
            part = raw[index]
            check_data(name, datatype, shape, elements, nbytes=len(part), raw=part)
        else:
            field = CONTENTS_FIELD.get(datatype.upper())
            values = getattr(tensor.contents, field) if field is not None else ()
            check_data(name, datatype, shape, elements, count=len(values))
    for tensor in request.outputs:
        for key, kind in OUTPUT_PARAMETERS.items():
            if key in tensor.parameters:
                check_parameter(
                    f"output '{tensor.name}': parameter '{key}'", _value(tensor.parameters[key]), kind
                )


def _value(parameter: service_pb2.InferParameter) -> object:
    """An ``InferParameter``'s value as the Python value its JSON form would have (None: no value set)."""
    which = parameter.WhichOneof("parameter_choice")
    return getattr(parameter, which) if which is not None else None


def _dims(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
