# Declarations of the compiled fast path: its limits, type and cast codes, the one copy plan every byte
# move goes through, and the fields TensorSpec keeps in C so that validate() reads no Python objects.
# Nothing cimports this module: its functions are private to _fastpath.pyx and declared there.

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint64_t


cdef enum:
    MAX_DIMS = 32  # numpy's own NPY_MAXDIMS; fixed-size arrays below are sized by it
    GIL_RELEASE_BYTES = 65536  # below this, dropping and retaking the GIL costs more than the copy


cdef enum TypeCode:  # indexes the type tables in _fastpath.pyx; order as in ge_plugin.dtypes
    T_BOOL
    T_UINT8
    T_UINT16
    T_UINT32
    T_UINT64
    T_INT8
    T_INT16
    T_INT32
    T_INT64
    T_FP16
    T_FP32
    T_FP64
    T_BF16
    T_COUNT


cdef enum CastCode:  # what happens to each element on its way; CAST_NONE is a plain memcpy
    CAST_NONE
    CAST_F32_F16
    CAST_F16_F32
    CAST_F32_BF16
    CAST_BF16_F32
    CAST_F16_BF16
    CAST_BF16_F16
    CAST_I64_I32
    CAST_I32_I64


cdef struct Move:
    # One strided copy between a compact block (a request's tensor) and its place in a gear-shaped tensor
    # (the staging buffer): into the gear with padding for gather, out of it with trimming for scatter.
    # Lengths and strides count elements, not bytes.
    int ndim  # dims of both sides
    int run_dim  # outermost dim at and below which one index is one contiguous run on both sides
    int cast  # a CastCode
    bint into_gear  # gather (compact -> gear, gaps padded) rather than scatter (gear -> compact)
    Py_ssize_t src_item  # bytes per source element
    Py_ssize_t dst_item  # bytes per destination element
    Py_ssize_t extent[MAX_DIMS]  # the compact block's length along each dim: what is copied
    Py_ssize_t gear[MAX_DIMS]  # the gear's length along each dim; extent..gear is padding
    Py_ssize_t src_stride[MAX_DIMS]  # source elements between neighbours along each dim
    Py_ssize_t dst_stride[MAX_DIMS]  # destination elements between neighbours along each dim
    bint pad_zero  # the pad element is all zero bytes, so memset does
    const char* pad_value  # one destination element of padding
    const char* src_base  # start of the source block, to locate a rejected element
    Py_ssize_t bad  # element offset from src_base of the first value the cast rejected


cdef struct Source:
    # One gather source, borrowed from an ndarray kept alive by the caller for the whole copy.
    const char* data  # first byte, C-contiguous
    const cnp.npy_intp* shape  # the ndarray's own dims


cdef class TensorSpec:
    cdef readonly str name  # the input's name in the request
    cdef readonly str type  # a short type name: fp32, bf16, int64...
    cdef readonly tuple dims  # -1 for a dynamic dim
    cdef readonly tuple limits  # the largest accepted length per dim
    cdef readonly bint batched  # dim 0 is the batch dim (only changes the wording of errors)
    cdef readonly object value_range  # (low, high) inclusive, or None: values outside are refused
    cdef readonly object same_shape_as  # another input's name whose shape this one's must equal, or None
    cdef bint has_range  # value_range is set; the bounds below are what validate() compares with
    cdef int64_t i_low, i_high  # for integer types except uint64 (an empty range when low > high)
    cdef uint64_t u_low, u_high  # for uint64
    cdef double f_low, f_high  # for float types
    cdef int ndim  # len(dims)
    cdef int code  # TypeCode of type
    cdef Py_ssize_t c_dims[MAX_DIMS]  # dims, for the checks in validate()
    cdef Py_ssize_t c_limits[MAX_DIMS]  # limits, for the checks in validate()


# DLPack (dlpack.h, v0.8): the structures Triton's Python backend hands bf16 tensors over with
cdef enum:
    KDL_CPU = 1
    KDL_BFLOAT = 4

cdef struct DLDevice:
    int32_t device_type
    int32_t device_id

cdef struct DLDataType:
    uint8_t code
    uint8_t bits
    uint16_t lanes

cdef struct DLTensor:
    void* data
    DLDevice device
    int32_t ndim
    DLDataType dtype
    int64_t* shape
    int64_t* strides
    uint64_t byte_offset

cdef struct DLManagedTensor:
    DLTensor dl_tensor
    void* manager_ctx
    void (*deleter)(DLManagedTensor*) noexcept nogil
