# cython: embedsignature.format=python, annotation_typing=False
"""Compiled fast path: the byte moving and checking between Triton requests and pinned staging buffers.

Every request's tensors pass through here twice (gather into the gear, scatter back out), so the per-call
Python work is kept to one pass over the arguments; the copies themselves run in C on raw pointers, as
memcpy wherever a run is contiguous, and drop the GIL when they are large. ``_fastpath_py.py`` is the
specification: same names, signatures, results and messages; where this file matches it deliberately in
a way that is not obvious, a comment says "twin". What runs only when a spec is built or a request is
refused (reading a value range, wording a range or shape-tie error) comes from ``_fastpath_messages``,
which the twin words its errors with too; a Planner's tables are worked out by ``_fastpath_tables``, which
the twin builds its own with. Nothing here imports the twin.

Annotations are documentation only (``annotation_typing=False``): arguments are converted by hand, so that
a bad argument gets the twin's ValueError rather than Cython's TypeError.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.pycapsule cimport (
    PyCapsule_CheckExact,
    PyCapsule_GetPointer,
    PyCapsule_IsValid,
    PyCapsule_New,
    PyCapsule_SetName,
)
from cpython.ref cimport PyObject
from cpython.float cimport PyFloat_AS_DOUBLE, PyFloat_CheckExact
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.math cimport floor, isfinite
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy, memset

cimport numpy as cnp

import operator
import sys

import numpy as np

from ge_plugin import _fastpath_messages as messages
from ge_plugin._fastpath_tables import PlannerTables
from ge_plugin.errors import RequestError

cnp.import_array()

if sys.byteorder != "little":  # pad values are narrowed by taking their low bytes; ge_plugin.fastpath
    raise ImportError("ge_plugin._fastpath assumes a little-endian host")  # then picks the twin

IMPLEMENTATION = "c"

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

# --- type tables (indexed by TypeCode) -----------------------------------------------------------------

_TYPE_CODES = {
    "bool": T_BOOL,
    "uint8": T_UINT8,
    "uint16": T_UINT16,
    "uint32": T_UINT32,
    "uint64": T_UINT64,
    "int8": T_INT8,
    "int16": T_INT16,
    "int32": T_INT32,
    "int64": T_INT64,
    "fp16": T_FP16,
    "fp32": T_FP32,
    "fp64": T_FP64,
    "bf16": T_BF16,
}
_TYPE_NAMES = ", ".join(_TYPE_CODES)
_NAMES = tuple(_TYPE_CODES)
#: (from, to) type names -> what happens to each element; the one list of conversions (twin: _CASTS)
_CAST_TABLE = {
    ("fp32", "fp16"): CAST_F32_F16,
    ("fp16", "fp32"): CAST_F16_F32,
    ("fp32", "bf16"): CAST_F32_BF16,
    ("bf16", "fp32"): CAST_BF16_F32,
    ("fp16", "bf16"): CAST_F16_BF16,
    ("bf16", "fp16"): CAST_BF16_F16,
    ("int64", "int32"): CAST_I64_I32,
    ("int32", "int64"): CAST_I32_I64,
}
#: every (from, to) pair of type names the fast path converts; equal types are always copied as they are
CASTS = frozenset(_CAST_TABLE)
_CAST_NAMES = ", ".join(messages.pair_names(_CAST_TABLE))
# _CAST_TABLE by TypeCode, read per gather and scatter without touching a Python object; -1: no such cast
cdef int[T_COUNT][T_COUNT] _CAST_BY_CODE


cdef void _index_casts():
    memset(_CAST_BY_CODE, -1, sizeof(_CAST_BY_CODE))
    for (src, dst), code in _CAST_TABLE.items():
        _CAST_BY_CODE[<int>_TYPE_CODES[src]][<int>_TYPE_CODES[dst]] = code


_index_casts()

cdef Py_ssize_t[13] _ITEMSIZE = [1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8, 2]
cdef char[13] _KIND = [b"b", b"u", b"u", b"u", b"u", b"i", b"i", b"i", b"i", b"f", b"f", b"f", b"u"]
cdef int[13] _TYPENUM = [
    cnp.NPY_BOOL, cnp.NPY_UINT8, cnp.NPY_UINT16, cnp.NPY_UINT32, cnp.NPY_UINT64,
    cnp.NPY_INT8, cnp.NPY_INT16, cnp.NPY_INT32, cnp.NPY_INT64,
    cnp.NPY_FLOAT16, cnp.NPY_FLOAT32, cnp.NPY_FLOAT64, cnp.NPY_UINT16,
]

_INT_RANGE = messages.INT_RANGE  # used only to word errors

cdef int64_t INT32_LOW = -2147483648
cdef int64_t INT32_HIGH = 2147483647


cdef int _type_code(object name, str what) except -1:
    try:
        return _TYPE_CODES[name]
    except (KeyError, TypeError):
        raise ValueError(f"{what}: unknown type {name!r}; use one of {_TYPE_NAMES}") from None


cdef int _cast_code(int src, int dst, str what) except -1:
    if src == dst:
        return CAST_NONE
    cdef int code = _CAST_BY_CODE[src][dst]
    if code >= 0:
        return code
    raise ValueError(f"{what}: cannot cast {_NAMES[src]} to {_NAMES[dst]} (the casts are {_CAST_NAMES})")


# --- element conversions: integer bit manipulation plus one float addition that lets the FPU do the
# round-to-nearest-even of subnormals; branch-free, so the compiler vectorises the loops, and independent of
# the CPU's F16C support (the results are the same on every host).

cdef inline float _float(uint32_t bits) noexcept nogil:
    cdef float value
    memcpy(&value, &bits, 4)
    return value


cdef inline uint32_t _bits(float value) noexcept nogil:
    cdef uint32_t bits
    memcpy(&bits, &value, 4)
    return bits


cdef inline uint32_t _mask(bint condition) noexcept nogil:
    # all ones when condition holds: selects written as masks, because Cython turns "x if c else y" into an
    # if statement, and a branch in the loop stops the compiler from vectorising it
    return (<uint32_t>0) - (<uint32_t>condition)


cdef inline uint16_t _f32_to_f16(uint32_t f) noexcept nogil:
    cdef uint32_t sign = (f >> 16) & 0x8000
    cdef uint32_t a = f & 0x7FFFFFFF
    # normal halves: rebias the exponent, round to nearest even on the 13 dropped bits; a carry may reach
    # the exponent, up to infinity, which is right
    cdef uint32_t normal = (a + 0xC8000FFFU + ((a >> 13) & 1)) >> 13
    # below 2**-14: adding 0.5 puts the half's subnormal unit (2**-24) at the float's last bit, so the
    # float addition rounds exactly as the half needs (a carry gives the smallest normal, which is right)
    cdef uint32_t subnormal = _bits(_float(a) + <float>0.5) - 0x3F000000
    # 2**16 and up is infinity; NaN is quieted with the top of its payload kept (twin)
    cdef uint32_t special = 0x7C00 | (_mask(a > 0x7F800000) & (0x0200 | ((a >> 13) & 0x03FF)))
    cdef uint32_t is_special = _mask(a >= 0x47800000)
    cdef uint32_t is_subnormal = _mask(a < 0x38800000)
    cdef uint32_t is_normal = ~(is_special | is_subnormal)
    return <uint16_t>(sign | (special & is_special) | (subnormal & is_subnormal) | (normal & is_normal))


cdef inline uint32_t _f16_to_f32(uint16_t h) noexcept nogil:
    cdef uint32_t o = (<uint32_t>(h & 0x7FFF)) << 13
    cdef uint32_t exp = o & 0x0F800000
    cdef uint32_t normal = o + 0x38000000  # rebias the exponent
    cdef uint32_t special = o + 0x70000000  # inf, or NaN with its payload (twin)
    # a subnormal half is sig * 2**-24: read it as 2**-14 * (1 + sig/1024), then take 2**-14 away (exact)
    cdef uint32_t subnormal = _bits(_float(o + 0x38800000) - _float(0x38800000))
    cdef uint32_t is_special = _mask(exp == 0x0F800000)
    cdef uint32_t is_subnormal = _mask(exp == 0)
    cdef uint32_t is_normal = ~(is_special | is_subnormal)
    cdef uint32_t sign = (<uint32_t>(h & 0x8000)) << 16
    return sign | (special & is_special) | (subnormal & is_subnormal) | (normal & is_normal)


cdef inline uint16_t _f32_to_bf16(uint32_t f) noexcept nogil:
    if (f & 0x7FFFFFFF) > 0x7F800000:
        return <uint16_t>((f >> 16) | 0x0040)  # NaN: quieted; rounding could carry it into infinity
    return <uint16_t>((f + 0x7FFF + ((f >> 16) & 1)) >> 16)  # round to nearest even, as ml_dtypes/torch


cdef int _convert(const char* src, char* dst, Py_ssize_t n, Move* mv) noexcept nogil:
    cdef Py_ssize_t i
    cdef int64_t value
    cdef int cast = mv.cast
    if cast == CAST_NONE:
        memcpy(dst, src, n * mv.src_item)
    elif cast == CAST_F32_F16:
        for i in range(n):
            (<uint16_t*>dst)[i] = _f32_to_f16((<const uint32_t*>src)[i])
    elif cast == CAST_F16_F32:
        for i in range(n):
            (<uint32_t*>dst)[i] = _f16_to_f32((<const uint16_t*>src)[i])
    elif cast == CAST_F32_BF16:
        for i in range(n):
            (<uint16_t*>dst)[i] = _f32_to_bf16((<const uint32_t*>src)[i])
    elif cast == CAST_BF16_F32:
        for i in range(n):
            (<uint32_t*>dst)[i] = (<uint32_t>(<const uint16_t*>src)[i]) << 16
    elif cast == CAST_F16_BF16:
        for i in range(n):
            (<uint16_t*>dst)[i] = _f32_to_bf16(_f16_to_f32((<const uint16_t*>src)[i]))
    elif cast == CAST_BF16_F16:
        for i in range(n):
            (<uint16_t*>dst)[i] = _f32_to_f16((<uint32_t>(<const uint16_t*>src)[i]) << 16)
    elif cast == CAST_I64_I32:
        for i in range(n):
            value = (<const int64_t*>src)[i]
            if value < INT32_LOW or value > INT32_HIGH:  # checked in the copying pass, not a second one
                mv.bad = (src - mv.src_base) // mv.src_item + i
                return -1
            (<int32_t*>dst)[i] = <int32_t>value
    elif cast == CAST_I32_I64:
        for i in range(n):
            (<int64_t*>dst)[i] = (<const int32_t*>src)[i]
    return 0


cdef void _fill(char* dst, Py_ssize_t n, Move* mv) noexcept nogil:
    cdef Py_ssize_t i
    cdef uint16_t v16
    cdef uint32_t v32
    cdef uint64_t v64
    if n <= 0:
        return
    if mv.pad_zero:
        memset(dst, 0, n * mv.dst_item)
    elif mv.dst_item == 1:
        memset(dst, mv.pad_value[0], n)
    elif mv.dst_item == 2:
        memcpy(&v16, mv.pad_value, 2)
        for i in range(n):
            (<uint16_t*>dst)[i] = v16
    elif mv.dst_item == 4:
        memcpy(&v32, mv.pad_value, 4)
        for i in range(n):
            (<uint32_t*>dst)[i] = v32
    else:
        memcpy(&v64, mv.pad_value, 8)
        for i in range(n):
            (<uint64_t*>dst)[i] = v64


cdef void _plan(Move* mv) noexcept nogil:
    # The compact side's strides follow extent, the gear side's follow gear; below run_dim both agree, so
    # one index of run_dim is a single contiguous run (a whole block when nothing below dim 0 is padded).
    cdef int k
    cdef Py_ssize_t compact = 1, gear = 1
    mv.run_dim = 0
    for k in range(mv.ndim - 1, -1, -1):
        if mv.into_gear:
            mv.src_stride[k] = compact
            mv.dst_stride[k] = gear
        else:
            mv.src_stride[k] = gear
            mv.dst_stride[k] = compact
        compact *= mv.extent[k]
        gear *= mv.gear[k]
        if k > 0 and mv.run_dim == 0 and mv.extent[k] != mv.gear[k]:
            mv.run_dim = k


cdef int _move(Move* mv, int k, const char* src, char* dst) noexcept nogil:
    cdef int status
    cdef Py_ssize_t i, n
    cdef Py_ssize_t gap = mv.gear[k] - mv.extent[k]
    if k == mv.run_dim:
        n = mv.extent[k] * mv.dst_stride[k]  # here both strides are the elements below dim k
        if _convert(src, dst, n, mv) < 0:
            return -1
        if mv.into_gear and gap > 0:
            _fill(dst + n * mv.dst_item, gap * mv.dst_stride[k], mv)
        return 0
    for i in range(mv.extent[k]):
        status = _move(
            mv, k + 1, src + i * mv.src_stride[k] * mv.src_item, dst + i * mv.dst_stride[k] * mv.dst_item
        )
        if status < 0:
            return -1
    if mv.into_gear and gap > 0:
        _fill(dst + mv.extent[k] * mv.dst_stride[k] * mv.dst_item, gap * mv.dst_stride[k], mv)
    return 0


cdef Py_ssize_t _gather_all(
    Move* mv, Source* sources, Py_ssize_t n, const Py_ssize_t* gear, char* base, Py_ssize_t row_bytes,
    Py_ssize_t rows,
) noexcept nogil:
    """Moves every source to its rows and pads the rows after them; returns -1, or the index of the source
    holding a value the cast rejected (mv.bad says where)."""
    cdef Py_ssize_t i
    cdef int k
    for i in range(n):
        for k in range(mv.ndim):
            mv.extent[k] = sources[i].shape[k]
            mv.gear[k] = gear[k]
        mv.gear[0] = mv.extent[0]  # rows are stacked, never padded between sources
        _plan(mv)
        mv.src_base = sources[i].data
        if _move(mv, 0, sources[i].data, base) < 0:
            return i
        base += mv.extent[0] * row_bytes
    _fill(base, (gear[0] - rows) * (row_bytes // mv.dst_item), mv)
    return -1


# --- Python-level helpers: argument conversion, and the wording of errors (twin) -----------------------

cdef double _number(object value, str what) except? -1.0:
    if PyFloat_CheckExact(value):
        return PyFloat_AS_DOUBLE(value)
    if isinstance(value, (str, bytes, bytearray)):
        raise ValueError(f"{what}: {value!r} is not a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: {value!r} is not a number") from None


cdef int _typed_value(double value, int code, char* out, str what) except -1:
    """Writes value as one element of type ``code`` into out (8 bytes); floats round as the data does."""
    cdef float single
    cdef uint32_t bits
    cdef uint16_t half
    cdef int64_t signed
    cdef uint64_t unsigned
    if code == T_FP64:
        memcpy(out, &value, 8)
    elif code == T_FP32 or code == T_FP16 or code == T_BF16:
        single = <float>value
        memcpy(&bits, &single, 4)
        if code == T_FP32:
            memcpy(out, &bits, 4)
        else:
            half = _f32_to_f16(bits) if code == T_FP16 else _f32_to_bf16(bits)
            memcpy(out, &half, 2)
    else:
        name = _NAMES[code]
        if not isfinite(value) or floor(value) != value:
            raise ValueError(f"{what}: {value!r} is not an integer, and {name} holds integers")
        low, high = _INT_RANGE[name]
        # the float comparisons below are exact: every bound is a power of two, or one off one
        if (
            (code == T_INT64 and not (-9223372036854775808.0 <= value < 9223372036854775808.0))
            or (code == T_UINT64 and not (0.0 <= value < 18446744073709551616.0))
            or (code != T_INT64 and code != T_UINT64 and not (<double>low <= value <= <double>high))
        ):
            raise ValueError(f"{what}: {value!r} does not fit in {name} [{low}, {high}]")
        if code == T_UINT64:
            unsigned = <uint64_t>value
            memcpy(out, &unsigned, 8)
        else:
            signed = <int64_t>value
            memcpy(out, &signed, _ITEMSIZE[code])  # little-endian: the low bytes are the narrow value
    return 0


cdef inline bint _all_zero(const char* value, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if value[i]:
            return False
    return True


def _buffer_problem(buffer, str what, bint writable):
    """Raise the twin's message for a buffer that PyObject_GetBuffer refused (twin: _bytes_of)."""
    try:
        view = memoryview(buffer)
    except TypeError:
        kind = "a writable contiguous buffer" if writable else "a contiguous buffer"
        got = type(buffer).__name__
        raise ValueError(f"{what} must be {kind} such as a numpy uint8 array, got {got}") from None
    if writable and view.readonly:
        raise ValueError(f"{what} is read-only; it must be writable")
    if not view.c_contiguous:
        raise ValueError(f"{what} is not C-contiguous")
    raise ValueError(f"{what} cannot be used as a flat buffer")


cdef int _get_buffer(object buffer, Py_buffer* view, str what, bint writable) except -1:
    cdef int flags = PyBUF_SIMPLE | PyBUF_WRITABLE if writable else PyBUF_SIMPLE
    try:
        PyObject_GetBuffer(buffer, view, flags)
    except (BufferError, TypeError, ValueError):
        _buffer_problem(buffer, what, writable)
    return 0


cdef inline bint _matches(cnp.ndarray array, int code) noexcept:
    cdef cnp.dtype descr = <cnp.dtype>cnp.PyArray_DESCR(array)
    return descr.kind == _KIND[code] and descr.itemsize == _ITEMSIZE[code] and cnp.PyArray_ISNOTSWAPPED(array)


cdef Py_ssize_t _shape(object shape, Py_ssize_t* out, str what) except -1:
    """Copies a shape into out and returns its length; twin: _shape."""
    cdef Py_ssize_t k, n, d
    dims = shape if type(shape) is tuple or type(shape) is list else tuple(shape)
    n = len(dims)
    if n == 0:
        raise ValueError(f"{what} is empty; it needs at least the row dim")
    if n > MAX_DIMS:
        raise ValueError(f"{what} has {n} dims, more than {MAX_DIMS}")
    for k in range(n):
        d = operator.index(dims[k])
        out[k] = d
    for k in range(n):
        if out[k] < 1:
            dims_list = [out[j] for j in range(n)]
            raise ValueError(f"{what} {dims_list}: dim {k} is {out[k]}; every dim needs at least one element")
    return n


def _unravel(Py_ssize_t flat, shape):
    return ", ".join(str(int(i)) for i in np.unravel_index(flat, tuple(shape)))


# --- how often the GIL was let go, for the tests (a count, not a race) -------------------------------------

cdef Py_ssize_t _nogil_sections = 0


cdef inline bint _without_gil(Py_ssize_t nbytes) noexcept:
    """Whether work on ``nbytes`` runs without the GIL: the one place GIL_RELEASE_BYTES is compared with, so
    every copy and check draws the line at the same size; counts the sections it lets go for."""
    global _nogil_sections
    if nbytes < GIL_RELEASE_BYTES:
        return False
    _nogil_sections += 1
    return True


#: the size from which a copy or check lets the GIL go, for the tests
_GIL_RELEASE_BYTES = GIL_RELEASE_BYTES


def _gil_releases() -> int:
    """How many copies or checks so far ran without the GIL (each one large enough to be worth it)."""
    return _nogil_sections


# --- the public surface ----------------------------------------------------------------------------


cdef class TensorSpec:
    """What one model input accepts. Immutable; built once per model, reused for every request.

    ``dims`` is the full shape the model takes, batch dim first when ``batched``, -1 for a dynamic dim;
    ``limits`` gives per dim the largest accepted length (the dim itself when fixed, the largest batch gear
    for the batch dim, the largest dims-gear value for a dynamic sequence dim). ``batched`` only changes
    how messages name dim 0 ("batch 9 exceeds the largest gear 8"). ``value_range`` (low, high), inclusive,
    refuses a request holding any value outside it (NaN included); ``same_shape_as`` names another input
    whose shape this one's must equal.
    """

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
        """Checks the spec once, here, so that validate() can trust it on every request."""
        cdef int k
        if not isinstance(name, str) or not name:
            raise ValueError(f"TensorSpec name must be a non-empty string, got {name!r}")
        if not isinstance(type, str) or type not in _TYPE_CODES:
            raise ValueError(f"TensorSpec {name!r}: unknown type {type!r}; use one of {_TYPE_NAMES}")
        dims_t = tuple([operator.index(d) for d in dims])
        limits_t = tuple([operator.index(d) for d in limits])
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
            self.c_dims[k] = dim
            self.c_limits[k] = limit
        bounds = None if value_range is None else messages.value_range(name, type, value_range)
        if same_shape_as is not None and (not isinstance(same_shape_as, str) or not same_shape_as):
            raise ValueError(f"TensorSpec {name!r}: same_shape_as must be an input name, got {same_shape_as!r}")
        if same_shape_as == name:
            raise ValueError(f"TensorSpec {name!r}: same_shape_as names the input itself")
        self.name = name
        self.type = type
        self.dims = dims_t
        self.limits = limits_t
        self.batched = bool(batched)
        self.value_range = bounds
        self.same_shape_as = same_shape_as
        self.ndim = len(dims_t)
        self.code = _TYPE_CODES[type]
        self.has_range = bounds is not None
        if bounds is not None:
            _set_bounds(self, bounds[0], bounds[1])

    def __repr__(self) -> str:
        fields = f"{self.name!r}, {self.type!r}, {self.dims!r}, {self.limits!r}, batched={self.batched!r}"
        if self.value_range is not None:
            fields += f", value_range={self.value_range!r}"
        if self.same_shape_as is not None:
            fields += f", same_shape_as={self.same_shape_as!r}"
        return f"TensorSpec({fields})"

    def _key(self):
        return (self.name, self.type, self.dims, self.limits, self.batched, self.value_range, self.same_shape_as)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorSpec):
            return NotImplemented
        return self._key() == (<TensorSpec>other)._key()

    def __hash__(self) -> int:
        return hash(self._key())


cdef int _set_bounds(TensorSpec spec, object low, object high) except -1:
    """The C bounds validate() compares with; a range no value of the type can meet is kept empty."""
    cdef int code = spec.code
    if code == T_FP16 or code == T_FP32 or code == T_FP64 or code == T_BF16:
        spec.f_low = low
        spec.f_high = high
    elif code == T_UINT64:
        if high < 0 or low > 18446744073709551615:
            spec.u_low, spec.u_high = 1, 0
        else:
            spec.u_low = max(low, 0)
            spec.u_high = min(high, 18446744073709551615)
    elif high < -9223372036854775808 or low > 9223372036854775807:
        spec.i_low, spec.i_high = 1, 0
    else:
        spec.i_low = max(low, -9223372036854775808)
        spec.i_high = min(high, 9223372036854775807)
    return 0


cdef Py_ssize_t _first_outside(TensorSpec spec, const char* data, Py_ssize_t n) noexcept nogil:
    """The flat index of the first element outside the spec's range, or -1 (twin: _check_range)."""
    cdef Py_ssize_t i
    cdef int64_t v
    cdef uint64_t u
    cdef double f
    cdef int64_t il = spec.i_low, ih = spec.i_high
    cdef double fl = spec.f_low, fh = spec.f_high
    cdef int code = spec.code
    if code == T_INT64:
        for i in range(n):
            v = (<const int64_t*>data)[i]
            if v < il or v > ih:
                return i
    elif code == T_INT32:
        for i in range(n):
            v = (<const int32_t*>data)[i]
            if v < il or v > ih:
                return i
    elif code == T_INT16:
        for i in range(n):
            v = (<const int16_t*>data)[i]
            if v < il or v > ih:
                return i
    elif code == T_INT8:
        for i in range(n):
            v = (<const int8_t*>data)[i]
            if v < il or v > ih:
                return i
    elif code == T_UINT8 or code == T_BOOL:
        for i in range(n):
            v = (<const uint8_t*>data)[i]
            if v < il or v > ih:
                return i
    elif code == T_UINT16:
        for i in range(n):
            v = (<const uint16_t*>data)[i]
            if v < il or v > ih:
                return i
    elif code == T_UINT32:
        for i in range(n):
            v = (<const uint32_t*>data)[i]
            if v < il or v > ih:
                return i
    elif code == T_UINT64:
        for i in range(n):
            u = (<const uint64_t*>data)[i]
            if u < spec.u_low or u > spec.u_high:
                return i
    else:
        for i in range(n):
            if code == T_FP32:
                f = (<const float*>data)[i]
            elif code == T_FP64:
                f = (<const double*>data)[i]
            elif code == T_FP16:
                f = _float(_f16_to_f32((<const uint16_t*>data)[i]))
            else:
                f = _float((<uint32_t>(<const uint16_t*>data)[i]) << 16)
            if not (f >= fl and f <= fh):  # NaN is outside every range
                return i
    return -1


cdef int _check_range(TensorSpec spec, cnp.ndarray array) except -1:
    cdef Py_ssize_t n = cnp.PyArray_SIZE(array)
    cdef const char* data = <const char*>cnp.PyArray_DATA(array)
    cdef Py_ssize_t bad
    if _without_gil(n * _ITEMSIZE[spec.code]):
        with nogil:
            bad = _first_outside(spec, data, n)
    else:
        bad = _first_outside(spec, data, n)
    if bad >= 0:
        values = <object>array
        if spec.code == T_BF16:  # twin: _bf16_to_f32
            values = (values.astype(np.uint32) << 16).view(np.float32)
        raise messages.range_problem(spec, values, bad)
    return 0


def _as_array(name, value):
    """twin: _as_array (the slow path, for anything that is not an ndarray)."""
    if hasattr(value, "__dlpack__"):
        try:
            return np.from_dlpack(value)
        except (AttributeError, TypeError, ValueError, RuntimeError, BufferError) as exc:
            raise RequestError(f"input {name!r}: cannot view its DLPack tensor: {exc}") from None
    try:
        view = memoryview(value)
    except TypeError:
        raise RequestError(
            f"input {name!r}: expected an array (buffer protocol or DLPack), got {type(value).__name__}"
        ) from None
    try:
        return np.asarray(view)
    except (TypeError, ValueError, NotImplementedError) as exc:
        raise RequestError(f"input {name!r}: cannot view its buffer: {exc}") from None


def _dims_problem(TensorSpec spec, tuple shape):
    """Raise the message for a shape the C check refused (twin: _check_dims)."""
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
    raise AssertionError(f"input {name!r}: shape {list(shape)} refused without a reason")  # pragma: no cover


cdef inline bint _dims_ok(TensorSpec spec, cnp.ndarray array) noexcept:
    cdef int k
    cdef cnp.npy_intp size
    cdef const cnp.npy_intp* shape
    if cnp.PyArray_NDIM(array) != spec.ndim:
        return False
    shape = cnp.PyArray_DIMS(array)
    for k in range(spec.ndim):
        size = shape[k]
        if size == 0:
            return False
        if spec.c_dims[k] == -1:
            if size > spec.c_limits[k]:
                return False
        elif size != spec.c_dims[k]:
            return False
    return True


def validate(specs: Sequence[TensorSpec], tensors: Mapping[str, object]) -> list[NDArray[Any]]:
    """Check one request against the model's inputs before it joins a batch, so that one bad request fails
    alone with a message its client can act on. Returns the request's arrays in spec order, C-contiguous,
    viewed rather than copied whenever they already are (only a non-contiguous array is copied)."""
    return _validate(specs, tensors)


cdef list _validate(object specs, object tensors):
    cdef list arrays = []
    cdef TensorSpec spec
    cdef cnp.ndarray array
    cdef bint ties = False
    for item in specs:
        spec = <TensorSpec?>item
        try:
            value = tensors[spec.name]
        except KeyError:
            taken = ", ".join(s.name for s in specs)
            got = ", ".join(str(key) for key in tensors) or "none"
            raise RequestError(
                f"missing input {spec.name!r}: the model takes {taken}; the request has {got}"
            ) from None
        array = value if cnp.PyArray_Check(value) else _as_array(spec.name, value)
        if not _matches(array, spec.code):
            bits = " (uint16 bit patterns)" if spec.code == T_BF16 else ""
            got = messages.describe((<object>array).dtype)
            raise RequestError(f"input {spec.name!r}: expected {spec.type}{bits} data, got {got}")
        if not _dims_ok(spec, array):
            _dims_problem(spec, (<object>array).shape)
        if not cnp.PyArray_IS_C_CONTIGUOUS(array):
            array = np.ascontiguousarray(array)
        if spec.has_range:
            _check_range(spec, array)
        if spec.same_shape_as is not None:
            ties = True
        arrays.append(array)
    if len(tensors) != len(arrays):
        known = {s.name for s in specs}
        for key in tensors:
            if key not in known:
                taken = ", ".join(s.name for s in specs)
                raise RequestError(f"unexpected input {key!r}: the model takes {taken}")
    if ties and not _ties_hold(specs, arrays):
        messages.check_ties(specs, arrays)  # words what does not hold
    return arrays


cdef bint _ties_hold(object specs, list arrays) except -1:
    """Every ``same_shape_as`` names an input whose array has this one's shape (twin: _check_ties, whose
    checks these are, compared in C on every request)."""
    cdef TensorSpec spec, other
    cdef cnp.ndarray array, paired
    cdef Py_ssize_t k, j
    for k, spec in enumerate(specs):
        if spec.same_shape_as is None:
            continue
        for j, other in enumerate(specs):
            if other.name == spec.same_shape_as:
                break
        else:
            return False
        array = arrays[k]
        paired = arrays[j]
        if cnp.PyArray_NDIM(array) != cnp.PyArray_NDIM(paired) or memcmp(
            cnp.PyArray_DIMS(array), cnp.PyArray_DIMS(paired), cnp.PyArray_NDIM(array) * sizeof(cnp.npy_intp)
        ) != 0:
            return False
    return True


cdef cnp.ndarray _source(object value, Py_ssize_t i, int code, const Py_ssize_t* gear, Py_ssize_t ndim):
    # twin: _source
    cdef cnp.ndarray array
    cdef const cnp.npy_intp* shape
    cdef Py_ssize_t k
    if not cnp.PyArray_Check(value):
        try:
            value = np.asarray(memoryview(value))
        except TypeError:
            raise ValueError(f"gather: source {i} is not an array, got {type(value).__name__}") from None
    array = <cnp.ndarray>value
    if not _matches(array, code):
        got = messages.describe(value.dtype)
        raise ValueError(f"gather: source {i} holds {got} data, expected {_NAMES[code]}")
    shape = cnp.PyArray_DIMS(array)
    if cnp.PyArray_NDIM(array) != ndim:
        raise ValueError(
            f"gather: source {i} has {cnp.PyArray_NDIM(array)} dims {list(value.shape)}, "
            f"the destination {[gear[k] for k in range(ndim)]} has {ndim}"
        )
    for k in range(ndim):
        if shape[k] == 0:
            raise ValueError(
                f"gather: source {i} {list(value.shape)}: dim {k} is 0; every dim needs at least one element"
            )
        if k and shape[k] > gear[k]:
            raise ValueError(
                f"gather: source {i} {list(value.shape)}: dim {k} is {shape[k]}, "
                f"longer than the destination's {gear[k]}"
            )
    if not cnp.PyArray_IS_C_CONTIGUOUS(array):
        array = np.ascontiguousarray(array)
    return array


cdef int _init_pad(Move* mv, char* pad, object pad_value, int code, str what) except -1:
    _typed_value(_number(pad_value, what), code, pad, what)
    mv.pad_value = pad
    mv.pad_zero = _all_zero(pad, _ITEMSIZE[code])
    return 0


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
    cdef Move mv
    cdef char pad[8]
    cdef Py_ssize_t gear[MAX_DIMS]
    cdef Py_ssize_t ndim
    cdef int dst_code, src_code

    # twin: the order of the checks, so that both report the same problem first
    dst_code = _type_code(dst_type, "gather: dst_type")
    src_code = _type_code(src_type, "gather: src_type")
    mv.cast = _cast_code(src_code, dst_code, "gather")
    ndim = _shape(dst_shape, gear, "gather: dst_shape")
    _init_pad(&mv, pad, pad_value, dst_code, "gather: pad_value")
    return _gather_into(dst, gear, ndim, dst_code, src_code, &mv, srcs, -1, 0)


cdef Py_ssize_t _gather_into(
    object dst, const Py_ssize_t* gear, Py_ssize_t ndim, int dst_code, int src_code, Move* mv, object seq,
    Py_ssize_t column, Py_ssize_t offset,
) except -1:
    """gather's copy, its cast and pad already in ``mv``: the sources are ``seq``'s items, or with a
    ``column`` >= 0 item ``column`` of each (a chunk's requests, each a list of arrays), written ``offset``
    bytes into ``dst``; the bytes written."""
    cdef Py_buffer out
    cdef Py_ssize_t nbytes, row_bytes, rows = 0, i, n, k
    cdef Source* sources = NULL
    cdef cnp.ndarray array
    # every array a Source points into, held by this call: the caller's list (or a request's list of arrays)
    # may be changed by another thread while the copy runs without the GIL, and its items freed
    cdef list kept

    nbytes = _ITEMSIZE[dst_code]
    for k in range(ndim):
        nbytes *= gear[k]
    row_bytes = nbytes // gear[0]

    _get_buffer(dst, &out, "gather: dst", True)
    try:
        if out.len - offset < nbytes:
            gear_list = [gear[k] for k in range(ndim)]
            held = max(out.len - offset, 0)
            raise ValueError(
                f"gather: dst holds {held} bytes, the destination {gear_list} {_NAMES[dst_code]} needs {nbytes}"
            )
        if type(seq) is not tuple:  # a snapshot: _source may run Python code, which may change a list
            seq = tuple(seq)
        n = len(seq)
        kept = [None] * n
        sources = <Source*>PyMem_Malloc(max(n, 1) * sizeof(Source))
        if sources == NULL:
            raise MemoryError()
        for i in range(n):
            array = _source(seq[i] if column < 0 else seq[i][column], i, src_code, gear, ndim)
            kept[i] = array
            sources[i].data = cnp.PyArray_BYTES(array)
            sources[i].shape = cnp.PyArray_DIMS(array)
            rows += sources[i].shape[0]
        if rows > gear[0]:
            raise ValueError(
                f"gather: the sources hold {rows} rows in total, more than the destination's {gear[0]}"
            )

        mv.ndim = <int>ndim
        mv.into_gear = True
        mv.src_item = _ITEMSIZE[src_code]
        mv.dst_item = _ITEMSIZE[dst_code]
        if _without_gil(nbytes):
            with nogil:
                i = _gather_all(mv, sources, n, gear, <char*>out.buf + offset, row_bytes, rows)
        else:
            i = _gather_all(mv, sources, n, gear, <char*>out.buf + offset, row_bytes, rows)
        if i >= 0:
            bad = (<const int64_t*>sources[i].data)[mv.bad]
            where = _unravel(mv.bad, [sources[i].shape[k] for k in range(ndim)])
            raise ValueError(
                f"cannot cast int64 to int32: source {i} holds {bad} at [{where}], "
                f"which does not fit in int32"
            )
        return nbytes
    finally:
        PyMem_Free(sources)
        PyBuffer_Release(&out)


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
    cdef Move mv
    cdef Py_buffer view
    cdef Py_ssize_t full[MAX_DIMS]
    cdef cnp.npy_intp dims[MAX_DIMS]
    cdef Py_ssize_t ndim, nbytes, row_bytes, total = 0, i, k, n, count, size, out_bytes
    cdef int src_code, out_code, status
    cdef cnp.ndarray out
    cdef const char* base
    cdef list outputs

    src_code = _type_code(src_type, "scatter: src_type")
    out_code = _type_code(out_type, "scatter: out_type")
    mv.cast = _cast_code(src_code, out_code, "scatter")
    ndim = _shape(src_shape, full, "scatter: src_shape")
    nbytes = _ITEMSIZE[src_code]
    for k in range(ndim):
        nbytes *= full[k]
    row_bytes = nbytes // full[0]

    _get_buffer(src, &view, "scatter: src", False)
    try:
        if view.len < nbytes:
            full_list = [full[k] for k in range(ndim)]
            raise ValueError(
                f"scatter: src holds {view.len} bytes, the source {full_list} {src_type} needs {nbytes}"
            )
        counts = rows if type(rows) is list or type(rows) is tuple else list(rows)
        parts = shapes if type(shapes) is list or type(shapes) is tuple else list(shapes)
        n = len(counts)
        if n != len(parts):
            raise ValueError(f"scatter: {n} row counts but {len(parts)} shapes; give one of each per request")
        # twin: all checks first, in request order
        for i in range(n):
            count = operator.index(counts[i])
            trimmed = parts[i] if type(parts[i]) is tuple else tuple(parts[i])
            if count < 1:
                raise ValueError(f"scatter: request {i} has {count} rows; every request has at least one")
            if len(trimmed) != ndim - 1:
                raise ValueError(
                    f"scatter: request {i} shape {list(trimmed)} has {len(trimmed)} dims, the source "
                    f"{[full[k] for k in range(ndim)]} has {ndim - 1} after the row dim"
                )
            for k in range(ndim - 1):
                size = operator.index(trimmed[k])
                if not 0 <= size <= full[k + 1]:
                    raise ValueError(
                        f"scatter: request {i} shape {list(trimmed)}: dim {k + 1} is {size}, "
                        f"outside the source's 0..{full[k + 1]}"
                    )
            total += count
        if total > full[0]:
            raise ValueError(
                f"scatter: the requests own {total} rows in total, more than the source's {full[0]}"
            )

        mv.ndim = <int>ndim
        mv.into_gear = False
        mv.src_item = _ITEMSIZE[src_code]
        mv.dst_item = _ITEMSIZE[out_code]
        base = <const char*>view.buf
        outputs = []
        for i in range(n):
            trimmed = parts[i]
            dims[0] = counts[i]
            out_bytes = dims[0] * mv.dst_item
            for k in range(1, ndim):
                dims[k] = trimmed[k - 1]
                out_bytes *= dims[k]
            out = <cnp.ndarray>cnp.PyArray_EMPTY(<int>ndim, dims, _TYPENUM[out_code], 0)
            for k in range(ndim):
                mv.extent[k] = dims[k]
                mv.gear[k] = full[k]
            mv.gear[0] = dims[0]
            _plan(&mv)
            mv.src_base = base
            if _without_gil(out_bytes):
                with nogil:
                    status = _move(&mv, 0, base, cnp.PyArray_BYTES(out))
            else:
                status = _move(&mv, 0, base, cnp.PyArray_BYTES(out))
            if status < 0:
                bad = (<const int64_t*>base)[mv.bad]
                where = _unravel(mv.bad, [mv.gear[k] for k in range(ndim)])
                raise ValueError(
                    f"cannot cast int64 to int32: request {i} holds {bad} at [{where}], "
                    f"which does not fit in int32"
                )
            outputs.append(out)
            base += dims[0] * row_bytes
        return outputs
    finally:
        PyBuffer_Release(&view)


# --- one window's executes: the planner (twin: the same section) ------------------------------------------
#
# The engine's per-execute bookkeeping in C: which requests share a gear, the bytes each copy moves, and each
# request's outputs back. The Planner's tables are worked out once, by _fastpath_tables.PlannerTables with
# this module's own type checks (the twin builds its own with its checks, in the same words), and copied
# into C arrays here; plan, stage and split then read only those and the request arrays' own dims.


class _Types:
    """This module's words on type names, for the planner's tables (``_fastpath_tables.TypeChecks``)."""

    @staticmethod
    def itemsize(type_name: object, what: str) -> int:
        return _ITEMSIZE[_type_code(type_name, what)]

    @staticmethod
    def cast(src_type: str, dst_type: str, what: str) -> None:
        _cast_code(_type_code(src_type, what), _type_code(dst_type, what), what)

    @staticmethod
    def pad(value: float, type_name: str, what: str) -> None:
        cdef char[8] scratch
        _typed_value(value, _type_code(type_name, what), scratch, what)


cdef class Chunk:
    """One execute: requests that share a gear, their rows stacked in the order they came (twin: Chunk,
    whose docstring says what each attribute holds). Made by Planner.plan and Planner.chunk only."""

    cdef readonly list indices
    cdef public object arrays
    cdef readonly tuple need
    cdef readonly Py_ssize_t gear
    cdef readonly Py_ssize_t rows
    cdef readonly Py_ssize_t elements
    cdef readonly list in_bytes
    cdef readonly list outputs
    cdef readonly list out_index
    cdef readonly list out_bytes
    cdef readonly object wanted
    cdef readonly bint staged
    cdef Py_ssize_t d2h  # sum of out_bytes, for the planner's tally
    cdef Py_ssize_t count  # requests
    cdef Py_ssize_t width  # flat dims per request
    cdef Py_ssize_t* needs  # count x width: each request's own dims, every input's in order
    cdef tuple ranks  # dims per input

    def __cinit__(self):
        self.needs = NULL

    def __init__(self, *args, **kwargs):
        raise TypeError("a Chunk is made by Planner.plan or Planner.chunk")

    def __dealloc__(self):
        PyMem_Free(self.needs)

    @property
    def shapes(self) -> list:
        """Per request, the shape of each of its inputs (twin: a list kept from plan)."""
        cdef Py_ssize_t i, at, d
        out = []
        for i in range(self.count):
            at = i * self.width
            dims = []
            for rank in self.ranks:
                dims.append(tuple([self.needs[at + d] for d in range(<Py_ssize_t>rank)]))
                at += <Py_ssize_t>rank
            out.append(tuple(dims))
        return out

    def __repr__(self) -> str:
        return f"Chunk(indices={self.indices}, gear={self.gear}, need={self.need}, rows={self.rows})"


cdef inline void* _table(Py_ssize_t n, Py_ssize_t item) except NULL:
    cdef void* p = PyMem_Malloc(max(n, 1) * item)
    if p == NULL:
        raise MemoryError()
    return p


cdef class Planner:
    """One model's executes, planned and moved without Python per request (twin: Planner, whose docstring
    says what each argument means)."""

    cdef list specs
    cdef list om_type_names
    cdef list records  # the gears as given, for launch_args
    cdef object refusal
    cdef bint batched
    cdef double pad
    cdef tuple ranks
    cdef list names  # config outputs
    cdef list every  # config positions of every output
    cdef list every_index  # their OM indices
    cdef list gear_in_bytes  # per gear: bytes per input
    cdef list gear_out_bytes  # per gear: bytes per output (config order)
    cdef list gear_out_dims  # per gear: dims per output (config order), tuples, for scatter
    cdef Py_ssize_t n_in, width, n_gears, n_out
    cdef Py_ssize_t* flat  # n_gears x width: every gear's input dims
    cdef Py_ssize_t* gear_rows  # n_gears
    cdef char* exact  # width
    cdef char* rows_at  # width
    cdef Py_ssize_t* in_offset  # n_in: where input k's dims start in a flat need
    cdef int* in_ndim  # n_in
    cdef int* in_code  # n_in: the config's type
    cdef int* in_om_code  # n_in: the OM's
    cdef char* pads  # n_in x 8: the pad value as one element of each input's OM type
    cdef int* out_j  # n_out: OM index
    cdef int* out_code  # n_out
    cdef int* out_om_code  # n_out
    cdef int* out_ndim  # n_out
    cdef Py_ssize_t* out_dims  # n_gears x n_out x MAX_DIMS
    cdef Py_ssize_t* out_full  # n_gears x n_out: bytes of each output at each gear
    cdef char* out_rows  # n_gears x n_out: output dim 0 is the gear's rows
    cdef int* tie_start  # n_out + 1: output k's ties are tie_start[k] .. tie_start[k + 1]
    cdef int* ties  # 3 per tie: output dim, input, input dim
    # the tally of what was staged (twin: Planner.tally)
    cdef Py_ssize_t* staged_by_gear  # n_gears
    cdef Py_ssize_t staged_rows, staged_elements, staged_d2h

    def __cinit__(self):
        self.flat = NULL
        self.gear_rows = NULL
        self.exact = NULL
        self.rows_at = NULL
        self.in_offset = NULL
        self.in_ndim = NULL
        self.in_code = NULL
        self.in_om_code = NULL
        self.pads = NULL
        self.out_j = NULL
        self.out_code = NULL
        self.out_om_code = NULL
        self.out_ndim = NULL
        self.out_dims = NULL
        self.out_full = NULL
        self.out_rows = NULL
        self.tie_start = NULL
        self.ties = NULL
        self.staged_by_gear = NULL

    def __dealloc__(self):
        PyMem_Free(self.flat)
        PyMem_Free(self.gear_rows)
        PyMem_Free(self.exact)
        PyMem_Free(self.rows_at)
        PyMem_Free(self.in_offset)
        PyMem_Free(self.in_ndim)
        PyMem_Free(self.in_code)
        PyMem_Free(self.in_om_code)
        PyMem_Free(self.pads)
        PyMem_Free(self.out_j)
        PyMem_Free(self.out_code)
        PyMem_Free(self.out_om_code)
        PyMem_Free(self.out_ndim)
        PyMem_Free(self.out_dims)
        PyMem_Free(self.out_full)
        PyMem_Free(self.out_rows)
        PyMem_Free(self.tie_start)
        PyMem_Free(self.ties)
        PyMem_Free(self.staged_by_gear)

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
        """Checks the arguments once (with the twin's own checks) and keeps what plan, stage and split read
        in C arrays."""
        cdef Py_ssize_t g, k, d, at, n_ties
        cdef Move mv
        t = PlannerTables(inputs, outputs, gears, batched, exact, pad_value, TensorSpec, _Types)
        self.records = t.records
        self.specs = t.specs
        self.om_type_names = t.om_types
        self.refusal = refusal
        self.batched = t.batched
        self.pad = t.pad
        self.ranks = tuple(t.ranks)
        self.names = t.names
        self.every = t.every
        self.every_index = t.every_index
        self.n_in = len(t.specs)
        self.width = t.width
        self.n_gears = len(t.gears)
        self.n_out = len(t.outputs)
        self.gear_in_bytes = [gear.in_bytes for gear in t.gears]
        self.gear_out_bytes = [gear.out_bytes for gear in t.gears]
        self.gear_out_dims = [[gear.output_dims[o[1]] for o in t.outputs] for gear in t.gears]

        self.flat = <Py_ssize_t*>_table(self.n_gears * self.width, sizeof(Py_ssize_t))
        self.gear_rows = <Py_ssize_t*>_table(self.n_gears, sizeof(Py_ssize_t))
        self.staged_by_gear = <Py_ssize_t*>_table(self.n_gears, sizeof(Py_ssize_t))
        memset(self.staged_by_gear, 0, max(self.n_gears, 1) * sizeof(Py_ssize_t))
        self.staged_rows = self.staged_elements = self.staged_d2h = 0
        for g, gear in enumerate(t.gears):
            for d, value in enumerate(gear.flat):
                self.flat[g * self.width + d] = value
            self.gear_rows[g] = gear.rows
        self.exact = <char*>_table(self.width, 1)
        self.rows_at = <char*>_table(self.width, 1)
        for d in range(self.width):
            self.exact[d] = t.exact[d]
            self.rows_at[d] = t.rows_at[d]
        self.in_offset = <Py_ssize_t*>_table(self.n_in, sizeof(Py_ssize_t))
        self.in_ndim = <int*>_table(self.n_in, sizeof(int))
        self.in_code = <int*>_table(self.n_in, sizeof(int))
        self.in_om_code = <int*>_table(self.n_in, sizeof(int))
        self.pads = <char*>_table(self.n_in * 8, 1)
        at = 0
        for k, spec in enumerate(t.specs):
            self.in_offset[k] = at
            self.in_ndim[k] = t.ranks[k]
            at += t.ranks[k]
            self.in_code[k] = (<TensorSpec>spec).code
            self.in_om_code[k] = _TYPE_CODES[t.om_types[k]]
            _typed_value(self.pad, self.in_om_code[k], self.pads + 8 * k, "Planner: pad_value")
        self.out_j = <int*>_table(self.n_out, sizeof(int))
        self.out_code = <int*>_table(self.n_out, sizeof(int))
        self.out_om_code = <int*>_table(self.n_out, sizeof(int))
        self.out_ndim = <int*>_table(self.n_out, sizeof(int))
        self.tie_start = <int*>_table(self.n_out + 1, sizeof(int))
        n_ties = sum(len(o[4]) for o in t.outputs)
        self.ties = <int*>_table(3 * n_ties, sizeof(int))
        at = 0
        for k, (name, j, out_type, out_om_type, tied) in enumerate(t.outputs):
            self.out_j[k] = j
            self.out_code[k] = _TYPE_CODES[out_type]
            self.out_om_code[k] = _TYPE_CODES[out_om_type]
            self.out_ndim[k] = len(t.gears[0].output_dims[j])
            self.tie_start[k] = at
            for out_d, in_k, in_d in tied:
                self.ties[3 * at] = out_d
                self.ties[3 * at + 1] = in_k
                self.ties[3 * at + 2] = in_d
                at += 1
        self.tie_start[self.n_out] = at
        self.out_dims = <Py_ssize_t*>_table(self.n_gears * self.n_out * MAX_DIMS, sizeof(Py_ssize_t))
        self.out_full = <Py_ssize_t*>_table(self.n_gears * self.n_out, sizeof(Py_ssize_t))
        self.out_rows = <char*>_table(self.n_gears * self.n_out, 1)
        for g, gear in enumerate(t.gears):
            for k, o in enumerate(t.outputs):
                dims = gear.output_dims[o[1]]
                if len(dims) != self.out_ndim[k]:
                    raise ValueError(
                        f"Planner: gear {g}: output {o[0]!r} has {len(dims)} dims, {self.out_ndim[k]} at gear 0"
                    )
                for d, value in enumerate(dims):
                    self.out_dims[(g * self.n_out + k) * MAX_DIMS + d] = value
                self.out_full[g * self.n_out + k] = gear.out_bytes[k]
                self.out_rows[g * self.n_out + k] = gear.out_rows[k]

    # -- the pure part: needs and gears ----------------------------------------------------------------

    cdef Py_ssize_t _choose(self, const Py_ssize_t* need) noexcept:
        cdef Py_ssize_t g, d, v
        cdef const Py_ssize_t* f
        for g in range(self.n_gears):
            f = self.flat + g * self.width
            for d in range(self.width):
                v = f[d]
                if v < need[d] or (self.exact[d] and v != need[d]):
                    break
            else:
                return g
        return -1

    cdef void _merge(self, const Py_ssize_t* a, const Py_ssize_t* b, Py_ssize_t* out) noexcept:
        cdef Py_ssize_t d
        for d in range(self.width):
            if self.rows_at[d]:
                out[d] = a[d] + b[d]
            elif self.exact[d]:
                out[d] = a[d] if a[d] == b[d] else -1
            else:
                out[d] = a[d] if a[d] >= b[d] else b[d]

    def choose(self, need: Sequence[int]) -> int | None:
        """The position of the cheapest gear that covers ``need`` (flat), or None."""
        cdef Py_ssize_t d, g
        cdef Py_ssize_t* c_need = <Py_ssize_t*>_table(self.width, sizeof(Py_ssize_t))
        try:
            values = tuple(need)
            for d in range(self.width):
                c_need[d] = operator.index(values[d]) if d < len(values) else 0
            g = self._choose(c_need)
            return None if g < 0 else g
        finally:
            PyMem_Free(c_need)

    cdef object _wanted(self, object wanted, Py_ssize_t n):
        """twin: Planner._wanted."""
        cdef Py_ssize_t i, k, m
        cdef bint complete
        if wanted is None:
            return None
        asked = wanted if type(wanted) is list or type(wanted) is tuple else list(wanted)
        m = len(asked)
        complete = m >= n
        i = 0
        while complete and i < n:
            names = asked[i]
            if names is not None:
                for k in range(self.n_out):
                    if self.names[k] not in names:
                        complete = False
                        break
            i += 1
        if complete:
            return None
        lists = []
        for i in range(n):
            names = asked[i] if i < m else None
            if names is None:
                lists.append(self.every)
            else:
                lists.append([k for k in range(self.n_out) if self.names[k] in names])
        return lists

    cdef object _refuse(self, list arrays):
        if self.refusal is not None:
            return self.refusal(arrays)
        shapes = ", ".join(f"{spec.name} {list(a.shape)}" for spec, a in zip(self.specs, arrays))
        return f"no gear of the model fits this request ({shapes})"

    def plan(
        self, requests: Sequence[Mapping[str, object]], wanted: Sequence[Any] | None = None
    ) -> tuple[list[Chunk], list[tuple[int, RequestError]]]:
        """The window's chunks, each on the cheapest gear that covers it, and the requests refused with why
        (twin: Planner.plan)."""
        cdef Py_ssize_t n, i, g, d, k, gear, n_groups = 0
        cdef Py_ssize_t width = self.width
        cdef Py_ssize_t* own_needs = NULL
        cdef Py_ssize_t* group_needs = NULL
        cdef Py_ssize_t* group_gear = NULL
        cdef Py_ssize_t* group_of = NULL
        cdef Py_ssize_t* own
        cdef Py_ssize_t* merged
        cdef bint placed
        cdef cnp.ndarray array
        cdef const cnp.npy_intp* dims
        seq = requests if type(requests) is list or type(requests) is tuple else list(requests)
        n = len(seq)
        per_request = self._wanted(wanted, n)
        cdef list errors = []
        cdef list validated = [None] * n
        try:
            own_needs = <Py_ssize_t*>_table(n * width, sizeof(Py_ssize_t))
            group_needs = <Py_ssize_t*>_table((n + 1) * width, sizeof(Py_ssize_t))
            group_gear = <Py_ssize_t*>_table(n, sizeof(Py_ssize_t))
            group_of = <Py_ssize_t*>_table(n, sizeof(Py_ssize_t))
            merged = group_needs + n * width  # scratch: a group's need with one more request
            for i in range(n):
                group_of[i] = -1
                try:
                    arrays = _validate(self.specs, seq[i])
                except RequestError as exc:
                    errors.append((i, _detached(exc)))
                    continue
                own = own_needs + i * width
                for k in range(self.n_in):
                    array = <cnp.ndarray>(<list>arrays)[k]
                    dims = cnp.PyArray_DIMS(array)
                    for d in range(self.in_ndim[k]):
                        own[self.in_offset[k] + d] = dims[d]
                placed = False
                if self.batched:
                    for g in range(n_groups):
                        self._merge(group_needs + g * width, own, merged)
                        gear = self._choose(merged)
                        if gear >= 0:
                            memcpy(group_needs + g * width, merged, width * sizeof(Py_ssize_t))
                            group_gear[g] = gear
                            group_of[i] = g
                            placed = True
                            break
                if not placed:
                    gear = self._choose(own)
                    if gear < 0:
                        errors.append((i, RequestError(self._refuse(arrays))))
                        continue
                    memcpy(group_needs + n_groups * width, own, width * sizeof(Py_ssize_t))
                    group_gear[n_groups] = gear
                    group_of[i] = n_groups
                    n_groups += 1
                validated[i] = arrays
            chunks = []
            for g in range(n_groups):
                members = [i for i in range(n) if group_of[i] == g]
                chunks.append(
                    self._chunk(
                        group_needs + g * width, group_gear[g], members, own_needs, validated, per_request, False
                    )
                )
            return chunks, errors
        finally:
            PyMem_Free(own_needs)
            PyMem_Free(group_needs)
            PyMem_Free(group_gear)
            PyMem_Free(group_of)

    cdef Chunk _chunk(
        self,
        const Py_ssize_t* need,
        Py_ssize_t gear,
        list members,
        const Py_ssize_t* needs,
        list arrays,
        object per_request,
        bint staged,
    ):
        """A chunk of ``members`` (request indices into ``needs`` and ``arrays``); ``per_request`` maps a
        request index to the config positions it wants, or is None."""
        cdef Chunk c = Chunk.__new__(Chunk)
        cdef Py_ssize_t m, i, k, d, count = len(members), width = self.width, elements = 0, prod, rows
        cdef Py_ssize_t base = gear * self.n_out
        cdef const Py_ssize_t* own
        cdef char[MAX_DIMS] union_
        c.count = count
        c.width = width
        c.ranks = self.ranks
        c.needs = <Py_ssize_t*>_table(count * width, sizeof(Py_ssize_t))
        for m in range(count):
            i = members[m]
            own = needs + i * width
            memcpy(c.needs + m * width, own, width * sizeof(Py_ssize_t))
            for k in range(self.n_in):
                prod = 1
                for d in range(self.in_ndim[k]):
                    prod *= own[self.in_offset[k] + d]
                elements += prod
        c.indices = members
        c.arrays = [arrays[i] for i in members]
        c.need = tuple([need[d] for d in range(width)])
        c.gear = gear
        rows = need[0] if self.batched else self.gear_rows[gear]
        c.rows = rows
        c.elements = elements
        c.in_bytes = self.gear_in_bytes[gear]
        c.staged = staged
        if per_request is None:
            c.wanted = None
            c.outputs = self.every
        else:
            c.wanted = [per_request[i] for i in members]
            union = set()
            for positions in c.wanted:
                union.update(positions)
            c.outputs = sorted(union)
        every = c.outputs == self.every
        c.out_index = self.every_index if every else [self.out_j[<Py_ssize_t>k] for k in c.outputs]
        full = self.gear_out_bytes[gear]
        if not self.batched or rows >= self.gear_rows[gear]:
            c.out_bytes = full if every else [full[k] for k in c.outputs]
        else:
            c.out_bytes = [
                self.out_full[base + <Py_ssize_t>k] // self.gear_rows[gear] * rows
                if self.out_rows[base + <Py_ssize_t>k]
                else self.out_full[base + <Py_ssize_t>k]
                for k in c.outputs
            ]
        c.d2h = 0
        for nbytes in c.out_bytes:
            c.d2h += <Py_ssize_t>nbytes
        return c

    def chunk(
        self,
        indices: Sequence[int],
        arrays: Sequence[Sequence[NDArray[Any]]],
        wanted: Sequence[Sequence[int]] | None = None,
        *,
        staged: bool = False,
    ) -> Chunk:
        """One chunk of these requests together, a failed execute's requests run again (twin:
        Planner.chunk)."""
        cdef Py_ssize_t m, d, count, width = self.width
        cdef Py_ssize_t* needs = NULL
        cdef Py_ssize_t* need = NULL
        cdef Py_ssize_t* merged = NULL
        if not indices or len(indices) != len(arrays):
            raise ValueError(f"chunk: {len(indices)} indices for {len(arrays)} requests; give one per request")
        if wanted is not None and len(wanted) != len(indices):
            raise ValueError(f"chunk: {len(wanted)} wanted lists for {len(indices)} requests")
        count = len(indices)
        try:
            needs = <Py_ssize_t*>_table(count * width, sizeof(Py_ssize_t))
            need = <Py_ssize_t*>_table(width, sizeof(Py_ssize_t))
            merged = <Py_ssize_t*>_table(width, sizeof(Py_ssize_t))
            requests = []
            for m in range(count):
                i = indices[m]
                request = list(arrays[m])
                if len(request) != self.n_in:
                    raise ValueError(
                        f"chunk: request {i} has {len(request)} arrays, the model {self.n_in} inputs"
                    )
                own = tuple([operator.index(v) for a in request for v in np.shape(a)])
                if len(own) != width:
                    raise ValueError(f"chunk: request {i} has {len(own)} dims in all, the inputs {width}")
                for d in range(width):
                    needs[m * width + d] = own[d]
                if m == 0:
                    memcpy(need, needs, width * sizeof(Py_ssize_t))
                elif self.batched:
                    self._merge(need, needs + m * width, merged)
                    memcpy(need, merged, width * sizeof(Py_ssize_t))
                else:
                    for d in range(width):
                        need[d] = -1
                requests.append(request)
            gear = self._choose(need)
            if gear < 0:
                need_list = [need[d] for d in range(width)]
                raise ValueError(f"chunk: no gear takes requests {list(indices)} together (need {need_list})")
            per_request = None if wanted is None else [list(w) for w in wanted]
            c = self._chunk(need, gear, list(range(count)), needs, requests, per_request, staged)
            c.indices = [operator.index(i) for i in indices]
            return c
        finally:
            PyMem_Free(needs)
            PyMem_Free(need)
            PyMem_Free(merged)

    # -- the byte moves: into a lane's staging, and back out of it ----------------------------------------

    def extend(self, Chunk chunk, Chunk more) -> Chunk | None:
        """``chunk`` with ``more``'s requests after its own, as one execute, or None (twin: Planner.extend)."""
        cdef Py_ssize_t d, width = self.width, gear, count, n1
        cdef Py_ssize_t* needs = NULL
        cdef Py_ssize_t* a = NULL
        cdef Py_ssize_t* b = NULL
        cdef Py_ssize_t* need = NULL
        if not self.batched or chunk.staged or more.staged or more.arrays is None:
            return None
        n1 = chunk.count
        count = n1 + more.count
        try:
            a = <Py_ssize_t*>_table(width, sizeof(Py_ssize_t))
            b = <Py_ssize_t*>_table(width, sizeof(Py_ssize_t))
            need = <Py_ssize_t*>_table(width, sizeof(Py_ssize_t))
            for d in range(width):
                a[d] = chunk.need[d]
                b[d] = more.need[d]
            self._merge(a, b, need)
            gear = self._choose(need)
            if gear < 0:
                return None
            for d in range(width):
                if not self.rows_at[d] and self.flat[chunk.gear * width + d] != self.flat[gear * width + d]:
                    return None
            needs = <Py_ssize_t*>_table(count * width, sizeof(Py_ssize_t))
            memcpy(needs, chunk.needs, n1 * width * sizeof(Py_ssize_t))
            memcpy(needs + n1 * width, more.needs, more.count * width * sizeof(Py_ssize_t))
            arrays = (chunk.arrays if chunk.arrays is not None else [None] * n1) + list(more.arrays)
            if chunk.wanted is None and more.wanted is None:
                per_request = None
            else:
                per_request = [
                    *(chunk.wanted if chunk.wanted is not None else [self.every] * n1),
                    *(more.wanted if more.wanted is not None else [self.every] * more.count),
                ]
            merged = self._chunk(need, gear, list(range(count)), needs, arrays, per_request, False)
            merged.indices = chunk.indices + more.indices
            return merged
        finally:
            PyMem_Free(a)
            PyMem_Free(b)
            PyMem_Free(need)
            PyMem_Free(needs)

    def stage(self, Chunk chunk, staging: Sequence[object], first: int = 0) -> None:
        """Gather ``chunk``'s requests (from ``first`` on) into ``staging`` at its gear, padded and cast to the
        OM's types (twin: Planner.stage)."""
        cdef Move mv
        cdef Py_ssize_t k, d, m, row, offset, start = operator.index(first)
        cdef Py_ssize_t gear_dims[MAX_DIMS]
        cdef int src_code, dst_code, ndim
        if chunk.arrays is None:
            raise ValueError("stage: the chunk's request arrays were released; it cannot be staged again")
        if not 0 <= start < chunk.count:
            raise ValueError(f"stage: first is {start}, but the chunk has {chunk.count} requests")
        sources = chunk.arrays[start:] if start else chunk.arrays
        if start:
            for arrays in sources:
                if arrays is None:
                    raise ValueError("stage: a request after first was released; it cannot be staged again")
        buffers = staging if type(staging) is list or type(staging) is tuple else list(staging)
        if len(buffers) != self.n_in:
            raise ValueError(f"stage: {len(buffers)} staging buffers for {self.n_in} inputs")
        for k in range(self.n_in):
            dst_code = self.in_om_code[k]
            src_code = dst_code if chunk.staged else self.in_code[k]
            mv.cast = _cast_code(src_code, dst_code, "gather")
            mv.pad_value = self.pads + 8 * k
            mv.pad_zero = _all_zero(mv.pad_value, _ITEMSIZE[dst_code])
            ndim = self.in_ndim[k]
            memcpy(gear_dims, self.flat + chunk.gear * self.width + self.in_offset[k], ndim * sizeof(Py_ssize_t))
            row = 0
            for m in range(start):
                row += chunk.needs[m * self.width + self.in_offset[k]]
            offset = row * _ITEMSIZE[dst_code]
            for d in range(1, ndim):
                offset *= gear_dims[d]
            gear_dims[0] -= row
            _gather_into(buffers[k], gear_dims, ndim, dst_code, src_code, &mv, sources, k, offset)

    def launch_args(self, Chunk chunk) -> tuple[Any, list[int], list[int], list[int]]:
        """What launching ``chunk`` copies (twin: Planner.launch_args)."""
        return self.records[chunk.gear], chunk.in_bytes, chunk.out_index, chunk.out_bytes

    def count(self, Chunk chunk) -> None:
        """Count ``chunk`` as one execute (twin: Planner.count)."""
        self.staged_by_gear[chunk.gear] += 1
        self.staged_rows += chunk.rows
        self.staged_elements += chunk.elements
        self.staged_d2h += chunk.d2h

    def tally(self) -> tuple[list[int], int, int, int]:
        """The executes ``count`` has counted (twin: Planner.tally)."""
        return (
            [self.staged_by_gear[g] for g in range(self.n_gears)],
            self.staged_rows,
            self.staged_elements,
            self.staged_d2h,
        )

    def split(
        self, Chunk chunk, staging: Sequence[NDArray[Any]], views: bool = False
    ) -> tuple[list[dict[str, NDArray[Any]]], bool]:
        """Per request of ``chunk``, a dict of the outputs it asked for, and whether any is a view of the
        staging (twin: Planner.split)."""
        cdef Py_ssize_t m, d, t, n_buffers, count = chunk.count, width = self.width, row
        cdef Py_ssize_t k, j, nbytes, gear = chunk.gear
        cdef int ndim
        cdef bint lent = False
        cdef const Py_ssize_t* full
        cdef const Py_ssize_t* own
        cdef Py_ssize_t* rows = NULL
        cdef Py_ssize_t* shapes = NULL
        cdef Py_ssize_t* shape
        cdef Py_ssize_t value_d
        cdef cnp.ndarray buffer
        buffers = staging if type(staging) is list or type(staging) is tuple else list(staging)
        n_buffers = len(buffers)
        cdef list outputs = [{} for _ in range(count)]
        wanted = chunk.wanted
        try:
            rows = <Py_ssize_t*>_table(count, sizeof(Py_ssize_t))
            shapes = <Py_ssize_t*>_table(count * MAX_DIMS, sizeof(Py_ssize_t))
            for item in chunk.outputs:
                k = item
                j = self.out_j[k]
                name = self.names[k]
                if not 0 <= j < n_buffers:
                    raise ValueError(
                        f"split: output {name!r} is OM output {j}, but {n_buffers} staging buffers"
                    )
                value = buffers[j]
                if (
                    not cnp.PyArray_Check(value)
                    or cnp.PyArray_TYPE(<cnp.ndarray>value) != cnp.NPY_UINT8
                    or not cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>value)
                ):
                    raise ValueError(f"split: staging {j} must be a C-contiguous numpy uint8 array")
                buffer = <cnp.ndarray>value
                ndim = self.out_ndim[k]
                full = self.out_dims + (gear * self.n_out + k) * MAX_DIMS
                nbytes = self.out_full[gear * self.n_out + k]
                if cnp.PyArray_SIZE(buffer) < nbytes:
                    raise ValueError(
                        f"split: staging {j} holds {cnp.PyArray_SIZE(buffer)} bytes, output {name!r} "
                        f"{[full[d] for d in range(ndim)]} needs {nbytes}"
                    )
                for m in range(count):
                    own = chunk.needs + m * width
                    shape = shapes + m * MAX_DIMS  # the request's dims 1.. of this output
                    for d in range(1, ndim):
                        shape[d - 1] = full[d]
                    row = full[0]
                    for t in range(self.tie_start[k], self.tie_start[k + 1]):
                        d = self.ties[3 * t]
                        value_d = own[self.in_offset[self.ties[3 * t + 1]] + self.ties[3 * t + 2]]
                        if d == 0:
                            row = value_d
                        else:
                            shape[d - 1] = value_d
                    rows[m] = own[0] if self.batched else row
                parts = None
                if views and self.out_om_code[k] == self.out_code[k]:
                    parts = _views(buffer, full, ndim, self.out_code[k], count, rows, shapes)
                if parts is None:
                    try:
                        parts = scatter(
                            buffer,
                            self.gear_out_dims[gear][k],
                            _NAMES[self.out_om_code[k]],
                            _NAMES[self.out_code[k]],
                            [rows[m] for m in range(count)],
                            [tuple([shapes[m * MAX_DIMS + d] for d in range(ndim - 1)]) for m in range(count)],
                        )
                    except ValueError as exc:
                        raise ValueError(f"output {name!r}: {exc}") from None
                else:
                    lent = True
                for m in range(count):
                    if wanted is None or item in wanted[m]:
                        (<dict>outputs[m])[name] = (<list>parts)[m]
            return outputs, lent
        finally:
            PyMem_Free(rows)
            PyMem_Free(shapes)


cdef object _views(
    cnp.ndarray buffer, const Py_ssize_t* full, int ndim, int code, Py_ssize_t count, const Py_ssize_t* rows,
    const Py_ssize_t* shapes,
):
    """Each request's part of a gear-shaped output in ``buffer`` as a view (the strides a numpy slice of the
    whole would have); None when one is not contiguous or does not fit (twin: _views)."""
    cdef cnp.npy_intp dims[MAX_DIMS]
    cdef cnp.npy_intp strides[MAX_DIMS]
    cdef cnp.npy_intp expected
    cdef Py_ssize_t m, d, row = 0, n
    cdef Py_ssize_t item = _ITEMSIZE[code]
    cdef int flags = cnp.NPY_ARRAY_WRITEABLE if cnp.PyArray_ISWRITEABLE(buffer) else 0
    cdef char* data = cnp.PyArray_BYTES(buffer)
    strides[ndim - 1] = item
    for d in range(ndim - 2, -1, -1):
        strides[d] = strides[d + 1] * full[d + 1]
    parts = []
    for m in range(count):
        n = rows[m]
        if row + n > full[0]:
            return None
        dims[0] = n
        for d in range(1, ndim):
            dims[d] = shapes[m * MAX_DIMS + d - 1]
            if dims[d] > full[d]:
                return None
        expected = item  # numpy's C-contiguity: dims of length 1 do not count
        for d in range(ndim - 1, -1, -1):
            if dims[d] != 1:
                if strides[d] != expected:
                    return None
                expected *= dims[d]
        part = cnp.PyArray_New(
            np.ndarray, ndim, dims, _TYPENUM[code], strides, data + row * strides[0], 0, flags, None
        )
        cnp.set_array_base(<cnp.ndarray>part, buffer)
        parts.append(part)
        row += n
    return parts


cdef object _detached(object exc):
    """twin: _detached."""
    exc.__traceback__ = None
    exc.__context__ = None
    exc.__cause__ = None
    return exc


# --- bf16 through DLPack (twin: the same section, with ctypes) ----------------------------------------------

cdef extern from "Python.h":
    void Py_IncRef(PyObject*)
    void Py_DecRef(PyObject*)
    void PyErr_Fetch(PyObject**, PyObject**, PyObject**)
    void PyErr_Restore(PyObject*, PyObject*, PyObject*)

cdef const char* DLPACK_NAME = b"dltensor"
cdef const char* DLPACK_USED = b"used_dltensor"


cdef void _import_done(DLManagedTensor* managed) noexcept nogil:
    if managed.deleter != NULL:
        managed.deleter(managed)


cdef class _Imported:
    """Owns a consumed DLManagedTensor as the base of the array over its memory; when the array goes, the
    producer's deleter runs (twin: _Imported)."""

    cdef DLManagedTensor* managed

    def __dealloc__(self):
        if self.managed != NULL:
            _import_done(self.managed)
            self.managed = NULL


cdef inline bint _compact(DLTensor* t) noexcept:
    cdef int k
    cdef int64_t expected = 1
    if t.strides == NULL:
        return True
    for k in range(t.ndim - 1, -1, -1):
        if t.shape[k] != 1 and t.strides[k] != expected:
            return False
        expected *= t.shape[k]
    return True


def bf16_view(tensor: object) -> NDArray[Any]:
    """The words of a bf16 DLPack tensor (an object with ``__dlpack__``, such as Triton's input tensor, or a
    ``dltensor`` capsule) as a read-only uint16 array over the same memory, which keeps the tensor alive.
    ValueError names what is not a C-contiguous CPU bf16 tensor (twin: bf16_view)."""
    cdef DLManagedTensor* managed
    cdef DLTensor* t
    cdef cnp.npy_intp dims[MAX_DIMS]
    cdef int k
    cdef _Imported owner
    cdef cnp.ndarray array
    capsule = tensor if PyCapsule_CheckExact(tensor) else _exported(tensor)
    if not PyCapsule_IsValid(capsule, DLPACK_NAME):
        raise ValueError("bf16_view: the capsule is not an unconsumed DLPack tensor (named 'dltensor')")
    managed = <DLManagedTensor*>PyCapsule_GetPointer(capsule, DLPACK_NAME)
    t = &managed.dl_tensor
    if t.dtype.code != KDL_BFLOAT or t.dtype.bits != 16 or t.dtype.lanes != 1:
        raise ValueError(
            f"bf16_view: the tensor's DLPack dtype is (code {t.dtype.code}, {t.dtype.bits} bits, "
            f"{t.dtype.lanes} lanes), not bf16 (code 4, 16 bits, 1 lane)"
        )
    if t.device.device_type != KDL_CPU:
        raise ValueError(
            f"bf16_view: the tensor is on DLPack device type {t.device.device_type}; ge-plugin reads CPU "
            "tensors (type 1)"
        )
    if not 0 <= t.ndim <= MAX_DIMS:
        raise ValueError(f"bf16_view: the tensor has {t.ndim} dims; at most {MAX_DIMS} are supported")
    for k in range(t.ndim):
        dims[k] = <cnp.npy_intp>t.shape[k]
    if not _compact(t):
        raise ValueError(f"bf16_view: the tensor {[dims[k] for k in range(t.ndim)]} is not C-contiguous")
    owner = _Imported.__new__(_Imported)
    array = <cnp.ndarray>cnp.PyArray_SimpleNewFromData(
        t.ndim, dims, cnp.NPY_UINT16, <char*>t.data + t.byte_offset
    )
    Py_IncRef(<PyObject*>owner)  # PyArray_SetBaseObject steals a reference
    if cnp.PyArray_SetBaseObject(array, owner) < 0:
        raise MemoryError()
    cnp.PyArray_CLEARFLAGS(array, cnp.NPY_ARRAY_WRITEABLE)  # the request's memory
    owner.managed = managed  # the array's base owns the tensor from here
    PyCapsule_SetName(capsule, DLPACK_USED)
    return array


def _exported(tensor):
    exporter = getattr(tensor, "__dlpack__", None)
    if exporter is None:
        raise ValueError(
            "bf16_view: expected a DLPack tensor (an object with __dlpack__, or its capsule), got "
            f"{type(tensor).__name__}"
        )
    return exporter()


cdef class _Exported:
    """What one bf16 capsule points to: its DLManagedTensor, the shape it names, and the array whose memory it
    lends; the struct's manager_ctx is this object, whose last reference the consumer's deleter drops."""

    cdef DLManagedTensor managed
    cdef int64_t shape[MAX_DIMS]
    cdef object words


cdef void _release(DLManagedTensor* managed) noexcept nogil:
    with gil:
        Py_DecRef(<PyObject*>managed.manager_ctx)


cdef void _capsule_died(object capsule) noexcept:
    # the capsule goes without a consumer having taken the tensor (renamed it): release it here, keeping
    # whatever exception is being raised meanwhile
    cdef PyObject* kind
    cdef PyObject* value
    cdef PyObject* traceback
    cdef DLManagedTensor* managed
    if not PyCapsule_IsValid(capsule, DLPACK_NAME):
        return
    PyErr_Fetch(&kind, &value, &traceback)
    managed = <DLManagedTensor*>PyCapsule_GetPointer(capsule, DLPACK_NAME)
    managed.deleter(managed)
    PyErr_Restore(kind, value, traceback)


def bf16_capsule(words: NDArray[Any]) -> object:
    """A DLPack capsule (``dltensor``: dtype code kDLBfloat, 16 bits, on the CPU) over a C-contiguous uint16
    array's memory, as Triton's ``pb_utils.Tensor.from_dlpack`` takes a bf16 output. No copy: the capsule holds
    a reference to ``words`` until its consumer's deleter runs, or until it goes unconsumed (twin:
    bf16_capsule)."""
    cdef _Exported export
    cdef cnp.ndarray array
    cdef int k, ndim
    if not cnp.PyArray_Check(words):
        raise ValueError(f"bf16_capsule: expected a numpy uint16 array, got {type(words).__name__}")
    array = <cnp.ndarray>words
    if not _matches(array, T_BF16):
        got = messages.describe(words.dtype)
        raise ValueError(f"bf16_capsule: expected uint16 (bf16 bit patterns), got {got}")
    if not cnp.PyArray_IS_C_CONTIGUOUS(array):
        raise ValueError(f"bf16_capsule: the array {list(words.shape)} is not C-contiguous")
    ndim = cnp.PyArray_NDIM(array)
    if ndim > MAX_DIMS:
        raise ValueError(f"bf16_capsule: the array has {ndim} dims; at most {MAX_DIMS} are supported")
    export = _Exported.__new__(_Exported)
    export.words = array
    for k in range(ndim):
        export.shape[k] = cnp.PyArray_DIMS(array)[k]
    export.managed.dl_tensor.data = cnp.PyArray_DATA(array)
    export.managed.dl_tensor.device.device_type = KDL_CPU
    export.managed.dl_tensor.device.device_id = 0
    export.managed.dl_tensor.ndim = ndim
    export.managed.dl_tensor.dtype.code = KDL_BFLOAT
    export.managed.dl_tensor.dtype.bits = 16
    export.managed.dl_tensor.dtype.lanes = 1
    export.managed.dl_tensor.shape = export.shape
    export.managed.dl_tensor.strides = NULL
    export.managed.dl_tensor.byte_offset = 0
    export.managed.manager_ctx = <void*>export
    export.managed.deleter = _release
    capsule = PyCapsule_New(&export.managed, DLPACK_NAME, _capsule_died)
    Py_IncRef(<PyObject*>export)  # dropped by _release: the capsule's consumer, or the capsule, ends it
    return capsule
