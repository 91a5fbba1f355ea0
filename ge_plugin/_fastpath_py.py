"""Pure-Python twin of ``ge_plugin._fastpath``: the same names, signatures, results and error messages.

It exists so that ge-plugin runs where the extension cannot be built (no compiler, PyPy) and so that the
compiled module has a readable specification to be tested against: every property test runs both and
compares their bytes. It is written for clarity with numpy, not for speed; see docs/performance.md for the
gap.

Bytes are described by type names (``fp32``, ``bf16``...) rather than numpy dtypes, because bf16 travels as
uint16 bit patterns and a numpy dtype could not tell the two apart.
"""

from __future__ import annotations

import ctypes
import operator
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ge_plugin import _fastpath_messages as messages
from ge_plugin._fastpath_tables import (
    MAX_DIMS,
    PlannedGear,
    PlannedInput,
    PlannedOutput,
    PlannerTables,
)
from ge_plugin._fastpath_tables import (
    nbytes as _nbytes,
)
from ge_plugin.errors import RequestError

IMPLEMENTATION = "py"

__all__ = [
    "CASTS",
    "IMPLEMENTATION",
    "Chunk",
    "Planner",
    "TensorSpec",
    "bf16_capsule",
    "bf16_view",
    "gather",
    "scatter",
    "validate",
]

#: the type names ge-plugin moves, with the numpy dtype of their bytes on the host
_NUMPY: dict[str, np.dtype[Any]] = {
    "bool": np.dtype(np.bool_),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "fp16": np.dtype(np.float16),
    "fp32": np.dtype(np.float32),
    "fp64": np.dtype(np.float64),
    "bf16": np.dtype(np.uint16),
}
_TYPE_NAMES = ", ".join(_NUMPY)

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


# --- type names and casts ---------------------------------------------------------------------------


def _dtype(type_name: object, what: str) -> np.dtype[Any]:
    try:
        return _NUMPY[type_name]  # type: ignore[index]
    except (KeyError, TypeError):
        raise ValueError(f"{what}: unknown type {type_name!r}; use one of {_TYPE_NAMES}") from None


def _f32_to_f16(values: NDArray[Any]) -> NDArray[Any]:
    # numpy rounds to nearest even; only NaNs are rewritten, quieted with their payload's top bits kept, so
    # the result does not depend on whether numpy used the F16C instruction or its software loop.
    with np.errstate(over="ignore", invalid="ignore"):
        half = values.astype(np.float16)
    nan = np.isnan(values)
    if nan.any():
        bits = values.view(np.uint32)[nan]
        half.view(np.uint16)[nan] = (((bits >> 16) & 0x8000) | 0x7E00 | ((bits >> 13) & 0x3FF)).astype(
            np.uint16
        )
    return half


def _f16_to_f32(values: NDArray[Any]) -> NDArray[Any]:
    single = values.astype(np.float32)
    nan = np.isnan(values)
    if nan.any():
        bits = values.view(np.uint16)[nan].astype(np.uint32)
        single.view(np.uint32)[nan] = ((bits & 0x8000) << 16) | 0x7F800000 | ((bits & 0x3FF) << 13)
    return single


def _f32_to_bf16(values: NDArray[Any]) -> NDArray[Any]:
    # Round to nearest even on the upper 16 bits, as ml_dtypes and torch do; NaN is quieted, not rounded
    # (rounding could carry a NaN into infinity).
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = (bits + (0x7FFF + ((bits >> 16) & 1))) >> 16
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, (bits >> 16) | 0x0040, rounded).astype(np.uint16)


def _bf16_to_f32(values: NDArray[Any]) -> NDArray[Any]:
    return (values.astype(np.uint32) << 16).view(np.float32)


def _int64_to_int32(values: NDArray[Any], where: str) -> NDArray[Any]:
    # Range check and cast in one place: a request's ids silently wrapping would be far worse than an error.
    if values.size and (values.min() < _INT32_MIN or values.max() > _INT32_MAX):
        flat = int(np.flatnonzero((values < _INT32_MIN) | (values > _INT32_MAX))[0])
        index = np.unravel_index(flat, values.shape)
        raise ValueError(
            f"cannot cast int64 to int32: {where} holds {int(values.flat[flat])} at "
            f"[{', '.join(str(int(i)) for i in index)}], which does not fit in int32"
        )
    return values.astype(np.int32)


_Cast = Callable[[NDArray[Any], str], NDArray[Any]]


_CASTS: dict[tuple[str, str], _Cast] = {
    ("fp32", "fp16"): lambda a, where: _f32_to_f16(a),
    ("fp16", "fp32"): lambda a, where: _f16_to_f32(a),
    ("fp32", "bf16"): lambda a, where: _f32_to_bf16(a),
    ("bf16", "fp32"): lambda a, where: _bf16_to_f32(a),
    ("fp16", "bf16"): lambda a, where: _f32_to_bf16(_f16_to_f32(a)),
    ("bf16", "fp16"): lambda a, where: _f32_to_f16(_bf16_to_f32(a)),
    ("int64", "int32"): _int64_to_int32,
    ("int32", "int64"): lambda a, where: a.astype(np.int64),
}


#: every (from, to) pair of type names the fast path converts; equal types are always copied as they are
CASTS = frozenset(_CASTS)
_CAST_NAMES = ", ".join(messages.pair_names(_CASTS))


def _cast(src_type: str, dst_type: str, what: str) -> _Cast | None:
    """The conversion from src_type to dst_type; None when the bytes are copied as they are."""
    if src_type == dst_type:
        return None
    try:
        return _CASTS[src_type, dst_type]
    except KeyError:
        raise ValueError(
            f"{what}: cannot cast {src_type} to {dst_type} (the casts are {_CAST_NAMES})"
        ) from None


def _typed_value(value: float, type_name: str, what: str) -> NDArray[Any]:
    """``value`` as one element of ``type_name``, converted once; floats round the way the data does."""
    number = messages.number(value, what)
    dtype = _NUMPY[type_name]
    if type_name in messages.INT_RANGE:
        low, high = messages.INT_RANGE[type_name]
        if not number.is_integer():
            raise ValueError(f"{what}: {number!r} is not an integer, and {type_name} holds integers")
        if not low <= number <= high:
            raise ValueError(f"{what}: {number!r} does not fit in {type_name} [{low}, {high}]")
        return np.array([int(number)], dtype=dtype)
    if type_name == "fp64":
        return np.array([number], dtype=dtype)
    with np.errstate(over="ignore"):
        single = np.array([number], dtype=np.float32)
    if type_name == "fp32":
        return single
    return _f32_to_f16(single) if type_name == "fp16" else _f32_to_bf16(single)


# --- buffers -------------------------------------------------------------------------------------


def _bytes_of(buffer: object, what: str, writable: bool) -> NDArray[Any]:
    """A flat uint8 view of ``buffer``; the message says why a buffer cannot be used."""
    try:
        view = memoryview(buffer)  # type: ignore[arg-type]
    except TypeError:
        kind = "a writable contiguous buffer" if writable else "a contiguous buffer"
        raise ValueError(
            f"{what} must be {kind} such as a numpy uint8 array, got {type(buffer).__name__}"
        ) from None
    if writable and view.readonly:
        raise ValueError(f"{what} is read-only; it must be writable")
    if not view.c_contiguous:
        raise ValueError(f"{what} is not C-contiguous")
    return np.frombuffer(view, dtype=np.uint8)


def _shape(shape: Sequence[int], what: str) -> tuple[int, ...]:
    dims = tuple(shape)
    if not dims:
        raise ValueError(f"{what} is empty; it needs at least the row dim")
    if len(dims) > MAX_DIMS:
        raise ValueError(f"{what} has {len(dims)} dims, more than {MAX_DIMS}")
    dims = tuple(operator.index(d) for d in dims)
    for k, d in enumerate(dims):
        if d < 1:
            raise ValueError(f"{what} {list(dims)}: dim {k} is {d}; every dim needs at least one element")
    return dims


def _matches(dtype: np.dtype[Any], type_name: str) -> bool:
    want = _NUMPY[type_name]
    return dtype.kind == want.kind and dtype.itemsize == want.itemsize and dtype.isnative


# --- the public surface ----------------------------------------------------------------------------


class TensorSpec:
    """What one model input accepts. Immutable; built once per model, reused for every request.

    ``dims`` is the full shape the model takes, batch dim first when ``batched``, -1 for a dynamic dim;
    ``limits`` gives per dim the largest accepted length (the dim itself when fixed, the largest batch gear
    for the batch dim, the largest dims-gear value for a dynamic sequence dim). ``batched`` only changes
    how messages name dim 0 ("batch 9 exceeds the largest gear 8"). ``value_range`` (low, high), inclusive,
    refuses a request holding any value outside it (NaN included): token ids past the vocabulary, or int64
    values an int32 model would not hold, are the client's error, found before the device would fail on
    them. ``same_shape_as`` names another input whose shape this one's must equal (a mask and its ids).
    """

    __slots__ = ("batched", "dims", "limits", "name", "same_shape_as", "type", "value_range")

    name: str
    type: str
    dims: tuple[int, ...]
    limits: tuple[int, ...]
    batched: bool
    value_range: tuple[float, float] | None
    same_shape_as: str | None

    def __init__(
        self,
        name: str,
        type: str,
        dims: Sequence[int],
        limits: Sequence[int],
        *,
        batched: bool = True,
        value_range: Sequence[float] | None = None,
        same_shape_as: str | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"TensorSpec name must be a non-empty string, got {name!r}")
        if not isinstance(type, str) or type not in _NUMPY:
            raise ValueError(f"TensorSpec {name!r}: unknown type {type!r}; use one of {_TYPE_NAMES}")
        dims_t = tuple(operator.index(d) for d in dims)
        limits_t = tuple(operator.index(d) for d in limits)
        if len(dims_t) != len(limits_t):
            raise ValueError(
                f"TensorSpec {name!r}: dims {list(dims_t)} and limits {list(limits_t)} differ in length"
            )
        if len(dims_t) > MAX_DIMS:
            raise ValueError(f"TensorSpec {name!r}: {len(dims_t)} dims, more than {MAX_DIMS}")
        for k, (dim, limit) in enumerate(zip(dims_t, limits_t)):
            if dim == 0 or dim < -1:
                raise ValueError(
                    f"TensorSpec {name!r}: dim {k} is {dim}; use -1 (dynamic) or a positive length"
                )
            if limit < 1:
                raise ValueError(f"TensorSpec {name!r}: the limit of dim {k} is {limit}; it must be positive")
            if dim != -1 and limit != dim:
                raise ValueError(f"TensorSpec {name!r}: dim {k} is fixed at {dim} but its limit is {limit}")
        bounds = None if value_range is None else messages.value_range(name, type, value_range)
        if same_shape_as is not None and (not isinstance(same_shape_as, str) or not same_shape_as):
            raise ValueError(
                f"TensorSpec {name!r}: same_shape_as must be an input name, got {same_shape_as!r}"
            )
        if same_shape_as == name:
            raise ValueError(f"TensorSpec {name!r}: same_shape_as names the input itself")
        for attr, value in (
            ("name", name),
            ("type", type),
            ("dims", dims_t),
            ("limits", limits_t),
            ("batched", bool(batched)),
            ("value_range", bounds),
            ("same_shape_as", same_shape_as),
        ):
            object.__setattr__(self, attr, value)

    def __setattr__(self, attr: str, value: object) -> None:
        raise AttributeError(f"TensorSpec is immutable; cannot set {attr!r}")

    def __delattr__(self, attr: str) -> None:
        raise AttributeError(f"TensorSpec is immutable; cannot delete {attr!r}")

    def __repr__(self) -> str:
        fields = f"{self.name!r}, {self.type!r}, {self.dims!r}, {self.limits!r}, batched={self.batched!r}"
        if self.value_range is not None:
            fields += f", value_range={self.value_range!r}"
        if self.same_shape_as is not None:
            fields += f", same_shape_as={self.same_shape_as!r}"
        return f"TensorSpec({fields})"

    def _key(self) -> tuple[Any, ...]:
        return (
            self.name,
            self.type,
            self.dims,
            self.limits,
            self.batched,
            self.value_range,
            self.same_shape_as,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorSpec):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


def _check_range(spec: TensorSpec, array: NDArray[Any]) -> None:
    low, high = spec.value_range  # type: ignore[misc]
    values = _bf16_to_f32(array) if spec.type == "bf16" else array
    if values.dtype.kind == "f":
        outside = ~((values >= low) & (values <= high))  # NaN is outside every range
    else:
        outside = (values < low) | (values > high)
    if outside.any():
        raise messages.range_problem(spec, values, int(np.flatnonzero(outside)[0]))


def _as_array(name: str, value: object) -> NDArray[Any]:
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "__dlpack__"):
        try:
            return np.from_dlpack(value)
        except (AttributeError, TypeError, ValueError, RuntimeError, BufferError) as exc:
            raise RequestError(f"input {name!r}: cannot view its DLPack tensor: {exc}") from None
    try:
        view = memoryview(value)  # type: ignore[arg-type]
    except TypeError:
        raise RequestError(
            f"input {name!r}: expected an array (buffer protocol or DLPack), got {type(value).__name__}"
        ) from None
    try:
        return np.asarray(view)
    except (TypeError, ValueError, NotImplementedError) as exc:
        raise RequestError(f"input {name!r}: cannot view its buffer: {exc}") from None


def _check_dims(spec: TensorSpec, shape: tuple[int, ...]) -> None:
    name = spec.name
    if len(shape) != len(spec.dims):
        raise RequestError(
            f"input {name!r}: expected shape {list(spec.dims)} ({len(spec.dims)} dims), "
            f"got {list(shape)} ({len(shape)} dims)"
        )
    for k, (size, dim, limit) in enumerate(zip(shape, spec.dims, spec.limits)):
        if size == 0:
            if k == 0 and spec.batched:
                raise RequestError(f"input {name!r}: empty batch (dim 0 is 0)")
            raise RequestError(f"input {name!r}: dim {k} is 0; every dim needs at least one element")
        if dim != -1:
            if size != dim:
                raise RequestError(f"input {name!r}: dim {k} is {size}, expected {dim}")
        elif size > limit:
            if k == 0 and spec.batched:
                raise RequestError(f"input {name!r}: batch {size} exceeds the largest gear {limit}")
            raise RequestError(
                f"input {name!r}: dim {k} is {size}, longer than the largest sequence gear {limit}"
            )


def validate(specs: Sequence[TensorSpec], tensors: Mapping[str, object]) -> list[NDArray[Any]]:
    """Check one request against the model's inputs before it joins a batch, so that one bad request fails
    alone with a message its client can act on. Returns the request's arrays in spec order, C-contiguous,
    viewed rather than copied whenever they already are (only a non-contiguous array is copied)."""
    arrays = []
    for spec in specs:
        name = spec.name
        try:
            value = tensors[name]
        except KeyError:
            taken = ", ".join(s.name for s in specs)
            got = ", ".join(str(key) for key in tensors) or "none"
            raise RequestError(
                f"missing input {name!r}: the model takes {taken}; the request has {got}"
            ) from None
        array = _as_array(name, value)
        if not _matches(array.dtype, spec.type):
            bits = " (uint16 bit patterns)" if spec.type == "bf16" else ""
            raise RequestError(
                f"input {name!r}: expected {spec.type}{bits} data, got {messages.describe(array.dtype)}"
            )
        _check_dims(spec, array.shape)
        if spec.value_range is not None:
            _check_range(spec, array)
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        arrays.append(array)
    if len(tensors) != len(arrays):
        known = {spec.name for spec in specs}
        for key in tensors:
            if key not in known:
                taken = ", ".join(s.name for s in specs)
                raise RequestError(f"unexpected input {key!r}: the model takes {taken}")
    messages.check_ties(specs, arrays)
    return arrays


def _source(value: object, index: int, src_type: str, dst_shape: tuple[int, ...]) -> NDArray[Any]:
    what = f"gather: source {index}"
    if isinstance(value, np.ndarray):
        array = value
    else:
        try:
            array = np.asarray(memoryview(value))  # type: ignore[arg-type]
        except TypeError:
            raise ValueError(f"{what} is not an array, got {type(value).__name__}") from None
    if not _matches(array.dtype, src_type):
        raise ValueError(f"{what} holds {messages.describe(array.dtype)} data, expected {src_type}")
    if array.ndim != len(dst_shape):
        raise ValueError(
            f"{what} has {array.ndim} dims {list(array.shape)}, the destination {list(dst_shape)} has {len(dst_shape)}"
        )
    for k, size in enumerate(array.shape):
        if size == 0:
            raise ValueError(
                f"{what} {list(array.shape)}: dim {k} is 0; every dim needs at least one element"
            )
        if k and size > dst_shape[k]:
            raise ValueError(
                f"{what} {list(array.shape)}: dim {k} is {size}, longer than the destination's {dst_shape[k]}"
            )
    return array


def gather(
    dst: object,
    dst_shape: Sequence[int],
    dst_type: str,
    srcs: Sequence[object],
    src_type: str,
    pad_value: float,
) -> int:
    """Stack one batch's sources along dim 0 into the pinned staging buffer ``dst`` as a C-contiguous
    ``dst_shape`` tensor of ``dst_type``, padding every dim of every source (and the rows after the last one)
    with ``pad_value``, casting on the way when the types differ. This is the only copy between a request
    and the device, so padding and casting are folded into it. Returns the bytes written.

    Every shape and type check happens before the first byte is written; only an int64 value that does not
    fit an int32 destination is found during the copy (the buffer is then half written, and unused)."""
    dst_dtype = _dtype(dst_type, "gather: dst_type")
    _dtype(src_type, "gather: src_type")
    cast = _cast(src_type, dst_type, "gather")
    shape = _shape(dst_shape, "gather: dst_shape")
    pad = _typed_value(pad_value, dst_type, "gather: pad_value")
    nbytes = _nbytes(shape, dst_dtype.itemsize)
    out_bytes = _bytes_of(dst, "gather: dst", writable=True)
    if out_bytes.size < nbytes:
        raise ValueError(
            f"gather: dst holds {out_bytes.size} bytes, the destination {list(shape)} {dst_type} needs {nbytes}"
        )
    arrays = [_source(src, i, src_type, shape) for i, src in enumerate(srcs)]
    total = sum(a.shape[0] for a in arrays)
    if total > shape[0]:
        raise ValueError(
            f"gather: the sources hold {total} rows in total, more than the destination's {shape[0]}"
        )

    out = out_bytes[:nbytes].view(dst_dtype).reshape(shape)
    row = 0
    for i, array in enumerate(arrays):
        block = out[row : row + array.shape[0]]
        valid = tuple(slice(0, size) for size in array.shape)
        block[valid] = array if cast is None else cast(array, f"source {i}")
        # Pad what the source leaves uncovered, each element once: for each dim k past the first, the part
        # beyond the source's length inside the valid part of the dims before k.
        for k in range(1, len(shape)):
            if array.shape[k] < shape[k]:
                block[(*valid[:k], slice(array.shape[k], None))] = pad[0]
        row += array.shape[0]
    out[row:] = pad[0]
    return nbytes


def scatter(
    src: object,
    src_shape: Sequence[int],
    src_type: str,
    out_type: str,
    rows: Sequence[int],
    shapes: Sequence[Sequence[int]],
) -> list[NDArray[Any]]:
    """Split one output in the pinned staging buffer ``src`` (a C-contiguous ``src_shape`` tensor of
    ``src_type``) back into one new array per request: request i owns the next ``rows[i]`` rows and keeps
    the leading ``shapes[i]`` of every other dim, cast to ``out_type``. One copy per request, because the
    staging buffer is reused by the next batch while Triton still holds the responses."""
    _dtype(src_type, "scatter: src_type")
    out_dtype = _dtype(out_type, "scatter: out_type")
    cast = _cast(src_type, out_type, "scatter")
    full = _shape(src_shape, "scatter: src_shape")
    src_dtype = _NUMPY[src_type]
    nbytes = _nbytes(full, src_dtype.itemsize)
    in_bytes = _bytes_of(src, "scatter: src", writable=False)
    if in_bytes.size < nbytes:
        raise ValueError(
            f"scatter: src holds {in_bytes.size} bytes, the source {list(full)} {src_type} needs {nbytes}"
        )
    # the compiled module's order: the two lists as a whole, then each request, its count before its dims
    counts = rows if type(rows) is list or type(rows) is tuple else list(rows)
    parts = shapes if type(shapes) is list or type(shapes) is tuple else list(shapes)
    if len(counts) != len(parts):
        raise ValueError(
            f"scatter: {len(counts)} row counts but {len(parts)} shapes; give one of each per request"
        )
    wanted = []
    total = 0
    for i in range(len(counts)):
        count = operator.index(counts[i])
        trimmed = parts[i] if type(parts[i]) is tuple else tuple(parts[i])
        if count < 1:
            raise ValueError(f"scatter: request {i} has {count} rows; every request has at least one")
        if len(trimmed) != len(full) - 1:
            raise ValueError(
                f"scatter: request {i} shape {list(trimmed)} has {len(trimmed)} dims, the source {list(full)} "
                f"has {len(full) - 1} after the row dim"
            )
        sizes = []
        for k in range(len(full) - 1):
            size = operator.index(trimmed[k])
            if not 0 <= size <= full[k + 1]:
                raise ValueError(
                    f"scatter: request {i} shape {list(trimmed)}: dim {k + 1} is {size}, outside the source's "
                    f"0..{full[k + 1]}"
                )
            sizes.append(size)
        wanted.append((count, *sizes))
        total += count
    if total > full[0]:
        raise ValueError(f"scatter: the requests own {total} rows in total, more than the source's {full[0]}")

    whole = in_bytes[:nbytes].view(src_dtype).reshape(full)
    outputs = []
    row = 0
    for i, shape in enumerate(wanted):
        part = whole[(slice(row, row + shape[0]), *(slice(0, d) for d in shape[1:]))]
        if cast is None:
            out = np.empty(shape, dtype=out_dtype)
            out[...] = part
        else:
            out = np.ascontiguousarray(cast(part, f"request {i}"), dtype=out_dtype)
        outputs.append(out)
        row += shape[0]
    return outputs


# --- one window's executes: requests validated, grouped on gears, gathered, and answered ------------------
#
# What the engine does per execute, in the fast path so that no Python bookkeeping runs per request: the
# Planner is built once per model from the OM's gears and the config's tensors. ``plan`` takes a window of
# requests (what Triton's batcher handed over) and returns its chunks (one execute each) and the refusals;
# it touches no device and no staging, so it is testable on its own. ``stage`` gathers one chunk into a
# lane's pinned staging; the chunk then carries the launch (gear, bytes per copy, OM indices of the outputs
# copied back). ``split`` hands each request its outputs back, as views of the staging or as copies.


class Chunk:
    """One execute: requests that share a gear, their rows stacked in the order they came.

    ``indices`` are the requests' places in the window; ``arrays`` their validated arrays in the OM's input
    order (None once released: the caller may not read a request after it returns); ``shapes`` each one's
    input shapes. ``need`` is the flat minimum of every dim of every input (``Planner.choose`` takes it),
    ``gear`` the position of the gear that runs it, ``rows`` the rows the requests brought, ``elements`` their
    input elements (the rest of the gear is padding). The launch: ``in_bytes`` per input, ``outputs`` the
    config positions copied back, ``out_index`` their OM indices, ``out_bytes`` their bytes (only the rows the
    requests brought). ``wanted`` is None when every request wants every output, else per request the config
    positions it asked for. ``staged``: the arrays are in the OM's types (taken back out of a staging)."""

    __slots__ = (
        "arrays",
        "elements",
        "gear",
        "in_bytes",
        "indices",
        "need",
        "out_bytes",
        "out_index",
        "outputs",
        "rows",
        "shapes",
        "staged",
        "wanted",
    )

    def __init__(
        self,
        indices: list[int],
        arrays: list[list[NDArray[Any]]] | None,
        shapes: list[tuple[tuple[int, ...], ...]],
        need: tuple[int, ...],
        gear: int,
        rows: int,
        elements: int,
        in_bytes: list[int],
        outputs: list[int],
        out_index: list[int],
        out_bytes: list[int],
        wanted: list[list[int]] | None,
        staged: bool,
    ):
        self.indices = indices
        self.arrays = arrays
        self.shapes = shapes
        self.need = need
        self.gear = gear
        self.rows = rows
        self.elements = elements
        self.in_bytes = in_bytes
        self.outputs = outputs
        self.out_index = out_index
        self.out_bytes = out_bytes
        self.wanted = wanted
        self.staged = staged

    def __repr__(self) -> str:
        return f"Chunk(indices={self.indices}, gear={self.gear}, need={self.need}, rows={self.rows})"


class _Types:
    """The twin's words on type names, for the planner's tables (``_fastpath_tables.TypeChecks``)."""

    @staticmethod
    def itemsize(type_name: object, what: str) -> int:
        return _dtype(type_name, what).itemsize

    @staticmethod
    def cast(src_type: str, dst_type: str, what: str) -> None:
        _cast(src_type, dst_type, what)

    @staticmethod
    def pad(value: float, type_name: str, what: str) -> None:
        _typed_value(value, type_name, what)


def _detached(exc: RequestError) -> RequestError:
    """The error without its traceback: it is kept in the plan, and a traceback would keep every frame of
    the call alive, with the request arrays they reference."""
    exc.__traceback__ = None
    exc.__context__ = None
    exc.__cause__ = None
    return exc


def _contiguous(shape: Sequence[int], strides: Sequence[int], itemsize: int) -> bool:
    """numpy's rule for C-contiguity (dims of length 1 do not count); twin: the compiled view check."""
    expected = itemsize
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1:
            if stride != expected:
                return False
            expected *= size
    return True


class Planner:
    """One model's executes, planned and moved without Python per request.

    ``inputs`` are the model's inputs in the OM's order, each with the ``spec`` that validates it and the
    OM's type for it (``om_type``); ``outputs`` are the config's outputs in its order, each with its
    ``name``, ``om_index``, ``type``, ``om_type`` and ``ties``, a tie (output dim, input, input dim) giving an
    output dim the length of a request's input dim; ``gears`` are the OM's compiled shapes, cheapest first,
    each with ``input_dims`` per input and ``output_dims`` per OM output (the records the engine binds:
    ``engine.tensors.BoundTensor``, ``engine.gear_table.Gear``; ``launch_args`` hands a chunk's gear record back). ``batched``:
    dim 0 of every input is rows, which add up when requests share an execute. ``exact`` marks, per flat dim
    (every dim of every input, in order), the dims a gear must match exactly rather than hold (padding there
    would change the answer). ``pad_value`` fills what requests leave of a gear; ``refusal(arrays)`` words why
    no gear takes a request that passed validation."""

    def __init__(
        self,
        inputs: Sequence[PlannedInput],
        outputs: Sequence[PlannedOutput],
        gears: Sequence[PlannedGear],
        *,
        batched: bool = True,
        exact: Sequence[bool] = (),
        pad_value: float = 0,
        refusal: Callable[[list[NDArray[Any]]], str] | None = None,
    ) -> None:
        t = PlannerTables(inputs, outputs, gears, batched, exact, pad_value, TensorSpec, _Types)
        self._specs, self._om_types, self._pad, self._batched = t.specs, t.om_types, t.pad, t.batched
        self._ranks, self._width, self._exact, self._rows_at = t.ranks, t.width, t.exact, t.rows_at
        self._outputs, self._names, self._every, self._every_index = (
            t.outputs,
            t.names,
            t.every,
            t.every_index,
        )
        self._gears = t.gears
        self._records = t.records
        self._refusal = refusal
        self._staged_by_gear = [0] * len(t.gears)
        self._staged = [0, 0, 0]  # rows, input elements, D2H bytes

    def choose(self, need: Sequence[int]) -> int | None:
        """The position of the cheapest gear that covers ``need`` (flat), or None."""
        exact = self._exact
        for position, gear in enumerate(self._gears):
            if all(g >= n and (g == n or not e) for g, n, e in zip(gear.flat, need, exact)):
                return position
        return None

    def _merge(self, a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
        """Two needs together: rows add up, every other dim takes the longer, and a dim that must match a
        gear exactly keeps its length when both agree and is -1 (which no gear matches) when they do not."""
        return tuple(
            (x + y) if row else ((x if x == y else -1) if exact else (x if x >= y else y))
            for x, y, row, exact in zip(a, b, self._rows_at, self._exact)
        )

    def _wanted(self, wanted: Any, n: int) -> list[list[int]] | None:
        """Per request, the config positions of the outputs it names (in config order); None when every
        request wants every output (Triton passes each request's names, usually all of them)."""
        if wanted is None:
            return None
        asked = list(wanted)
        lists = []
        for i in range(n):
            names = asked[i] if i < len(asked) else None
            lists.append(
                self._every if names is None else [k for k, name in enumerate(self._names) if name in names]
            )
        if len(asked) >= n and all(len(positions) == len(self._every) for positions in lists):
            return None
        return lists

    def _refuse(self, arrays: list[NDArray[Any]]) -> str:
        if self._refusal is not None:
            return self._refusal(arrays)
        shapes = ", ".join(f"{spec.name} {list(a.shape)}" for spec, a in zip(self._specs, arrays))
        return f"no gear of the model fits this request ({shapes})"

    def plan(
        self, requests: Sequence[Mapping[str, object]], wanted: Sequence[Any] | None = None
    ) -> tuple[list[Chunk], list[tuple[int, RequestError]]]:
        """The window's chunks, each on the cheapest gear that covers it, and the requests refused with why.

        Each request joins the first chunk it fits with (so requests that cannot share an execute with their
        neighbour still share one with a later request); its rows go after the rows already there. A request
        no gear takes on its own, or that fails validation, is refused alone. ``wanted[i]`` names the outputs
        request i asks for (None: all)."""
        n = len(requests)
        per_request = self._wanted(wanted, n)
        errors: list[tuple[int, RequestError]] = []
        groups: list[list[Any]] = []  # [need, gear, members], members: (index, arrays, own need)
        for i in range(n):
            try:
                arrays = validate(self._specs, requests[i])
            except RequestError as exc:
                errors.append((i, _detached(exc)))
                continue
            own = tuple(d for a in arrays for d in a.shape)
            member = (i, arrays, own)
            placed = False
            if self._batched:
                for group in groups:
                    merged = self._merge(group[0], own)
                    gear = self.choose(merged)
                    if gear is not None:
                        group[0], group[1] = merged, gear
                        group[2].append(member)
                        placed = True
                        break
            if placed:
                continue
            gear = self.choose(own)
            if gear is None:
                errors.append((i, RequestError(self._refuse(arrays))))
                continue
            groups.append([own, gear, [member]])
        chunks = [self._chunk(need, gear, members, per_request, False) for need, gear, members in groups]
        return chunks, errors

    def chunk(
        self,
        indices: Sequence[int],
        arrays: Sequence[Sequence[NDArray[Any]]],
        wanted: Sequence[Sequence[int]] | None = None,
        *,
        staged: bool = False,
    ) -> Chunk:
        """One chunk of these requests together (a failed execute's requests run again): their arrays in the
        OM's input order, in the OM's types when ``staged``; ``wanted`` as ``Chunk.wanted``. ValueError when no
        gear takes them together."""
        if not indices or len(indices) != len(arrays):
            raise ValueError(
                f"chunk: {len(indices)} indices for {len(arrays)} requests; give one per request"
            )
        if wanted is not None and len(wanted) != len(indices):
            raise ValueError(f"chunk: {len(wanted)} wanted lists for {len(indices)} requests")
        members = []
        need: tuple[int, ...] | None = None
        for i, request in zip(indices, arrays):
            request = list(request)
            if len(request) != len(self._specs):
                raise ValueError(
                    f"chunk: request {i} has {len(request)} arrays, the model {len(self._specs)} inputs"
                )
            own = tuple(operator.index(d) for a in request for d in np.shape(a))
            if len(own) != self._width:
                raise ValueError(f"chunk: request {i} has {len(own)} dims in all, the inputs {self._width}")
            need = own if need is None else (self._merge(need, own) if self._batched else (-1,) * self._width)
            members.append((operator.index(i), request, own))
        assert need is not None
        gear = self.choose(need)
        if gear is None:
            raise ValueError(f"chunk: no gear takes requests {list(indices)} together (need {list(need)})")
        per_request = None if wanted is None else {i: list(w) for i, w in zip(indices, wanted)}
        return self._chunk(need, gear, members, per_request, bool(staged))

    def _chunk(self, need: Any, position: int, members: Any, per_request: Any, staged: bool) -> Chunk:
        gear = self._gears[position]
        indices = [i for i, _, _ in members]
        shapes = []
        elements = 0
        for _, _, own in members:
            dims, at = [], 0
            for rank in self._ranks:
                part = own[at : at + rank]
                at += rank
                dims.append(part)
                elements += _nbytes(part, 1)
            shapes.append(tuple(dims))
        if per_request is None:
            wanted, outputs = None, self._every
        else:
            wanted = [per_request[i] for i in indices]
            outputs = sorted({k for positions in wanted for k in positions})
        every = outputs == self._every
        out_index = self._every_index if every else [self._outputs[k][1] for k in outputs]
        rows = need[0] if self._batched else gear.rows
        if not self._batched or rows >= gear.rows:
            out_bytes = gear.out_bytes if every else [gear.out_bytes[k] for k in outputs]
        else:
            out_bytes = [
                gear.out_bytes[k] // gear.rows * rows if gear.out_rows[k] else gear.out_bytes[k]
                for k in outputs
            ]
        return Chunk(
            indices=indices,
            arrays=[arrays for _, arrays, _ in members],
            shapes=shapes,
            need=tuple(need),
            gear=position,
            rows=rows,
            elements=elements,
            in_bytes=gear.in_bytes,
            outputs=outputs,
            out_index=out_index,
            out_bytes=out_bytes,
            wanted=wanted,
            staged=staged,
        )

    def extend(self, chunk: Chunk, more: Chunk) -> Chunk | None:
        """``chunk`` with ``more``'s requests after its own, as one execute: the chunk a lane's staging holds
        while the device is busy, taking the requests that come meanwhile. None when no gear takes them all
        with the dims ``chunk`` was staged at (its rows may grow, nothing else: the rows already staged stay
        where they are), when the model is unbatched, or when either was taken back out of a staging."""
        if not self._batched or chunk.staged or more.staged or more.arrays is None:
            return None
        need = self._merge(chunk.need, more.need)
        position = self.choose(need)
        if position is None:
            return None
        before, after = self._gears[chunk.gear].flat, self._gears[position].flat
        if any(b != a for b, a, row in zip(before, after, self._rows_at) if not row):
            return None
        held: list[Any] = list(chunk.arrays) if chunk.arrays is not None else [None] * len(chunk.indices)
        arrays = [*held, *more.arrays]
        shapes = chunk.shapes + more.shapes
        members = [(m, arrays[m], tuple(d for dims in shape for d in dims)) for m, shape in enumerate(shapes)]
        if chunk.wanted is None and more.wanted is None:
            per_request = None
        else:
            per_request = [
                *(chunk.wanted or [self._every] * len(chunk.indices)),
                *(more.wanted or [self._every] * len(more.indices)),
            ]
        merged = self._chunk(need, position, members, per_request, False)
        merged.indices = chunk.indices + more.indices
        return merged

    def stage(self, chunk: Chunk, staging: Sequence[object], first: int = 0) -> None:
        """Gather ``chunk``'s requests into ``staging`` (one writable buffer per input, the OM's order) at its
        gear, padded and cast to the OM's types: what its launch copies to the device. With ``first``, only
        requests ``first``.. are gathered, at the rows after those before them (staged before, by a stage of
        the chunk this one extends, and not touched), and the rows after them padded. ValueError names what
        does not fit (the staging is then half written, and unused)."""
        if chunk.arrays is None:
            raise ValueError("stage: the chunk's request arrays were released; it cannot be staged again")
        if not 0 <= first < len(chunk.indices):
            raise ValueError(f"stage: first is {first}, but the chunk has {len(chunk.indices)} requests")
        sources = chunk.arrays[first:]
        if any(arrays is None for arrays in sources):
            raise ValueError("stage: a request after first was released; it cannot be staged again")
        buffers = list(staging)
        if len(buffers) != len(self._specs):
            raise ValueError(f"stage: {len(buffers)} staging buffers for {len(self._specs)} inputs")
        gear = self._gears[chunk.gear]
        for k, (spec, om_type) in enumerate(zip(self._specs, self._om_types)):
            dims = gear.input_dims[k]
            buffer = buffers[k]
            row = sum(shape[k][0] for shape in chunk.shapes[:first])
            if row:
                offset = row * _nbytes(dims[1:], _NUMPY[om_type].itemsize)
                buffer = _bytes_of(buffer, "gather: dst", writable=True)[offset:]
            gather(
                buffer,
                (dims[0] - row, *dims[1:]),
                om_type,
                [arrays[k] for arrays in sources],
                om_type if chunk.staged else spec.type,
                self._pad,
            )

    def launch_args(self, chunk: Chunk) -> tuple[Any, list[int], list[int], list[int]]:
        """What launching ``chunk`` copies, in one call: its gear's record (as given to the Planner), the
        bytes of each input, the OM indices of the outputs copied back and their bytes."""
        return self._records[chunk.gear], chunk.in_bytes, chunk.out_index, chunk.out_bytes

    def count(self, chunk: Chunk) -> None:
        """Count ``chunk`` as one execute (the engine calls it once the chunk is launched)."""
        self._staged_by_gear[chunk.gear] += 1
        self._staged[0] += chunk.rows
        self._staged[1] += chunk.elements
        self._staged[2] += sum(chunk.out_bytes)

    def tally(self) -> tuple[list[int], int, int, int]:
        """The executes ``count`` has counted: per gear position, and their rows, input elements and D2H
        bytes in all. The engine's execute counters are read from it, so that counting an execute costs the
        request path no Python."""
        return list(self._staged_by_gear), self._staged[0], self._staged[1], self._staged[2]

    def split(
        self, chunk: Chunk, staging: Sequence[NDArray[Any]], views: bool = False
    ) -> tuple[list[dict[str, NDArray[Any]]], bool]:
        """Per request of ``chunk`` (in its order), a dict of the outputs it asked for, read from ``staging``
        (one uint8 array per OM output, the OM's order) where the launch copied them; and whether any of them
        is a view of the staging. With ``views``, an output is a view where that needs no copy (no cast, and
        every request's part contiguous); else each request gets a copy of its part, trimmed and cast."""
        gear = self._gears[chunk.gear]
        buffers = list(staging)
        outputs: list[dict[str, NDArray[Any]]] = [{} for _ in chunk.indices]
        lent = False
        for k in chunk.outputs:
            name, j, out_type, om_type, ties = self._outputs[k]
            if not 0 <= j < len(buffers):
                raise ValueError(
                    f"split: output {name!r} is OM output {j}, but {len(buffers)} staging buffers"
                )
            buffer = buffers[j]
            if (
                not isinstance(buffer, np.ndarray)
                or buffer.dtype != np.uint8
                or not buffer.flags.c_contiguous
            ):
                raise ValueError(f"split: staging {j} must be a C-contiguous numpy uint8 array")
            gear_dims = gear.output_dims[j]
            nbytes = gear.out_bytes[k]
            if buffer.size < nbytes:
                raise ValueError(
                    f"split: staging {j} holds {buffer.size} bytes, output {name!r} {list(gear_dims)} needs {nbytes}"
                )
            rows, shapes = [], []
            for shape in chunk.shapes:
                dims = list(gear_dims)
                for out_d, in_k, in_d in ties:
                    dims[out_d] = shape[in_k][in_d]
                rows.append(shape[0][0] if self._batched else dims[0])
                shapes.append(tuple(dims[1:]))
            parts = None
            if views and om_type == out_type:
                whole = buffer[:nbytes].view(_NUMPY[out_type]).reshape(gear_dims)
                parts = _views(whole, rows, shapes)
            if parts is None:
                try:
                    parts = scatter(buffer, gear_dims, om_type, out_type, rows, shapes)
                except ValueError as exc:
                    raise ValueError(f"output {name!r}: {exc}") from None
            else:
                lent = True
            wanted = chunk.wanted
            for position, (mine, part) in enumerate(zip(outputs, parts)):
                if wanted is None or k in wanted[position]:
                    mine[name] = part
        return outputs, lent


def _views(whole: NDArray[Any], rows: list[int], shapes: list[tuple[int, ...]]) -> list[NDArray[Any]] | None:
    """Each request's part of the gear-shaped output ``whole``, as views; None if one is not contiguous or
    does not fit (the copying path then says what)."""
    full = whole.shape[1:]
    parts = []
    row = 0
    for n, shape in zip(rows, shapes):
        if row + n > whole.shape[0] or any(s > f for s, f in zip(shape, full)):
            return None
        part = whole[(slice(row, row + n), *(slice(0, d) for d in shape))]
        if not _contiguous(part.shape, part.strides, part.itemsize):
            return None
        parts.append(part)
        row += n
    return parts


# --- bf16 through DLPack -------------------------------------------------------------------------------
#
# Triton 2.51's Python backend hands a TYPE_BF16 tensor over only as DLPack (as_numpy() raises), and takes one
# back only as DLPack (pb_utils.Tensor.from_dlpack, which checks for dtype code kDLBfloat with 16 bits); numpy
# 1.26 can neither read nor write such a capsule. These two do, over the same bytes: a bf16 tensor's words
# as a uint16 array, and a uint16 array as a bf16 capsule. The structures are DLPack's (dlpack.h, v0.8).

#: capsule names; a capsule keeps the pointer to its name, so these live as long as the module
_DLPACK = b"dltensor"
_DLPACK_USED = b"used_dltensor"
_KDL_CPU = 1
_KDL_BFLOAT = 4


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [
    ("dl_tensor", _DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", _DELETER),
]

_api = ctypes.pythonapi
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
#: the capsule destructor's own view of the capsule: a pointer, since it runs while the capsule dies
_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api)
)


class _Imported:
    """Owns a consumed DLManagedTensor: numpy keeps it as the array's base, and when the array goes, the
    producer's deleter runs (Triton's frees its side of the shared memory then)."""

    def __init__(self, managed: _DLManagedTensor, data: int, shape: tuple[int, ...]):
        self._managed: _DLManagedTensor | None = managed
        self.__array_interface__ = {
            "shape": shape,
            "typestr": "<u2",
            "data": (data, True),  # read-only: the request's memory
            "version": 3,
        }

    def __del__(self) -> None:
        managed, self._managed = self._managed, None
        if managed is not None and managed.deleter:
            managed.deleter(ctypes.pointer(managed))


def _capsule_of(value: object, what: str) -> object:
    if type(value).__name__ == "PyCapsule":
        return value
    exporter = getattr(value, "__dlpack__", None)
    if exporter is None:
        raise ValueError(
            f"{what}: expected a DLPack tensor (an object with __dlpack__, or its capsule), got {type(value).__name__}"
        )
    return exporter()


def _compact(tensor: _DLTensor, shape: tuple[int, ...]) -> bool:
    """Row-major without gaps (DLPack's strides NULL means exactly that)."""
    if not tensor.strides:
        return True
    expected = 1
    for k in range(len(shape) - 1, -1, -1):
        if shape[k] != 1 and tensor.strides[k] != expected:
            return False
        expected *= shape[k]
    return True


def bf16_view(tensor: object) -> NDArray[Any]:
    """The words of a bf16 DLPack tensor (an object with ``__dlpack__``, such as Triton's input tensor, or a
    ``dltensor`` capsule) as a read-only uint16 array over the same memory, which keeps the tensor alive:
    bf16 travels as its uint16 bit patterns everywhere in ge-plugin. ValueError names what is not a C-contiguous
    CPU bf16 tensor (the capsule is then left to its producer)."""
    capsule = _capsule_of(tensor, "bf16_view")
    if not _api.PyCapsule_IsValid(capsule, _DLPACK):
        raise ValueError("bf16_view: the capsule is not an unconsumed DLPack tensor (named 'dltensor')")
    managed = _DLManagedTensor.from_address(_api.PyCapsule_GetPointer(capsule, _DLPACK))
    t = managed.dl_tensor
    dtype = (t.dtype.code, t.dtype.bits, t.dtype.lanes)
    if dtype != (_KDL_BFLOAT, 16, 1):
        raise ValueError(
            f"bf16_view: the tensor's DLPack dtype is (code {dtype[0]}, {dtype[1]} bits, {dtype[2]} lanes), not bf16 (code 4, 16 bits, 1 lane)"
        )
    if t.device.device_type != _KDL_CPU:
        raise ValueError(
            f"bf16_view: the tensor is on DLPack device type {t.device.device_type}; ge-plugin reads CPU tensors (type 1)"
        )
    if not 0 <= t.ndim <= MAX_DIMS:
        raise ValueError(f"bf16_view: the tensor has {t.ndim} dims; at most {MAX_DIMS} are supported")
    shape = tuple(int(t.shape[k]) for k in range(t.ndim))
    if not _compact(t, shape):
        raise ValueError(f"bf16_view: the tensor {list(shape)} is not C-contiguous")
    owner = _Imported(managed, (t.data or 0) + t.byte_offset, shape)
    _api.PyCapsule_SetName(capsule, _DLPACK_USED)  # consumed: the capsule no longer frees it
    return np.asarray(owner)


#: what each exported capsule keeps alive, by the address of its DLManagedTensor, until its deleter runs
_EXPORTED: dict[int, tuple[_DLManagedTensor, object, NDArray[Any]]] = {}
_EXPORTED_LOCK = threading.Lock()


def _release_exported(managed: Any) -> None:
    with _EXPORTED_LOCK:
        _EXPORTED.pop(ctypes.addressof(managed.contents), None)


#: the deleter every exported capsule's DLManagedTensor carries (a C function pointer over the above)
_release = _DELETER(_release_exported)


def _capsule_gone(capsule: int) -> None:
    # the capsule goes without a consumer having taken the tensor (renamed it): release it here
    if _is_valid(capsule, _DLPACK):
        address = _get_pointer(capsule, _DLPACK)
        _release(ctypes.cast(address, ctypes.POINTER(_DLManagedTensor)))


#: the destructor of every exported capsule
_capsule_died = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_capsule_gone)


def bf16_capsule(words: NDArray[Any]) -> object:
    """A DLPack capsule (``dltensor``: dtype code kDLBfloat, 16 bits, on the CPU) over a C-contiguous uint16
    array's memory, as Triton's ``pb_utils.Tensor.from_dlpack`` takes a bf16 output. No copy: the capsule
    holds a reference to ``words`` (a view of a lane's staging, like any output the engine lends) until its
    consumer's deleter runs, or until the capsule itself goes unconsumed."""
    if not isinstance(words, np.ndarray):
        raise ValueError(f"bf16_capsule: expected a numpy uint16 array, got {type(words).__name__}")
    if not _matches(words.dtype, "bf16"):
        raise ValueError(
            f"bf16_capsule: expected uint16 (bf16 bit patterns), got {messages.describe(words.dtype)}"
        )
    if not words.flags.c_contiguous:
        raise ValueError(f"bf16_capsule: the array {list(words.shape)} is not C-contiguous")
    if words.ndim > MAX_DIMS:
        raise ValueError(f"bf16_capsule: the array has {words.ndim} dims; at most {MAX_DIMS} are supported")
    shape = (ctypes.c_int64 * max(words.ndim, 1))(*words.shape)
    managed = _DLManagedTensor()
    t = managed.dl_tensor
    t.data = words.ctypes.data
    t.device = _DLDevice(_KDL_CPU, 0)
    t.ndim = words.ndim
    t.dtype = _DLDataType(_KDL_BFLOAT, 16, 1)
    t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    t.strides = None
    t.byte_offset = 0
    managed.deleter = _release
    with _EXPORTED_LOCK:
        _EXPORTED[ctypes.addressof(managed)] = (managed, shape, words)
    return _api.PyCapsule_New(ctypes.addressof(managed), _DLPACK, ctypes.cast(_capsule_died, ctypes.c_void_p))
