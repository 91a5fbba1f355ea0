"""Checks and copies shared by the lite helpers."""

import acl
import lite_constants as const


def check_ret(what, ret):
    if ret != const.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed, ret={ret}: {acl.get_recent_err_msg()}")


def host_ptr(data):
    """A host pointer to ``data`` (bytes) for acl.rt.memcpy; the caller keeps ``data`` alive meanwhile."""
    return acl.util.bytes_to_ptr(data)
