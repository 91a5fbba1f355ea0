"""Constants of the lite helpers: pyACL exports none, so every program defines the values it uses."""

SUCCESS = 0
FAILED = 1

ACL_SUCCESS = 0
ACL_DEVICE = 0
ACL_HOST = 1

ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEM_MALLOC_NORMAL_ONLY = 2

ACL_MEMCPY_HOST_TO_HOST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3

ACL_DATA_WITHOUT_AIPP = 0
DYNAMIC_TENSOR_NAME = "ascend_mbatch_shape_data"

# aclDataType -> numpy type name
NUMPY_TYPES = {
    0: "float32",
    1: "float16",
    2: "int8",
    3: "int32",
    4: "uint8",
    6: "int16",
    7: "uint16",
    8: "uint32",
    9: "int64",
    10: "uint64",
    11: "float64",
    12: "uint8",
}

# aclLogLevel
LOG_DEBUG = 0
LOG_INFO = 1
LOG_WARNING = 2
LOG_ERROR = 3

# acldvppPixelFormat
PIXEL_FORMAT_YUV_SEMIPLANAR_420 = 1
PIXEL_FORMAT_YVU_SEMIPLANAR_420 = 2
MEMORY_NORMAL = 0
MEMORY_HOST = 1
MEMORY_DEVICE = 2
MEMORY_DVPP = 3
