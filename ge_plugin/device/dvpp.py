"""DVPP (``acl.media``) as the engine uses it: JPEG headers read on the host, decodes and resizes queued on a
stream, into DVPP memory.

As in the public pyACL image samples (acllite's ``AclLiteImageProc``): one channel, picture descriptions
and ROI configs that say where each picture lives and how big it is, and memory from ``dvpp_malloc`` (JPEGD
and VPC read and write nothing else). Every object here is made once, when a lane opens, and only
described again per image: nothing is allocated per request. Headers are read with pyACL's own calls
(``dvpp_jpeg_get_image_info``, ``dvpp_jpeg_predict_dec_size``), so the JPEGs refused here are the ones DVPP
refuses; their refusals become :class:`ge_plugin.errors.ImageError` (a request's 400), other failures
:class:`ge_plugin.errors.AclError`.
"""

from __future__ import annotations

import attrs

from ge_plugin import acl_constants as C
from ge_plugin.device.aclapi import acl
from ge_plugin.device.buffers import DeviceBuffer
from ge_plugin.device.runtime import check, recent_error_message
from ge_plugin.errors import ImageError

NV12 = C.PIXEL_FORMAT_YUV_SEMIPLANAR_420
#: JPEGD's output strides: the width rounded up to 128 (the first DVPP's rule, which also meets the later
#: DVPP's 64), the height to 16
JPEGD_WIDTH_ALIGN = 128
JPEGD_HEIGHT_ALIGN = 16
#: JPEGD decodes images of 32 to 8192 pixels a side
JPEGD_SIDES = (32, 8192)
#: VPC scales each side by 1/32 to 16
VPC_SCALE = (1 / 32, 16)


def align_up(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def decoded_bytes(width: int, height: int) -> int:
    """What JPEGD writes for a ``width`` x ``height`` JPEG as NV12, with its strides."""
    return align_up(width, JPEGD_WIDTH_ALIGN) * align_up(height, JPEGD_HEIGHT_ALIGN) * 3 // 2


class DvppBuffer(DeviceBuffer):
    """``acl.media.dvpp_malloc(size)``: device memory DVPP reads and writes (a model may take it as input, as
    any device memory), freed with ``dvpp_free``."""

    def __init__(self, size: int):  # not DeviceBuffer's: the memory comes from DVPP's own pool
        if size <= 0:
            raise ValueError(f"DVPP buffer size must be > 0, got {size}")
        ptr, ret = acl().media.dvpp_malloc(size)
        check(ret, f"acl.media.dvpp_malloc({size})")
        self.ptr = ptr
        self.size = size

    def close(self) -> None:
        if self.ptr:
            ptr, self.ptr = self.ptr, 0
            check(acl().media.dvpp_free(ptr), "acl.media.dvpp_free")


@attrs.frozen
class JpegInfo:
    width: int
    height: int
    components: int


def jpeg_info(data: bytes) -> JpegInfo:
    """The size of the JPEG in ``data`` (host memory) as JPEGD reads it, once JPEGD has said it decodes it:
    ImageError with pyACL's reason for a file it cannot read or a JPEG kind it does not decode."""
    media = acl().media
    ptr = acl().util.bytes_to_ptr(data)
    width, height, components, ret = media.dvpp_jpeg_get_image_info(ptr, len(data))
    if ret:
        raise ImageError(f"DVPP cannot read its JPEG header ({_reason(ret)})")
    _, ret = media.dvpp_jpeg_predict_dec_size(ptr, len(data), NV12)
    if ret == C.ACL_ERROR_UNSUPPORTED_JPEG:
        raise ImageError(
            f"a JPEG kind DVPP's JPEGD does not decode, such as progressive or arithmetic-coded "
            f"({_reason(ret)}); send a baseline JPEG"
        )
    if ret:
        raise ImageError(f"DVPP's JPEGD does not take this {width}x{height} JPEG ({_reason(ret)})")
    return JpegInfo(width, height, components)


def _reason(ret: int) -> str:
    """What pyACL said of a refusal: its recent error message, else the code's name."""
    message = recent_error_message()
    return message or f"{C.error_name(ret)} {ret}"


class Channel:
    """``dvpp_create_channel_desc`` + ``dvpp_create_channel`` (needs a current context); closes both."""

    def __init__(self) -> None:
        media = acl().media
        self.desc = media.dvpp_create_channel_desc()
        if not self.desc:
            check(C.ACL_ERROR_BAD_ALLOC, "acl.media.dvpp_create_channel_desc")
        self.open = False
        try:
            check(media.dvpp_create_channel(self.desc), "acl.media.dvpp_create_channel")
        except BaseException:
            self.close()
            raise
        self.open = True

    def close(self) -> None:
        media = acl().media
        if self.open:
            self.open = False
            check(media.dvpp_destroy_channel(self.desc), "acl.media.dvpp_destroy_channel")
        if self.desc:
            desc, self.desc = self.desc, 0
            check(media.dvpp_destroy_channel_desc(desc), "acl.media.dvpp_destroy_channel_desc")


class Picture:
    """A picture description: which DVPP memory holds an NV12 picture, its size and strides."""

    def __init__(self) -> None:
        self.desc = acl().media.dvpp_create_pic_desc()
        if not self.desc:
            check(C.ACL_ERROR_BAD_ALLOC, "acl.media.dvpp_create_pic_desc")

    def describe(
        self, ptr: int, size: int, width: int, height: int, width_stride: int, height_stride: int
    ) -> None:
        media = acl().media
        desc = self.desc
        for setter, value in (
            (media.dvpp_set_pic_desc_data, ptr),
            (media.dvpp_set_pic_desc_size, size),
            (media.dvpp_set_pic_desc_format, NV12),
            (media.dvpp_set_pic_desc_width, width),
            (media.dvpp_set_pic_desc_height, height),
            (media.dvpp_set_pic_desc_width_stride, width_stride),
            (media.dvpp_set_pic_desc_height_stride, height_stride),
            (media.dvpp_set_pic_desc_ret_code, 0),
        ):
            ret = setter(desc, value)
            if ret:
                check(ret, "acl.media.dvpp_set_pic_desc_*")

    def ret_code(self) -> int:
        """What DVPP wrote of its last decode into this picture: 0, or why it failed."""
        return int(acl().media.dvpp_get_pic_desc_ret_code(self.desc))

    def close(self) -> None:
        if self.desc:
            desc, self.desc = self.desc, 0
            check(acl().media.dvpp_destroy_pic_desc(desc), "acl.media.dvpp_destroy_pic_desc")


class Area:
    """An ROI config: columns ``left`` to ``right`` and rows ``top`` to ``bottom``, both ends included."""

    def __init__(self) -> None:
        self.config = acl().media.dvpp_create_roi_config(0, 1, 0, 1)
        if not self.config:
            check(C.ACL_ERROR_BAD_ALLOC, "acl.media.dvpp_create_roi_config")

    def set(self, left: int, right: int, top: int, bottom: int) -> None:
        ret = acl().media.dvpp_set_roi_config(self.config, left, right, top, bottom)
        if ret:
            check(ret, "acl.media.dvpp_set_roi_config")

    def close(self) -> None:
        if self.config:
            config, self.config = self.config, 0
            check(acl().media.dvpp_destroy_roi_config(config), "acl.media.dvpp_destroy_roi_config")


class ResizeConfig:
    """``dvpp_create_resize_config``: VPC's default interpolation (bilinear, or the first DVPP's filter)."""

    def __init__(self) -> None:
        self.config = acl().media.dvpp_create_resize_config()
        if not self.config:
            check(C.ACL_ERROR_BAD_ALLOC, "acl.media.dvpp_create_resize_config")

    def close(self) -> None:
        if self.config:
            config, self.config = self.config, 0
            check(acl().media.dvpp_destroy_resize_config(config), "acl.media.dvpp_destroy_resize_config")


def decode_jpeg_async(channel: Channel, data_ptr: int, size: int, out: Picture, stream_handle: int) -> None:
    """Queue JPEGD: the ``size``-byte JPEG at ``data_ptr`` (DVPP memory) into ``out`` as NV12."""
    ret = acl().media.dvpp_jpeg_decode_async(channel.desc, data_ptr, size, out.desc, stream_handle)
    if ret:
        check(ret, "acl.media.dvpp_jpeg_decode_async")


def resize_async(
    channel: Channel, src: Picture, dst: Picture, config: ResizeConfig, stream_handle: int
) -> None:
    """Queue a VPC resize of ``src`` to ``dst``'s width and height."""
    ret = acl().media.dvpp_vpc_resize_async(channel.desc, src.desc, dst.desc, config.config, stream_handle)
    if ret:
        check(ret, "acl.media.dvpp_vpc_resize_async")


def crop_and_paste_async(
    channel: Channel, src: Picture, dst: Picture, crop: Area, paste: Area, stream_handle: int
) -> None:
    """Queue a VPC crop of ``src``'s ``crop`` area, resized into ``dst``'s ``paste`` area (the rest of ``dst``
    keeps what it held)."""
    ret = acl().media.dvpp_vpc_crop_and_paste_async(
        channel.desc, src.desc, dst.desc, crop.config, paste.config, stream_handle
    )
    if ret:
        check(ret, "acl.media.dvpp_vpc_crop_and_paste_async")


def fill_async(ptr: int, size: int, value: int, stream_handle: int) -> None:
    """Queue ``acl.rt.memset_async``: ``size`` bytes at ``ptr`` set to ``value``."""
    ret = acl().rt.memset_async(ptr, size, value, size, stream_handle)
    if ret:
        check(ret, f"acl.rt.memset_async({size} bytes)")
