"""Error codes and enum values the simulator's events, callbacks and devices use beyond ``acl_constants``.

Values from the CANN headers (``rt_error_codes.h``, ``acl_rt.h``); ``acl_constants.ERROR_NAMES`` names every
code here (a test checks), so messages read ``[ACL_ERROR_RT_STREAM_NO_CB_REG 107015]``.
"""

from __future__ import annotations

ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID = 107006
ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL = 107007
ACL_ERROR_RT_STREAM_SUBSCRIBE = 107011
ACL_ERROR_RT_THREAD_SUBSCRIBE = 107012
ACL_ERROR_RT_STREAM_NO_CB_REG = 107015
ACL_ERROR_RT_STREAM_ABORT = 107023
ACL_ERROR_RT_EVENT_NOT_COMPLETE = 507006
ACL_ERROR_RT_REPORT_TIMEOUT = 507012
ACL_ERROR_RT_EVENT_SYNC_TIMEOUT = 507047

#: aclrtEventStatus (what the deprecated acl.rt.query_event answers)
ACL_EVENT_STATUS_COMPLETE = 0
ACL_EVENT_STATUS_NOT_READY = 1
#: aclrtEventFlag values create_event_with_flag accepts: ACL_EVENT_SYNC, ACL_EVENT_CAPTURE_STREAM_PROGRESS,
#: ACL_EVENT_TIME_LINE (acl_rt.h)
ACL_EVENT_FLAGS = 0x1 | 0x2 | 0x8
#: aclrtEventRecordedStatus
ACL_EVENT_RECORDED_STATUS_NOT_READY = 0
ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
#: aclrtCallbackBlockType
ACL_CALLBACK_NO_BLOCK = 0
ACL_CALLBACK_BLOCK = 1
#: aclrtDevAttr values acl.rt.get_device_info answers
ACL_DEV_ATTR_AICPU_CORE_NUM = 1
ACL_DEV_ATTR_AICORE_CORE_NUM = 101
ACL_DEV_ATTR_CUBE_CORE_NUM = 102
ACL_DEV_ATTR_VECTOR_CORE_NUM = 201
ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE = 301
#: aclCANNPackageName: ACL_PKG_NAME_CANN (0) ... ACL_PKG_NAME_DRIVER (7)
ACL_PKG_NAME_COUNT = 8
#: what acl.media's JPEGD answers for a JPEG kind it does not decode (acl_base.h), and for a decode that fails
ACL_ERROR_UNSUPPORTED_JPEG = 148052
ACL_ERROR_FAILURE = 500001
