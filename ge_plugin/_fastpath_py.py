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
from collections.abc import Mapping, Sequence
from typing import Any, Callable, cast

import numpy as np

from ge_plugin.errors import RequestError

IMPLEMENTATION = "py"

__all__ = [
    "CASTS",
    "IMPLEMENTATION",
    "TensorSpec",
    "bf16_capsule",
    "bf16_view",
    "copy_bytes",
    "fill",
    "gather",
    "scatter",
    "validate",
]

#: numpy's own limit on the number of dims, which the compiled module uses for its fixed-size arrays
_MAX_DIMS = 32

#: the type names ge-plugin moves, with the numpy dtype of their bytes on the host
_NUMPY: dict[str, np.dtype] = {
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

#: the integer range of each integer type, for pad values (a float has to land on one of them exactly)
_INT_RANGE = {
    name: (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
    for name, dtype in _NUMPY.items()
    if dtype.kind in "iu" and name != "bf16"
}
_INT_RANGE["bool"] = (0, 1)

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


# --- type names and casts ---------------------------------------------------------------------------


def _dtype(type_name: object, what: str) -> np.dtype:
    try:
        return _NUMPY[type_name]  # type: ignore[index]
    except (KeyError, TypeError):
        raise ValueError(f"{what}: unknown type {type_name!r}; use one of {_TYPE_NAMES}") from None


def _f32_to_f16(values: np.ndarray) -> np.ndarray:
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


def _f16_to_f32(values: np.ndarray) -> np.ndarray:
    single = values.astype(np.float32)
    nan = np.isnan(values)
    if nan.any():
        bits = values.view(np.uint16)[nan].astype(np.uint32)
        single.view(np.uint32)[nan] = ((bits & 0x8000) << 16) | 0x7F800000 | ((bits & 0x3FF) << 13)
    return single


def _f32_to_bf16(values: np.ndarray) -> np.ndarray:
    # Round to nearest even on the upper 16 bits, as ml_dtypes and torch do; NaN is quieted, not rounded
    # (rounding could carry a NaN into infinity).
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = (bits + (0x7FFF + ((bits >> 16) & 1))) >> 16
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, (bits >> 16) | 0x0040, rounded).astype(np.uint16)


def _bf16_to_f32(values: np.ndarray) -> np.ndarray:
    return (values.astype(np.uint32) << 16).view(np.float32)


def _int64_to_int32(values: np.ndarray, where: str) -> np.ndarray:
    # Range check and cast in one place: a request's ids silently wrapping would be far worse than an error.
    if values.size and (values.min() < _INT32_MIN or values.max() > _INT32_MAX):
        flat = int(np.flatnonzero((values < _INT32_MIN) | (values > _INT32_MAX))[0])
        index = np.unravel_index(flat, values.shape)
        raise ValueError(
            f"cannot cast int64 to int32: {where} holds {int(values.flat[flat])} at "
            f"[{', '.join(str(int(i)) for i in index)}], which does not fit in int32"
        )
    return values.astype(np.int32)


_Cast = Callable[[np.ndarray, str], np.ndarray]


def _pair_names(pairs) -> list[str]:
    """``a<->b`` once per pair of conversions both ways, in table order (for messages)."""
    seen: list[tuple[str, str]] = []
    for a, b in pairs:
        if (b, a) not in seen:
            seen.append((a, b))
    return [f"{a}<->{b}" for a, b in seen]


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
_CAST_NAMES = ", ".join(_pair_names(_CASTS))


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


def _number(value: object, what: str) -> float:
    # Only real numbers: float("1.5") would accept a string, which is always a caller's mistake here.
    if isinstance(value, (str, bytes, bytearray)):
        raise ValueError(f"{what}: {value!r} is not a number")
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{what}: {value!r} is not a number") from None


def _typed_value(value: float, type_name: str, what: str) -> np.ndarray:
    """``value`` as one element of ``type_name``, converted once; floats round the way the data does."""
    number = _number(value, what)
    dtype = _NUMPY[type_name]
    if type_name in _INT_RANGE:
        low, high = _INT_RANGE[type_name]
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


def _bytes_of(buffer: object, what: str, writable: bool) -> np.ndarray:
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
    if len(dims) > _MAX_DIMS:
        raise ValueError(f"{what} has {len(dims)} dims, more than {_MAX_DIMS}")
    dims = tuple(operator.index(d) for d in dims)
    for k, d in enumerate(dims):
        if d < 1:
            raise ValueError(f"{what} {list(dims)}: dim {k} is {d}; every dim needs at least one element")
    return dims


def _nbytes(shape: tuple[int, ...], itemsize: int) -> int:
    total = itemsize
    for d in shape:
        total *= d
    return total


def _matches(dtype: np.dtype, type_name: str) -> bool:
    want = _NUMPY[type_name]
    return dtype.kind == want.kind and dtype.itemsize == want.itemsize and dtype.isnative


def _describe(dtype: np.dtype) -> str:
    return dtype.name if dtype.isnative else f"{dtype.str} (non-native byte order)"


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
        if len(dims_t) > _MAX_DIMS:
            raise ValueError(f"TensorSpec {name!r}: {len(dims_t)} dims, more than {_MAX_DIMS}")
        for k, (dim, limit) in enumerate(zip(dims_t, limits_t)):
            if dim == 0 or dim < -1:
                raise ValueError(
                    f"TensorSpec {name!r}: dim {k} is {dim}; use -1 (dynamic) or a positive length"
                )
            if limit < 1:
                raise ValueError(f"TensorSpec {name!r}: the limit of dim {k} is {limit}; it must be positive")
            if dim != -1 and limit != dim:
                raise ValueError(f"TensorSpec {name!r}: dim {k} is fixed at {dim} but its limit is {limit}")
        bounds = None if value_range is None else _value_range(name, type, value_range)
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


def _value_range(name: str, type_name: str, value_range: object) -> tuple[float, float]:
    """(low, high) as the spec keeps them: ints for integer types, floats for float types; twin."""
    try:
        low, high = cast(Any, value_range)  # anything that unpacks into two: the compiled twin's rule
    except (TypeError, ValueError):
        raise ValueError(
            f"TensorSpec {name!r}: value_range must be (low, high), got {value_range!r}"
        ) from None
    integral = type_name in _INT_RANGE
    bounds: list[float] = []
    for which, bound in (("low", low), ("high", high)):
        number = _number(bound, f"TensorSpec {name!r}: value_range {which}")
        if number != number:
            raise ValueError(f"TensorSpec {name!r}: value_range {which} is NaN")
        if integral:
            if isinstance(bound, (int, np.integer)):
                bounds.append(int(bound))
                continue
            if not number.is_integer():
                raise ValueError(
                    f"TensorSpec {name!r}: value_range {which} {bound!r} is not an integer, and {type_name} "
                    "holds integers"
                )
            bounds.append(int(number))
        else:
            bounds.append(number)
    if bounds[0] > bounds[1]:
        raise ValueError(f"TensorSpec {name!r}: value_range low {bounds[0]} is above high {bounds[1]}")
    return (bounds[0], bounds[1])


def _range_problem(spec: TensorSpec, values: np.ndarray, flat: int) -> RequestError:
    """The message for the first value outside the spec's range, at flat index ``flat``; twin."""
    value = values.flat[flat]
    shown = repr(float(value)) if values.dtype.kind == "f" else str(int(value))
    index = ", ".join(str(int(i)) for i in np.unravel_index(flat, values.shape))
    low, high = spec.value_range  # type: ignore[misc]
    return RequestError(
        f"input {spec.name!r}: value {shown} at [{index}] is outside the accepted range [{low}, {high}]"
    )


def _check_range(spec: TensorSpec, array: np.ndarray) -> None:
    low, high = spec.value_range  # type: ignore[misc]
    values = _bf16_to_f32(array) if spec.type == "bf16" else array
    if values.dtype.kind == "f":
        outside = ~((values >= low) & (values <= high))  # NaN is outside every range
    else:
        outside = (values < low) | (values > high)
    if outside.any():
        raise _range_problem(spec, values, int(np.flatnonzero(outside)[0]))


def _check_ties(specs: Sequence[TensorSpec], arrays: Sequence[np.ndarray]) -> None:
    """Inputs whose shapes must be equal; twin."""
    for k, spec in enumerate(specs):
        other = spec.same_shape_as
        if other is None:
            continue
        j = next((j for j, candidate in enumerate(specs) if candidate.name == other), None)
        if j is None:
            raise ValueError(f"TensorSpec {spec.name!r}: same_shape_as {other!r} is not one of the inputs")
        if arrays[k].shape != arrays[j].shape:
            raise RequestError(
                f"input {spec.name!r}: shape {list(arrays[k].shape)} differs from input {other!r}'s "
                f"{list(arrays[j].shape)}; the model takes them with the same shape"
            )


def _as_array(name: str, value: object) -> np.ndarray:
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


def validate(specs: Sequence[TensorSpec], tensors: Mapping[str, object]) -> list:
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
                f"input {name!r}: expected {spec.type}{bits} data, got {_describe(array.dtype)}"
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
    _check_ties(specs, arrays)
    return arrays


def _source(value: object, index: int, src_type: str, dst_shape: tuple[int, ...]) -> np.ndarray:
    what = f"gather: source {index}"
    if isinstance(value, np.ndarray):
        array = value
    else:
        try:
            array = np.asarray(memoryview(value))  # type: ignore[arg-type]
        except TypeError:
            raise ValueError(f"{what} is not an array, got {type(value).__name__}") from None
    if not _matches(array.dtype, src_type):
        raise ValueError(f"{what} holds {_describe(array.dtype)} data, expected {src_type}")
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
    dst, dst_shape: Sequence[int], dst_type: str, srcs: Sequence, src_type: str, pad_value: float
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
    src,
    src_shape: Sequence[int],
    src_type: str,
    out_type: str,
    rows: Sequence[int],
    shapes: Sequence[Sequence[int]],
) -> list:
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


def copy_bytes(dst, src) -> None:
    """Copy every byte of ``src`` (any C-contiguous buffer) to the start of ``dst``, at memcpy speed and
    without the GIL when large. The engine does not call it (``gather`` and ``scatter`` carry every request's
    bytes, padding and casts included); it is the plain copy for code that stages bytes by hand."""
    source = _bytes_of(src, "copy_bytes: src", writable=False)
    target = _bytes_of(dst, "copy_bytes: dst", writable=True)
    if target.size < source.size:
        raise ValueError(f"copy_bytes: dst holds {target.size} bytes, src has {source.size}")
    target[: source.size] = source


def fill(dst, type: str, value: float, start: int = 0, count: int = -1) -> None:
    """Write ``value`` as ``type`` into elements ``start .. start+count`` of ``dst`` (``count=-1``: to the
    end), without building a source array. The engine does not call it (``gather`` pads as it copies); it is
    the plain fill for code that stages bytes by hand."""
    dtype = _dtype(type, "fill: type")
    typed = _typed_value(value, type, "fill: value")
    target = _bytes_of(dst, "fill: dst", writable=True)
    capacity = target.size // dtype.itemsize
    start = operator.index(start)
    count = operator.index(count)
    if count == -1:
        count = capacity - start
    if start < 0 or count < 0 or start + count > capacity:
        raise ValueError(
            f"fill: elements {start}..{start + count} are outside dst, which holds {capacity} {type} elements"
        )
    target[: capacity * dtype.itemsize].view(dtype)[start : start + count] = typed[0]


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


def bf16_view(tensor: object) -> np.ndarray:
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
    if not 0 <= t.ndim <= _MAX_DIMS:
        raise ValueError(f"bf16_view: the tensor has {t.ndim} dims; at most {_MAX_DIMS} are supported")
    shape = tuple(int(t.shape[k]) for k in range(t.ndim))
    if not _compact(t, shape):
        raise ValueError(f"bf16_view: the tensor {list(shape)} is not C-contiguous")
    owner = _Imported(managed, (t.data or 0) + t.byte_offset, shape)
    _api.PyCapsule_SetName(capsule, _DLPACK_USED)  # consumed: the capsule no longer frees it
    return np.asarray(owner)


#: what each exported capsule keeps alive, by the address of its DLManagedTensor, until its deleter runs
_EXPORTED: dict[int, tuple[_DLManagedTensor, object, np.ndarray]] = {}
_EXPORTED_LOCK = threading.Lock()


@_DELETER
def _release(managed: Any) -> None:
    with _EXPORTED_LOCK:
        _EXPORTED.pop(ctypes.addressof(managed.contents), None)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_died(capsule: int) -> None:
    # the capsule goes without a consumer having taken the tensor (renamed it): release it here
    if _is_valid(capsule, _DLPACK):
        address = _get_pointer(capsule, _DLPACK)
        _release(ctypes.cast(address, ctypes.POINTER(_DLManagedTensor)))


def bf16_capsule(words: np.ndarray) -> object:
    """A DLPack capsule (``dltensor``: dtype code kDLBfloat, 16 bits, on the CPU) over a C-contiguous uint16
    array's memory, as Triton's ``pb_utils.Tensor.from_dlpack`` takes a bf16 output. No copy: the capsule
    holds a reference to ``words`` (a view of a lane's staging, like any output the engine lends) until its
    consumer's deleter runs, or until the capsule itself goes unconsumed."""
    if not isinstance(words, np.ndarray):
        raise ValueError(f"bf16_capsule: expected a numpy uint16 array, got {type(words).__name__}")
    if not _matches(words.dtype, "bf16"):
        raise ValueError(f"bf16_capsule: expected uint16 (bf16 bit patterns), got {_describe(words.dtype)}")
    if not words.flags.c_contiguous:
        raise ValueError(f"bf16_capsule: the array {list(words.shape)} is not C-contiguous")
    if words.ndim > _MAX_DIMS:
        raise ValueError(f"bf16_capsule: the array has {words.ndim} dims; at most {_MAX_DIMS} are supported")
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
