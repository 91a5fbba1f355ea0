"""Device memory and pinned host memory, allocated once and freed explicitly.

The whole point of ge-plugin's engine is that these are created when a model instance starts and reused by
every request: CANN's GE backend mallocs and frees on every request. Pinned host memory
(``acl.rt.malloc_host``) is what ``memcpy_async`` requires for H2D/D2H; ``PinnedBuffer.array`` exposes it to
the fast path as a numpy uint8 array without copying.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ge_plugin import acl_constants as C
from ge_plugin.device.aclapi import acl
from ge_plugin.device.runtime import check


class DeviceBuffer:
    """``acl.rt.malloc(size, policy)`` on the current context's device."""

    def __init__(self, size: int, policy: int = C.ACL_MEM_MALLOC_HUGE_FIRST):
        if size <= 0:
            raise ValueError(f"device buffer size must be > 0, got {size}")
        ptr, ret = acl().rt.malloc(size, policy)
        check(ret, f"acl.rt.malloc({size})")
        self.ptr = ptr
        self.size = size

    def close(self) -> None:
        if self.ptr:
            ptr, self.ptr = self.ptr, 0
            check(acl().rt.free(ptr), "acl.rt.free")


class PinnedBuffer:
    """``acl.rt.malloc_host(size)``: page-locked, 64-byte aligned host memory, viewed as ``array``."""

    def __init__(self, size: int):
        if size <= 0:
            raise ValueError(f"pinned buffer size must be > 0, got {size}")
        ptr, ret = acl().rt.malloc_host(size)
        check(ret, f"acl.rt.malloc_host({size})")
        self.ptr = ptr
        self.size = size
        self.array: np.ndarray = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(ptr))

    def close(self) -> None:
        if self.ptr:
            ptr, self.ptr = self.ptr, 0
            self.array = np.empty(0, np.uint8)  # no view may outlive the memory
            check(acl().rt.free_host(ptr), "acl.rt.free_host")


def copy_to_device_async(dst: DeviceBuffer, src: PinnedBuffer, nbytes: int, stream_handle: int) -> None:
    """H2D of the first ``nbytes`` of a pinned buffer, queued on the stream."""
    ret = acl().rt.memcpy_async(
        dst.ptr, dst.size, src.ptr, nbytes, C.ACL_MEMCPY_HOST_TO_DEVICE, stream_handle
    )
    if ret:
        check(ret, f"acl.rt.memcpy_async(H2D, {nbytes} bytes)")


def copy_to_host_async(dst: PinnedBuffer, src: DeviceBuffer, nbytes: int, stream_handle: int) -> None:
    """D2H of the first ``nbytes`` of a device buffer into a pinned buffer, queued on the stream."""
    ret = acl().rt.memcpy_async(
        dst.ptr, dst.size, src.ptr, nbytes, C.ACL_MEMCPY_DEVICE_TO_HOST, stream_handle
    )
    if ret:
        check(ret, f"acl.rt.memcpy_async(D2H, {nbytes} bytes)")


def copy_async(dst_ptr: int, dst_max: int, src_ptr: int, nbytes: int, kind: int, stream_handle: int) -> None:
    """Any copy between addresses inside buffers (an offset into a device buffer, a row of a pinned one),
    queued on the stream; the generation engine moves key/values device to device with it."""
    ret = acl().rt.memcpy_async(dst_ptr, dst_max, src_ptr, nbytes, kind, stream_handle)
    if ret:
        check(ret, f"acl.rt.memcpy_async(kind {kind}, {nbytes} bytes)")


def zero(buffer: DeviceBuffer) -> None:
    """Fill a device buffer with zero bytes (``acl.rt.memset``), so that what a model reads from memory no
    one wrote yet is finite."""
    check(acl().rt.memset(buffer.ptr, buffer.size, 0, buffer.size), f"acl.rt.memset({buffer.size} bytes)")


def memory_info(device_id: int) -> tuple[int, int]:
    """``(free, total)`` bytes of device ``device_id``'s memory, as ``acl.rt.get_mem_info`` reports it.

    ``get_mem_info`` answers for the calling thread's current device, so this makes ``device_id`` current for
    the call (``set_device`` / ``reset_device``, which are reference-counted) and puts back the context that
    was current. HBM is asked first (Atlas A2/910 cards); a device that reports no HBM is asked for DDR
    (Atlas 300I/310P cards).
    """
    rt = acl().rt
    previous, ret = rt.get_context()
    if ret != C.ACL_SUCCESS:
        previous = 0
        acl().get_recent_err_msg()  # "no current context" is expected here; keep it out of later errors
    check(rt.set_device(device_id), f"acl.rt.set_device({device_id})")
    try:
        free, total, ret = rt.get_mem_info(C.ACL_HBM_MEM)
        check(ret, "acl.rt.get_mem_info(ACL_HBM_MEM)")
        if total == 0:
            free, total, ret = rt.get_mem_info(C.ACL_DDR_MEM)
            check(ret, "acl.rt.get_mem_info(ACL_DDR_MEM)")
    finally:
        check(rt.reset_device(device_id), f"acl.rt.reset_device({device_id})")
        if previous:
            check(rt.set_context(previous), "acl.rt.set_context")
    return free, total
