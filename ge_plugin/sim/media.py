"""``acl.media``, simulated: DVPP memory, channels, picture descriptions, JPEGD, PNGD, JPEGE and VPC.

Call forms and returns are those of pyACL's wrappers (hicann/runtime ``python/pyACL/media/*.cpp``): "create"
calls and getters return a bare value (a handle, a width), setters and the asynchronous calls ``ret``,
``dvpp_malloc`` and the size predictions ``(value, ret)``, ``dvpp_jpeg_get_image_info`` and
``dvpp_png_get_image_info`` ``(width, height, components, ret)``, the batch crop ``(dst_batch, ret)``. The rules each call checks (formats, strides, sizes,
ROI alignment) are the pyACL docs' JPEGD and VPC restrictions, per SoC (``_dvpp_images.rules``). DVPP reads
and writes memory from ``dvpp_malloc`` only: device memory of the current device, which the sanitizer knows
(its origin names the call). The asynchronous calls queue their work on the stream like other device work;
in timing-only mode they are checked at the call and move no pixel. Pixels: ``_dvpp_images``.
"""

import ctypes as _ctypes
import struct as _struct
from collections.abc import Callable as _Callable
from typing import Any as _Any

import numpy as _np

from ge_plugin import acl_constants as _C
from ge_plugin.sim import _args as _a
from ge_plugin.sim import _codes as _K
from ge_plugin.sim import _dvpp_images as _img
from ge_plugin.sim import _state as _s
from ge_plugin.sim import device_time as _device_time
from ge_plugin.sim import sanitizer as _sanitizer
from ge_plugin.sim._api import acl_call as _acl_call
from ge_plugin.sim._api import value_and_ret as _value_and_ret
from ge_plugin.sim._api import value_only as _value_only
from ge_plugin.sim._dvpp_state import TABLES as _TABLES
from ge_plugin.sim._fail import Fail as _Fail
from ge_plugin.sim._sites import origin as _origin
from ge_plugin.sim.memory import DEVICE as _DEVICE
from ge_plugin.sim.memory import HOST as _HOST
from ge_plugin.sim.memory import INVALID as _INVALID
from ge_plugin.sim.memory import Allocation as _Allocation
from ge_plugin.sim.memory import align_up as _align_up
from ge_plugin.sim.memory import check_host as _check_host
from ge_plugin.sim.rt import _queue as _queue_plan

__all__ = [
    "dvpp_create_batch_pic_desc",
    "dvpp_create_channel",
    "dvpp_create_channel_desc",
    "dvpp_create_jpege_config",
    "dvpp_create_pic_desc",
    "dvpp_create_resize_config",
    "dvpp_create_roi_config",
    "dvpp_destroy_batch_pic_desc",
    "dvpp_destroy_channel",
    "dvpp_destroy_channel_desc",
    "dvpp_destroy_jpege_config",
    "dvpp_destroy_pic_desc",
    "dvpp_destroy_resize_config",
    "dvpp_destroy_roi_config",
    "dvpp_free",
    "dvpp_get_channel_desc_channel_id",
    "dvpp_get_jpege_config_level",
    "dvpp_get_pic_desc",
    "dvpp_get_pic_desc_data",
    "dvpp_get_pic_desc_format",
    "dvpp_get_pic_desc_height",
    "dvpp_get_pic_desc_height_stride",
    "dvpp_get_pic_desc_ret_code",
    "dvpp_get_pic_desc_size",
    "dvpp_get_pic_desc_width",
    "dvpp_get_pic_desc_width_stride",
    "dvpp_get_resize_config_interpolation",
    "dvpp_jpeg_decode_async",
    "dvpp_jpeg_encode_async",
    "dvpp_jpeg_get_image_info",
    "dvpp_jpeg_predict_dec_size",
    "dvpp_jpeg_predict_enc_size",
    "dvpp_malloc",
    "dvpp_png_decode_async",
    "dvpp_png_get_image_info",
    "dvpp_png_predict_dec_size",
    "dvpp_set_channel_desc_mode",
    "dvpp_set_jpege_config_level",
    "dvpp_set_pic_desc_data",
    "dvpp_set_pic_desc_format",
    "dvpp_set_pic_desc_height",
    "dvpp_set_pic_desc_height_stride",
    "dvpp_set_pic_desc_ret_code",
    "dvpp_set_pic_desc_size",
    "dvpp_set_pic_desc_width",
    "dvpp_set_pic_desc_width_stride",
    "dvpp_set_resize_config_interpolation",
    "dvpp_set_roi_config",
    "dvpp_set_roi_config_bottom",
    "dvpp_set_roi_config_left",
    "dvpp_set_roi_config_right",
    "dvpp_set_roi_config_top",
    "dvpp_vpc_batch_crop_async",
    "dvpp_vpc_crop_and_paste_async",
    "dvpp_vpc_crop_async",
    "dvpp_vpc_crop_resize_async",
    "dvpp_vpc_resize_async",
]

_BAD = _C.ACL_ERROR_INVALID_PARAM
_TIMING = _device_time.STATE
#: the call that makes DVPP memory; an allocation's origin names it
_DVPP_MALLOC = "acl.media.dvpp_malloc"
#: the most crop areas one batch call takes (pyACL's MAX_CROP_SIZE)
_MAX_CROPS = 256
#: the batch picture description sizes acldvppCreateBatchPicDesc takes
_MAX_BATCH = 256
#: a decode that fails on the device: the stream's error and the output description's ret code
_DECODE_FAILED = _K.ACL_ERROR_FAILURE


def _is_dvpp(alloc: _Allocation | None) -> bool:
    """Whether ``alloc`` came from ``acl.media.dvpp_malloc``."""
    return alloc is not None and alloc.origin.call.startswith(_DVPP_MALLOC)


# -- handles --------------------------------------------------------------------------------------------


class _ChannelDesc:
    __slots__ = ("channel_id", "created", "handle", "mode")

    def __init__(self, handle: int):
        self.handle = handle
        self.created = False
        self.channel_id = 0
        self.mode = 0


class _PicDesc:
    __slots__ = (
        "batch",
        "data",
        "format",
        "handle",
        "height",
        "height_stride",
        "ret_code",
        "size",
        "width",
        "width_stride",
    )

    def __init__(self, handle: int, batch: int = 0):
        self.handle = handle
        self.batch = batch  #: the batch description that owns it (0: none)
        self.data = 0
        self.size = 0
        self.format = _img.YUV_SP_420
        self.width = 0
        self.height = 0
        self.width_stride = 0
        self.height_stride = 0
        self.ret_code = 0


class _Roi:
    __slots__ = ("bottom", "handle", "left", "right", "top")

    def __init__(self, handle: int, left: int, right: int, top: int, bottom: int):
        self.handle = handle
        self.left, self.right, self.top, self.bottom = left, right, top, bottom


class _Config:
    """A resize config (``value``: the interpolation) or a JPEGE config (``value``: the level)."""

    __slots__ = ("handle", "value")

    def __init__(self, handle: int, value: int):
        self.handle = handle
        self.value = value


_CHANNELS = "channel description"
_PICS = "picture description"
_BATCHES = "batch picture description"
_ROIS = "ROI config"
_RESIZES = "resize config"
_JPEGES = "JPEGE config"
_channel_ids = iter(range(1, 1 << 62))


def _new(kind: str, make: _Callable[[int], _Any]) -> int:
    obj = make(_s.new_handle())
    _TABLES[kind][obj.handle] = obj
    return int(obj.handle)


def _get(kind: str, handle: int, what: str) -> _Any:
    """The live ``kind`` object ``handle``; Fail naming what the handle really is."""
    obj = _TABLES[kind].get(handle)
    if obj is not None:
        return obj
    if handle == 0:
        raise _Fail(_BAD, f"{what} is a null handle")
    for other, table in _TABLES.items():
        if handle in table:
            raise _Fail(_BAD, f"{what} 0x{handle:x} is a {other}, not a {kind}")
    raise _Fail(_BAD, f"{what} 0x{handle:x} is not a live {kind} (destroyed, or never created)")


def _destroy(kind: str, handle: int) -> int:
    _get(kind, handle, kind)
    del _TABLES[kind][handle]
    return 0


# -- memory ---------------------------------------------------------------------------------------------


@_acl_call("acl.media.dvpp_malloc", _a.k, failure=_value_and_ret(0))
def dvpp_malloc(size: int, /) -> tuple[int, int]:
    """``dev_ptr, ret``: DVPP memory on the current device, rounded up to 128 bytes (not initialised)."""
    ctx = _s.current_context()
    if size == 0:
        raise _Fail(_BAD, "size must not be 0")
    arena = _s.memory().devices[ctx.device]
    accounted = _align_up(size, 128)
    alloc = arena.malloc(size, accounted, _origin(f"{_DVPP_MALLOC}({size})"))
    if alloc is None:
        raise _Fail(
            _C.ACL_ERROR_RT_MEMORY_ALLOCATION,
            f"device {ctx.device} is out of memory: {size} bytes of DVPP memory requested, "
            f"{arena.capacity - arena.used} of {arena.capacity} free",
        )
    return alloc.base, 0


@_acl_call("acl.media.dvpp_free", _a.k)
def dvpp_free(dev_ptr: int, /) -> int:
    """``ret``; only the start of memory from dvpp_malloc."""
    place = _s.memory().locate(dev_ptr)
    if place.kind == _INVALID:
        fault = (
            _sanitizer.DOUBLE_FREE if place.fault == _sanitizer.USE_AFTER_FREE else _sanitizer.INVALID_FREE
        )
        raise _Fail(_BAD, place.why, fault)
    alloc = place.alloc
    if place.kind != _DEVICE or alloc is None or not _is_dvpp(alloc):
        what = alloc.describe() if alloc is not None else "host memory"
        raise _Fail(
            _BAD,
            f"0x{dev_ptr:x} is {what}, not memory from acl.media.dvpp_malloc",
            _sanitizer.WRONG_MEMORY_KIND,
        )
    if alloc.base != dev_ptr:
        raise _Fail(
            _BAD,
            f"0x{dev_ptr:x} is inside {alloc.describe()}; dvpp_free takes the address dvpp_malloc returned",
            _sanitizer.INVALID_FREE,
        )
    _s.memory().devices[alloc.device].free(dev_ptr, _origin("acl.media.dvpp_free"))
    return 0


def _dvpp_view(what: str, ptr: int, nbytes: int) -> tuple[_Allocation, _img.Plane]:
    """``nbytes`` of DVPP memory at ``ptr`` (checked: live, from dvpp_malloc, long enough)."""
    place = _s.memory().locate(ptr)
    if place.kind == _INVALID:
        raise _Fail(_BAD, f"{what} {place.why}", place.fault)
    alloc = place.alloc
    if place.kind != _DEVICE or alloc is None or not _is_dvpp(alloc):
        where = alloc.describe() if alloc is not None else "host memory"
        raise _Fail(
            _BAD,
            f"{what} 0x{ptr:x} is {where}; DVPP reads and writes memory from acl.media.dvpp_malloc only",
            _sanitizer.WRONG_MEMORY_KIND,
        )
    end = alloc.base + alloc.limit()
    if ptr + nbytes > end:
        raise _Fail(
            _BAD,
            f"{what} range 0x{ptr:x}+{nbytes} runs {ptr + nbytes - end} bytes past the end of {alloc.describe()}",
            _sanitizer.OUT_OF_BOUNDS,
        )
    return alloc, alloc.view(ptr - alloc.base, nbytes)


def _read_image(call: str, ptr: int, size: int) -> bytes:
    """The ``size`` bytes of an encoded image at ``ptr``: host memory (checked against its object, as a copy
    would be) or DVPP memory."""
    if size == 0:
        raise _Fail(_BAD, "size must not be 0")
    memory = _s.SIM.memory
    place = memory.locate(ptr) if memory is not None else None
    if place is None or place.kind == _HOST:
        if ptr < 4096:
            raise _Fail(_BAD, f"data 0x{ptr:x} is a null pointer", _sanitizer.INVALID_POINTER)
        padded = _check_host(call, "data", ptr, size, read=True)
        return padded if padded is not None else _ctypes.string_at(ptr, size)
    if place.kind == _DEVICE:
        return _dvpp_view("data", ptr, size)[1].tobytes()
    if place.kind == _INVALID:
        raise _Fail(_BAD, f"data {place.why}", place.fault)
    alloc = place.alloc
    assert alloc is not None
    if ptr + size > alloc.base + alloc.limit():
        raise _Fail(
            _BAD,
            f"data range 0x{ptr:x}+{size} runs past the end of {alloc.describe()}",
            _sanitizer.OUT_OF_BOUNDS,
        )
    return alloc.view(ptr - alloc.base, size).tobytes()


# -- channels -------------------------------------------------------------------------------------------


@_acl_call("acl.media.dvpp_create_channel_desc", init=False, failure=_value_only(0))
def dvpp_create_channel_desc() -> int:
    """A channel description (0 on failure)."""
    return _new(_CHANNELS, _ChannelDesc)


@_acl_call("acl.media.dvpp_destroy_channel_desc", _a.k, init=False)
def dvpp_destroy_channel_desc(channel_desc: int, /) -> int:
    return _destroy(_CHANNELS, channel_desc)


@_acl_call("acl.media.dvpp_set_channel_desc_mode", _a.k, _a.u32, init=False)
def dvpp_set_channel_desc_mode(channel_desc: int, mode: int, /) -> int:
    """``ret``; the modes (VPC 1, JPEGD 2, JPEGE 4, ...) change nothing here: every channel does all."""
    _get(_CHANNELS, channel_desc, "channel_desc").mode = mode
    return 0


@_acl_call("acl.media.dvpp_create_channel", _a.k)
def dvpp_create_channel(channel_desc: int, /) -> int:
    """``ret``: opens a DVPP channel on the current device (needs a context)."""
    _s.current_context()
    channel = _get(_CHANNELS, channel_desc, "channel_desc")
    if channel.created:
        raise _Fail(
            _BAD, f"channel_desc 0x{channel_desc:x} already has a channel (acl.media.dvpp_create_channel)"
        )
    channel.created = True
    channel.channel_id = next(_channel_ids)
    return 0


@_acl_call("acl.media.dvpp_destroy_channel", _a.k)
def dvpp_destroy_channel(channel_desc: int, /) -> int:
    channel = _get(_CHANNELS, channel_desc, "channel_desc")
    if not channel.created:
        raise _Fail(_BAD, f"channel_desc 0x{channel_desc:x} has no channel (acl.media.dvpp_create_channel)")
    channel.created = False
    return 0


@_acl_call("acl.media.dvpp_get_channel_desc_channel_id", _a.k, fault=None, init=False, failure=_value_only(0))
def dvpp_get_channel_desc_channel_id(channel_desc: int, /) -> int:
    return int(_get(_CHANNELS, channel_desc, "channel_desc").channel_id)


def _channel(handle: int) -> _ChannelDesc:
    channel: _ChannelDesc = _get(_CHANNELS, handle, "channel_desc")
    if not channel.created:
        raise _Fail(
            _BAD, f"channel_desc 0x{handle:x} has no channel: call acl.media.dvpp_create_channel first"
        )
    return channel


# -- picture descriptions -------------------------------------------------------------------------------


@_acl_call("acl.media.dvpp_create_pic_desc", init=False, failure=_value_only(0))
def dvpp_create_pic_desc() -> int:
    return _new(_PICS, _PicDesc)


@_acl_call("acl.media.dvpp_destroy_pic_desc", _a.k, init=False)
def dvpp_destroy_pic_desc(pic_desc: int, /) -> int:
    desc = _get(_PICS, pic_desc, "pic_desc")
    if desc.batch:
        raise _Fail(_BAD, f"pic_desc 0x{pic_desc:x} belongs to batch 0x{desc.batch:x}; destroy the batch")
    return _destroy(_PICS, pic_desc)


def _setter(field: str, parser: _Callable[[str, int, object], int]) -> _Callable[[int, int], int]:
    call = f"acl.media.dvpp_set_pic_desc_{field}"

    @_acl_call(call, _a.k, parser, init=False)
    def setter(pic_desc: int, value: int, /) -> int:
        setattr(_get(_PICS, pic_desc, "pic_desc"), field, value)
        return 0

    setter.__name__ = setter.__qualname__ = f"dvpp_set_pic_desc_{field}"
    setter.__doc__ = f"``ret``: sets the picture description's {field.replace('_', ' ')}."
    return setter


def _getter(field: str) -> _Callable[[int], int]:
    @_acl_call(f"acl.media.dvpp_get_pic_desc_{field}", _a.k, fault=None, init=False, failure=_value_only(0))
    def getter(pic_desc: int, /) -> int:
        return int(getattr(_get(_PICS, pic_desc, "pic_desc"), field))

    getter.__name__ = getter.__qualname__ = f"dvpp_get_pic_desc_{field}"
    getter.__doc__ = f"The picture description's {field.replace('_', ' ')} (0 for a bad handle)."
    return getter


dvpp_set_pic_desc_data = _setter("data", _a.k)
dvpp_set_pic_desc_size = _setter("size", _a.u32)
dvpp_set_pic_desc_format = _setter("format", _a.i)
dvpp_set_pic_desc_width = _setter("width", _a.u32)
dvpp_set_pic_desc_height = _setter("height", _a.u32)
dvpp_set_pic_desc_width_stride = _setter("width_stride", _a.u32)
dvpp_set_pic_desc_height_stride = _setter("height_stride", _a.u32)
dvpp_set_pic_desc_ret_code = _setter("ret_code", _a.u32)
dvpp_get_pic_desc_data = _getter("data")
dvpp_get_pic_desc_size = _getter("size")
dvpp_get_pic_desc_format = _getter("format")
dvpp_get_pic_desc_width = _getter("width")
dvpp_get_pic_desc_height = _getter("height")
dvpp_get_pic_desc_width_stride = _getter("width_stride")
dvpp_get_pic_desc_height_stride = _getter("height_stride")
dvpp_get_pic_desc_ret_code = _getter("ret_code")


@_acl_call("acl.media.dvpp_create_batch_pic_desc", _a.u32, init=False, failure=_value_only(0))
def dvpp_create_batch_pic_desc(batch_size: int, /) -> int:
    """``batch_size`` (1..256) picture descriptions in one; 0 for another size."""
    if not 1 <= batch_size <= _MAX_BATCH:
        raise _Fail(_BAD, f"batch_size {batch_size} is outside 1..{_MAX_BATCH}")
    handle = _s.new_handle()
    pics = [_new(_PICS, lambda h: _PicDesc(h, handle)) for _ in range(batch_size)]
    _TABLES[_BATCHES][handle] = pics
    return handle


@_acl_call("acl.media.dvpp_get_pic_desc", _a.k, _a.u32, fault=None, init=False, failure=_value_only(0))
def dvpp_get_pic_desc(batch_pic_desc: int, index: int, /) -> int:
    """The ``index``-th picture description of the batch (0 past its end)."""
    pics = _get(_BATCHES, batch_pic_desc, "batch_pic_desc")
    if index >= len(pics):
        raise _Fail(_BAD, f"index {index} is past the batch's {len(pics)} picture descriptions")
    return int(pics[index])


@_acl_call("acl.media.dvpp_destroy_batch_pic_desc", _a.k, init=False)
def dvpp_destroy_batch_pic_desc(batch_pic_desc: int, /) -> int:
    for pic in _get(_BATCHES, batch_pic_desc, "batch_pic_desc"):
        _TABLES[_PICS].pop(pic, None)
    return _destroy(_BATCHES, batch_pic_desc)


# -- ROI, resize and JPEGE configs ----------------------------------------------------------------------


@_acl_call(
    "acl.media.dvpp_create_roi_config", _a.u32, _a.u32, _a.u32, _a.u32, init=False, failure=_value_only(0)
)
def dvpp_create_roi_config(left: int, right: int, top: int, bottom: int, /) -> int:
    """An area from column ``left`` to ``right`` and row ``top`` to ``bottom``, both ends included."""
    return _new(_ROIS, lambda h: _Roi(h, left, right, top, bottom))


@_acl_call("acl.media.dvpp_set_roi_config", _a.k, _a.u32, _a.u32, _a.u32, _a.u32, init=False)
def dvpp_set_roi_config(config: int, left: int, right: int, top: int, bottom: int, /) -> int:
    roi = _get(_ROIS, config, "config")
    roi.left, roi.right, roi.top, roi.bottom = left, right, top, bottom
    return 0


def _roi_setter(side: str) -> _Callable[[int, int], int]:
    @_acl_call(f"acl.media.dvpp_set_roi_config_{side}", _a.k, _a.u32, init=False)
    def setter(config: int, value: int, /) -> int:
        setattr(_get(_ROIS, config, "config"), side, value)
        return 0

    setter.__name__ = setter.__qualname__ = f"dvpp_set_roi_config_{side}"
    setter.__doc__ = f"``ret``: sets the ROI's {side} (an included edge)."
    return setter


dvpp_set_roi_config_left = _roi_setter("left")
dvpp_set_roi_config_right = _roi_setter("right")
dvpp_set_roi_config_top = _roi_setter("top")
dvpp_set_roi_config_bottom = _roi_setter("bottom")


@_acl_call("acl.media.dvpp_destroy_roi_config", _a.k, init=False)
def dvpp_destroy_roi_config(config: int, /) -> int:
    return _destroy(_ROIS, config)


@_acl_call("acl.media.dvpp_create_resize_config", init=False, failure=_value_only(0))
def dvpp_create_resize_config() -> int:
    return _new(_RESIZES, lambda h: _Config(h, 0))


@_acl_call("acl.media.dvpp_destroy_resize_config", _a.k, init=False)
def dvpp_destroy_resize_config(resize_config: int, /) -> int:
    return _destroy(_RESIZES, resize_config)


@_acl_call("acl.media.dvpp_set_resize_config_interpolation", _a.k, _a.u32, init=False)
def dvpp_set_resize_config_interpolation(resize_config: int, interpolation: int, /) -> int:
    """``ret``; 0 .. 5 (see ``_dvpp_images.INTERPOLATIONS``)."""
    config = _get(_RESIZES, resize_config, "resize_config")
    if interpolation not in _img.INTERPOLATIONS:
        raise _Fail(_BAD, f"interpolation {interpolation} is not one of {sorted(_img.INTERPOLATIONS)}")
    config.value = interpolation
    return 0


@_acl_call(
    "acl.media.dvpp_get_resize_config_interpolation", _a.k, fault=None, init=False, failure=_value_only(0)
)
def dvpp_get_resize_config_interpolation(resize_config: int, /) -> int:
    return int(_get(_RESIZES, resize_config, "resize_config").value)


@_acl_call("acl.media.dvpp_create_jpege_config", init=False, failure=_value_only(0))
def dvpp_create_jpege_config() -> int:
    return _new(_JPEGES, lambda h: _Config(h, 100))


@_acl_call("acl.media.dvpp_destroy_jpege_config", _a.k, init=False)
def dvpp_destroy_jpege_config(jpege_config: int, /) -> int:
    return _destroy(_JPEGES, jpege_config)


@_acl_call("acl.media.dvpp_set_jpege_config_level", _a.k, _a.u32, init=False)
def dvpp_set_jpege_config_level(jpege_config: int, level: int, /) -> int:
    """``ret``; the encoding quality, 0..100 (100 default)."""
    config = _get(_JPEGES, jpege_config, "jpege_config")
    if level > 100:
        raise _Fail(_BAD, f"level {level} is outside 0..100")
    config.value = level
    return 0


@_acl_call("acl.media.dvpp_get_jpege_config_level", _a.k, fault=None, init=False, failure=_value_only(0))
def dvpp_get_jpege_config_level(jpege_config: int, /) -> int:
    return int(_get(_JPEGES, jpege_config, "jpege_config").value)


# -- JPEGD ----------------------------------------------------------------------------------------------


def _rules() -> _img.Rules:
    return _img.rules(_s.SIM.config.soc_version)


def _header(call: str, data: int, size: int) -> tuple[bytes, _img.JpegHeader, str | None]:
    raw = _read_image(call, data, size)
    try:
        header, why = _img.jpeg_header(raw)
    except _img.BadImage as bad:
        raise _Fail(_BAD, bad.message) from None
    return raw, header, why


@_acl_call("acl.media.dvpp_jpeg_get_image_info", _a.k, _a.u32, init=False, failure=_value_and_ret(0, 0, 0))
def dvpp_jpeg_get_image_info(data: int, size: int, /) -> tuple[int, int, int, int]:
    """``width, height, components, ret`` from the JPEG's frame header (any JPEG kind: only the header is
    read; whether JPEGD decodes it is the prediction's and the decode's question)."""
    _, header, _ = _header("acl.media.dvpp_jpeg_get_image_info", data, size)
    return header.width, header.height, header.components, 0


def _output_format(fmt: int, header: _img.JpegHeader) -> int:
    allowed = _img.JPEGD_OUTPUTS[header.sampling]
    if fmt == _img.UNKNOWN:
        return allowed[0]
    if fmt not in allowed:
        names = ", ".join(f"{_img.FORMAT_NAMES[f]} ({f})" for f in allowed)
        raise _Fail(
            _BAD,
            f"JPEGD writes a {header.sampling} JPEG as {names} or PIXEL_FORMAT_UNKNOWN, not format {fmt}",
        )
    return fmt


def _decoded_size(fmt: int, header: _img.JpegHeader) -> tuple[int, int]:
    """What JPEGD writes: the image's size, rounded down to even where the output format subsamples."""
    sx, sy = _img.subsampling(fmt)
    return header.width - header.width % sx, header.height - header.height % sy


def _unsupported(raw_why: str | None, header: _img.JpegHeader) -> None:
    if raw_why is not None:
        raise _Fail(_K.ACL_ERROR_UNSUPPORTED_JPEG, f"JPEGD does not decode {raw_why} JPEGs")
    for what, value in (("width", header.width), ("height", header.height)):
        if not _img.JPEG_MIN <= value <= _img.JPEG_MAX:
            raise _Fail(
                _BAD, f"the JPEG's {what} {value} is outside JPEGD's {_img.JPEG_MIN}..{_img.JPEG_MAX}"
            )


@_acl_call("acl.media.dvpp_jpeg_predict_dec_size", _a.k, _a.u32, _a.i, init=False, failure=_value_and_ret(0))
def dvpp_jpeg_predict_dec_size(data: int, size: int, output_pixel_format: int, /) -> tuple[int, int]:
    """``size, ret``: the output buffer JPEGD needs, with the width rounded up to 128 and the height to 16 (the
    first DVPP's strides, which also satisfy the later one's 64)."""
    _, header, why = _header("acl.media.dvpp_jpeg_predict_dec_size", data, size)
    _unsupported(why, header)
    fmt = _output_format(output_pixel_format, header)
    return _img.picture_bytes(fmt, _align_up(header.width, 128), _align_up(header.height, 16)), 0


class _Work:
    """DVPP work queued on a stream: ``work()`` when it runs (computing), nothing but the check that its
    memory is still there in timing-only mode."""

    __slots__ = ("allocs", "work")

    def __init__(self, work: _Callable[[], None], allocs: list[_Allocation]):
        self.work = work
        self.allocs = allocs

    def run(self) -> None:
        self.timed(None)
        self.work()

    def timed(self, at: float | None = None) -> None:
        for alloc in self.allocs:
            if alloc.freed and (at is None or alloc.freed_at < at):
                raise _Fail(
                    _C.ACL_ERROR_RT_MEMORY_FREE,
                    f"{alloc.describe()} was freed before the DVPP task ran",
                    _sanitizer.USE_AFTER_FREE,
                )


def _settled(stream: int) -> bool:
    """Whether ``stream`` has run everything queued on it: what its work would read is there now."""
    return bool(_s.stream(stream, _s.current_context()).idle)


def _queue(api: str, stream: int, work: _Callable[[], None], allocs: list[_Allocation]) -> None:
    target = _s.stream(stream, _s.current_context())
    _queue_plan(target, api, _Work(work, allocs))


class _Picture:
    """A picture description's fields, read when the call is made, and a view of its memory."""

    __slots__ = ("alloc", "desc", "fmt", "height", "height_stride", "view", "width", "width_stride")

    def __init__(self, desc: _PicDesc, alloc: _Allocation, view: _img.Plane):
        self.desc = desc
        self.fmt = desc.format
        self.width, self.height = desc.width, desc.height
        self.width_stride, self.height_stride = desc.width_stride, desc.height_stride
        self.alloc = alloc
        self.view = view


def _output_memory(desc: _PicDesc) -> _Allocation:
    """A decode's output memory when its checks wait until the decode runs: it must be there meanwhile."""
    if desc.data == 0:
        raise _Fail(_BAD, "output_desc has no data (acl.media.dvpp_set_pic_desc_data)")
    return _dvpp_view("output_desc data", desc.data, desc.size)[0]


def _failed(desc: _PicDesc, call: str, code: int, message: str) -> _Fail:
    """A decode that fails as it runs: the stream's error, and the output description's ret code."""
    desc.ret_code = code
    return _Fail(code, f"{call}: {message}")


def _in_memory(what: str, desc: _PicDesc, fmt: int, need: int) -> _Picture:
    """``desc`` as a picture of format ``fmt`` in the ``need`` bytes its strides take: its size at least that,
    its data live DVPP memory that holds it."""
    if desc.size < need:
        raise _Fail(
            _BAD,
            f"{what}: size {desc.size} is less than the {need} bytes a {_img.FORMAT_NAMES[fmt]} picture of "
            f"strides {desc.width_stride}x{desc.height_stride} takes",
        )
    if desc.data == 0:
        raise _Fail(_BAD, f"{what} has no data (acl.media.dvpp_set_pic_desc_data)")
    alloc, _ = _dvpp_view(f"{what} data", desc.data, desc.size)
    return _Picture(desc, alloc, alloc.view(desc.data - alloc.base, need))


def _picture(what: str, handle: int, fmt: int, width_align: int, height_align: int) -> _Picture:
    """The picture description ``handle`` as format ``fmt`` with its strides and memory checked."""
    desc: _PicDesc = _get(_PICS, handle, what)
    w, h, ws, hs = desc.width, desc.height, desc.width_stride, desc.height_stride
    if ws < w or ws % width_align or ws == 0:
        raise _Fail(
            _BAD, f"{what}: width stride {ws} must be a multiple of {width_align} and at least the width {w}"
        )
    if hs < h or hs % height_align or hs == 0:
        raise _Fail(
            _BAD,
            f"{what}: height stride {hs} must be a multiple of {height_align} and at least the height {h}",
        )
    need = _img.picture_bytes(fmt, ws, hs)
    return _in_memory(what, desc, fmt, need)


@_acl_call("acl.media.dvpp_jpeg_decode_async", _a.k, _a.k, _a.u32, _a.k, _a.k, fault=None)
def dvpp_jpeg_decode_async(channel_desc: int, data: int, size: int, output_desc: int, stream: int, /) -> int:
    """``ret``: queues the decode of the JPEG at ``data`` (DVPP memory) into ``output_desc`` on ``stream``.

    When the stream has no work left to run at the call (the JPEG was copied synchronously), the header is
    read then: a JPEG kind JPEGD does not decode is ACL_ERROR_UNSUPPORTED_JPEG, an output description that
    cannot take it ACL_ERROR_INVALID_PARAM, from the call. When work is still queued before it (an
    asynchronous copy that brings the JPEG: the stream runs in order, so the bytes at the call may be an
    earlier picture's), the header is read when the decode runs, and what it refuses fails on the stream with
    the output description's ret code set, as a JPEG whose data does not decode does (ACL_ERROR_FAILURE). Timing only, the header is not read at all (the copies that brought the
    JPEG moved nothing) and the output description is checked as given. Once decoded, the output
    description's width and height are what JPEGD wrote (rounded down to even where the format subsamples)."""
    _channel(channel_desc)
    if size == 0:
        raise _Fail(_BAD, "size must not be 0")
    src_alloc, src = _dvpp_view("data", data, size)
    desc: _PicDesc = _get(_PICS, output_desc, "output_desc")
    if _TIMING.timing_only:  # the JPEG's bytes were never copied: nothing to read, nothing decoded
        fmt = _img.YVU_SP_420 if desc.format == _img.UNKNOWN else desc.format
        if fmt not in _img.FORMAT_NAMES:
            raise _Fail(_BAD, f"output_desc: format {desc.format} is not one JPEGD writes")
        out = _picture("output_desc", output_desc, fmt, _rules().jpegd_width_align, 16)
        _queue("media.dvpp_jpeg_decode_async", stream, lambda: None, [src_alloc, out.alloc])
        return 0

    def prepare() -> tuple[int, int, int, _Picture]:
        """The header read and the output description checked against it: format, width, height, picture."""
        try:
            header, why = _img.jpeg_header(src.tobytes())
        except _img.BadImage as bad:
            raise _Fail(_BAD, bad.message) from None
        _unsupported(why, header)
        fmt = _output_format(desc.format, header)
        width, height = _decoded_size(fmt, header)
        if desc.width_stride < header.width or desc.height_stride < header.height:
            raise _Fail(
                _BAD,
                f"output_desc: strides {desc.width_stride}x{desc.height_stride} are smaller than the "
                f"{header.width}x{header.height} JPEG",
            )
        return fmt, width, height, _picture("output_desc", output_desc, fmt, _rules().jpegd_width_align, 16)

    ready = prepare() if _settled(stream) else None
    # checked when the decode runs unless ready now; its output memory must be there meanwhile
    out_alloc = _output_memory(desc) if ready is None else ready[3].alloc

    def decode() -> None:
        try:
            fmt, width, height, out = ready if ready is not None else prepare()
            y, cb, cr = _img.decode(src.tobytes())
        except _img.BadImage as bad:
            raise _failed(desc, "acl.media.dvpp_jpeg_decode_async", _DECODE_FAILED, bad.message) from None
        except _Fail as fail:
            raise _failed(desc, "acl.media.dvpp_jpeg_decode_async", fail.code, fail.message) from None
        cut = (slice(0, height), slice(0, width))
        _img.write_semiplanar(
            out.view,
            fmt,
            y[cut],
            None if cb is None else cb[cut],
            None if cr is None else cr[cut],
            out.width_stride,
            out.height_stride,
        )
        desc.width, desc.height, desc.format, desc.ret_code = width, height, fmt, 0

    _queue("media.dvpp_jpeg_decode_async", stream, decode, [src_alloc, out_alloc])
    return 0


# -- PNGD -----------------------------------------------------------------------------------------------


def _png_header(call: str, data: int, size: int) -> _img.PngHeader:
    raw = _read_image(call, data, size)
    try:
        return _img.png_header(raw)
    except _img.BadImage as bad:
        raise _Fail(_BAD, bad.message) from None


def _png_size(header: _img.PngHeader) -> None:
    for what, value in (("width", header.width), ("height", header.height)):
        if not _img.PNG_MIN <= value <= _img.PNG_MAX:
            raise _Fail(_BAD, f"the PNG's {what} {value} is outside PNGD's {_img.PNG_MIN}..{_img.PNG_MAX}")


def _png_format(fmt: int, header: _img.PngHeader) -> int:
    allowed = _img.png_outputs(header)
    if fmt == _img.UNKNOWN:
        return allowed[0]
    if fmt not in allowed:
        kind = "an RGBA or grey-with-alpha" if header.alpha else "an RGB or grey"
        names = ", ".join(f"{_img.FORMAT_NAMES[f]} ({f})" for f in allowed)
        raise _Fail(_BAD, f"PNGD writes {kind} PNG as {names} or PIXEL_FORMAT_UNKNOWN, not format {fmt}")
    return fmt


@_acl_call("acl.media.dvpp_png_get_image_info", _a.k, _a.u32, init=False, failure=_value_and_ret(0, 0, 0))
def dvpp_png_get_image_info(data: int, data_size: int, /) -> tuple[int, int, int, int]:
    """``width, height, components, ret`` from the PNG's IHDR (host or DVPP memory, as for JPEGs)."""
    header = _png_header("acl.media.dvpp_png_get_image_info", data, data_size)
    return header.width, header.height, header.components, 0


@_acl_call("acl.media.dvpp_png_predict_dec_size", _a.k, _a.u32, _a.i, init=False, failure=_value_and_ret(0))
def dvpp_png_predict_dec_size(data: int, data_size: int, output_pixel_format: int, /) -> tuple[int, int]:
    """``dec_size, ret``: the width rounded up to 128 times the bytes a pixel, times the height rounded up to
    16; PIXEL_FORMAT_UNKNOWN sizes for the largest format the PNG may decode to (RGBA8888 for one with
    alpha)."""
    header = _png_header("acl.media.dvpp_png_predict_dec_size", data, data_size)
    _png_size(header)
    fmt = _png_format(output_pixel_format, header)
    return _align_up(header.width, 128) * _img.PACKED_BYTES[fmt] * _align_up(header.height, 16), 0


def _packed_picture(what: str, handle: int, fmt: int, width: int, height: int) -> _Picture:
    """The output description ``handle`` for a ``width`` x ``height`` picture of packed ``fmt``: width stride
    (bytes) a multiple of 128 pixels and at least the width, height stride a multiple of 16, memory enough."""
    desc: _PicDesc = _get(_PICS, handle, what)
    bpp = _img.PACKED_BYTES[fmt]
    ws, hs = desc.width_stride, desc.height_stride
    if ws % (128 * bpp) or ws < width * bpp:
        raise _Fail(
            _BAD,
            f"{what}: width stride {ws} must be the width rounded up to 128 times {bpp} (a multiple of "
            f"{128 * bpp}, at least {_align_up(width, 128) * bpp}) for {_img.FORMAT_NAMES[fmt]}",
        )
    if hs % 16 or hs < height:
        raise _Fail(
            _BAD, f"{what}: height stride {hs} must be a multiple of 16 and at least the height {height}"
        )
    need = ws * hs
    return _in_memory(what, desc, fmt, need)


@_acl_call("acl.media.dvpp_png_decode_async", _a.k, _a.k, _a.u32, _a.k, _a.k, fault=None)
def dvpp_png_decode_async(channel_desc: int, data: int, size: int, output_desc: int, stream: int, /) -> int:
    """``ret``: queues the decode of the PNG at ``data`` (DVPP memory) into ``output_desc`` on ``stream``.

    As JPEGD: the header is read at the call when the stream has no work left to run, else when the decode
    runs, its refusals then the stream's (timing only: not at all, the output description is checked as
    given for the format it names); a PNG whose data does not decode fails on the stream, its output
    description's ret code saying so. Once decoded, the description's width, height and format are what
    PNGD wrote."""
    _channel(channel_desc)
    if size == 0:
        raise _Fail(_BAD, "size must not be 0")
    src_alloc, src = _dvpp_view("data", data, size)
    desc: _PicDesc = _get(_PICS, output_desc, "output_desc")
    if _TIMING.timing_only:  # the PNG's bytes were never copied: nothing to read, nothing decoded
        fmt = desc.format if desc.format in _img.PACKED_BYTES else _img.RGBA_8888
        out = _packed_picture("output_desc", output_desc, fmt, desc.width, desc.height)
        _queue("media.dvpp_png_decode_async", stream, lambda: None, [src_alloc, out.alloc])
        return 0

    def prepare() -> tuple[_img.PngHeader, int, _Picture]:
        try:
            header = _img.png_header(src.tobytes())
        except _img.BadImage as bad:
            raise _Fail(_BAD, bad.message) from None
        _png_size(header)
        fmt = _png_format(desc.format, header)
        return header, fmt, _packed_picture("output_desc", output_desc, fmt, header.width, header.height)

    ready = prepare() if _settled(stream) else None
    # checked when the decode runs unless ready now; its output memory must be there meanwhile
    out_alloc = _output_memory(desc) if ready is None else ready[2].alloc

    def decode() -> None:
        try:
            header, fmt, out = ready if ready is not None else prepare()
            pixels = _img.decode_png(src.tobytes(), fmt)
        except _img.BadImage as bad:
            raise _failed(desc, "acl.media.dvpp_png_decode_async", _DECODE_FAILED, bad.message) from None
        except _Fail as fail:
            raise _failed(desc, "acl.media.dvpp_png_decode_async", fail.code, fail.message) from None
        _img.write_packed(out.view, pixels, out.width_stride)
        desc.width, desc.height, desc.format, desc.ret_code = header.width, header.height, fmt, 0

    _queue("media.dvpp_png_decode_async", stream, decode, [src_alloc, out_alloc])
    return 0


# -- VPC ------------------------------------------------------------------------------------------------


def _vpc_picture(what: str, handle: int, limits: tuple[int, int, int, int]) -> _Picture:
    desc: _PicDesc = _get(_PICS, handle, what)
    if desc.format not in _img.VPC_FORMATS:
        raise _Fail(
            _BAD, f"{what}: format {desc.format} is not YUV420SP NV12 (1) or NV21 (2), what VPC takes here"
        )
    min_w, min_h, max_w, max_h = limits
    if not (min_w <= desc.width <= max_w and min_h <= desc.height <= max_h):
        raise _Fail(
            _BAD,
            f"{what}: {desc.width}x{desc.height} is outside VPC's {min_w}x{min_h} .. {max_w}x{max_h} on "
            f"{_rules().soc}",
        )
    return _picture(what, handle, desc.format, 16, 2)


def _area(what: str, handle: int, width: int, height: int, left_align: int) -> tuple[int, int, int, int]:
    """An ROI's (left, top, width, height): left a multiple of ``left_align``, top even, right and bottom odd
    (so both sides are even), inside ``width`` x ``height``."""
    roi: _Roi = _get(_ROIS, handle, what)
    if roi.left % left_align or roi.top % 2 or roi.right % 2 == 0 or roi.bottom % 2 == 0:
        raise _Fail(
            _BAD,
            f"{what} ({roi.left}, {roi.right}, {roi.top}, {roi.bottom}): left must be a multiple of {left_align}, "
            "top even, right and bottom odd",
        )
    if roi.right >= width or roi.bottom >= height or roi.right <= roi.left or roi.bottom <= roi.top:
        raise _Fail(
            _BAD,
            f"{what} ({roi.left}, {roi.right}, {roi.top}, {roi.bottom}) is not inside the {width}x{height} picture",
        )
    return roi.left, roi.top, roi.right - roi.left + 1, roi.bottom - roi.top + 1


def _check_scale(src: tuple[int, int], dst: tuple[int, int]) -> None:
    for what, a, b in (("width", src[0], dst[0]), ("height", src[1], dst[1])):
        if not (a <= 32 * b and b <= 16 * a):
            raise _Fail(_BAD, f"VPC scales a {what} by 1/32 to 16: {a} to {b} is outside")


def _vpc(
    api: str,
    channel_desc: int,
    input_desc: int,
    output_desc: int,
    crop: int | None,
    paste: int | None,
    interpolation: int,
    stream: int,
) -> None:
    """Check one VPC crop / resize / paste and queue it: the crop area of the input (the whole picture when
    ``crop`` is None) resized to the paste area of the output (the whole output when ``paste`` is None)."""
    _channel(channel_desc)
    r = _rules()
    src = _vpc_picture("input_desc", input_desc, r.vpc_in)
    dst = _vpc_picture("output_desc", output_desc, r.vpc_out)
    even_w, even_h = src.width & ~1, src.height & ~1
    box = (0, 0, even_w, even_h) if crop is None else _area("crop_area", crop, src.width, src.height, 2)
    if paste is None:
        if dst.width % 2 or dst.height % 2:
            raise _Fail(_BAD, f"output_desc: VPC writes YUV420SP of even sides, not {dst.width}x{dst.height}")
        place = (0, 0, dst.width, dst.height)
    else:
        place = _area("paste_area", paste, dst.width, dst.height, 16)
    if box[2] < 10 or box[3] < 6:
        raise _Fail(_BAD, f"the crop area {box[2]}x{box[3]} is smaller than VPC's 10x6")
    _check_scale(box[2:], place[2:])
    how = _img.INTERPOLATIONS[interpolation]

    def process() -> None:
        y, u, v = _img.read_yuv420(src.view, src.fmt, even_w, even_h, src.width_stride, src.height_stride)
        left, top, w, h = box
        planes = (
            _img.resize(y[top : top + h, left : left + w], place[3], place[2], how),
            _img.resize(
                u[top // 2 : (top + h) // 2, left // 2 : (left + w) // 2], place[3] // 2, place[2] // 2, how
            ),
            _img.resize(
                v[top // 2 : (top + h) // 2, left // 2 : (left + w) // 2], place[3] // 2, place[2] // 2, how
            ),
        )
        _img.write_yuv420_region(
            dst.view, dst.fmt, dst.width_stride, dst.height_stride, place[0], place[1], planes
        )

    _queue(api, stream, process, [src.alloc, dst.alloc])


def _interpolation(resize_config: int) -> int:
    return int(_get(_RESIZES, resize_config, "resize_config").value)


@_acl_call("acl.media.dvpp_vpc_resize_async", _a.k, _a.k, _a.k, _a.k, _a.k, fault=None)
def dvpp_vpc_resize_async(
    channel_desc: int, input_desc: int, output_desc: int, resize_config: int, stream: int, /
) -> int:
    """``ret``: queues the resize of the input picture to the output's width and height."""
    interpolation = _interpolation(resize_config)
    _vpc(
        "media.dvpp_vpc_resize_async",
        channel_desc,
        input_desc,
        output_desc,
        None,
        None,
        interpolation,
        stream,
    )
    return 0


@_acl_call("acl.media.dvpp_vpc_crop_async", _a.k, _a.k, _a.k, _a.k, _a.k, fault=None)
def dvpp_vpc_crop_async(
    channel_desc: int, input_desc: int, output_desc: int, crop_area: int, stream: int, /
) -> int:
    """``ret``: queues the crop area of the input, resized to the whole output."""
    _vpc("media.dvpp_vpc_crop_async", channel_desc, input_desc, output_desc, crop_area, None, 0, stream)
    return 0


@_acl_call("acl.media.dvpp_vpc_crop_resize_async", _a.k, _a.k, _a.k, _a.k, _a.k, _a.k, fault=None)
def dvpp_vpc_crop_resize_async(
    channel_desc: int, input_desc: int, output_desc: int, crop_area: int, resize_config: int, stream: int, /
) -> int:
    """``ret``: crop_async with the resize config's interpolation."""
    interpolation = _interpolation(resize_config)
    _vpc(
        "media.dvpp_vpc_crop_resize_async",
        channel_desc,
        input_desc,
        output_desc,
        crop_area,
        None,
        interpolation,
        stream,
    )
    return 0


@_acl_call("acl.media.dvpp_vpc_crop_and_paste_async", _a.k, _a.k, _a.k, _a.k, _a.k, _a.k, fault=None)
def dvpp_vpc_crop_and_paste_async(
    channel_desc: int, input_desc: int, output_desc: int, crop_area: int, paste_area: int, stream: int, /
) -> int:
    """``ret``: the crop area of the input, resized to the paste area and written there; the rest of the
    output keeps what it held."""
    _vpc(
        "media.dvpp_vpc_crop_and_paste_async",
        channel_desc,
        input_desc,
        output_desc,
        crop_area,
        paste_area,
        0,
        stream,
    )
    return 0


def _batch_crop_args(call: str, *args: object) -> tuple[_Any, ...]:
    """``"kkOkOk"`` and the wrapper's own list checks (TypeError, ValueError as pyACL raises them)."""
    if len(args) != 6:
        raise TypeError(f"{call}() takes exactly 6 arguments ({len(args)} given)")
    channel, src, roi_nums, dst, crop_areas, stream = args
    parsed = [_a.k(call, 1, channel), _a.k(call, 2, src), roi_nums, _a.k(call, 4, dst), crop_areas]
    parsed.append(_a.k(call, 6, stream))
    if not isinstance(roi_nums, list) or not isinstance(crop_areas, list):
        raise TypeError("argument 3 or 5 is not list")
    if not (0 < len(roi_nums) <= _MAX_CROPS and 0 < len(crop_areas) <= _MAX_CROPS):
        raise ValueError("number of crop areas must be between 1 and 256")
    for value in roi_nums:
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{call}: roi_nums must hold ints, not {type(value).__name__}")
        if not 0 <= value <= _MAX_CROPS:
            raise ValueError("number of crop areas must be between 1 and 256")
    parsed[4] = [_a.k(call, 5, area) for area in crop_areas]
    return tuple(parsed)


def _batch_failure(code: int, *args: _Any) -> tuple[int, int]:
    return (args[3] if len(args) > 3 else 0), code


@_acl_call("acl.media.dvpp_vpc_batch_crop_async", parse=_batch_crop_args, fault=None, failure=_batch_failure)
def dvpp_vpc_batch_crop_async(
    channel_desc: int,
    src_batch_pic_descs: int,
    roi_nums: list[int],
    dst_batch_pic_descs: int,
    crop_areas: list[int],
    stream: int,
    /,
) -> tuple[int, int]:
    """``dst_batch, ret``: input picture ``i`` of the source batch gives ``roi_nums[i]`` crops, each resized to
    the next output picture of the destination batch."""
    sources = _get(_BATCHES, src_batch_pic_descs, "src_batch_pic_descs")
    targets = _get(_BATCHES, dst_batch_pic_descs, "dst_batch_pic_descs")
    if len(roi_nums) > len(sources):
        raise _Fail(_BAD, f"roi_nums has {len(roi_nums)} entries for a batch of {len(sources)} pictures")
    if sum(roi_nums) != len(crop_areas):
        raise _Fail(_BAD, f"roi_nums add up to {sum(roi_nums)}, but {len(crop_areas)} crop areas were given")
    if sum(roi_nums) > len(targets):
        raise _Fail(_BAD, f"{sum(roi_nums)} crops for a destination batch of {len(targets)} pictures")
    at = 0
    for source, count in zip(sources, roi_nums):
        for _ in range(count):
            _vpc(
                "media.dvpp_vpc_batch_crop_async",
                channel_desc,
                source,
                targets[at],
                crop_areas[at],
                None,
                0,
                stream,
            )
            at += 1
    return dst_batch_pic_descs, 0


# -- JPEGE ----------------------------------------------------------------------------------------------


@_acl_call("acl.media.dvpp_jpeg_predict_enc_size", _a.k, _a.k, failure=_value_and_ret(0))
def dvpp_jpeg_predict_enc_size(input_desc: int, jpege_config: int, /) -> tuple[int, int]:
    """``size, ret``: room for the JPEG of the input picture: three bytes a pixel plus 8 KiB of headers (a
    bound, as DVPP's prediction is; the encoded file is smaller)."""
    desc: _PicDesc = _get(_PICS, input_desc, "input_desc")
    _get(_JPEGES, jpege_config, "jpege_config")
    return desc.width_stride * max(desc.height_stride, desc.height) * 3 + 8192, 0


@_acl_call("acl.media.dvpp_jpeg_encode_async", _a.k, _a.k, _a.k, _a.k, _a.k, _a.k, fault=None)
def dvpp_jpeg_encode_async(
    channel_desc: int, input_desc: int, data: int, size: int, jpege_config: int, stream: int, /
) -> int:
    """``ret``: encodes the YUV420SP input into DVPP memory at ``data``; ``size`` points to a uint32 in host
    memory holding the room there, and receives the JPEG's size."""
    _channel(channel_desc)
    level = int(_get(_JPEGES, jpege_config, "jpege_config").value)
    src = _vpc_picture("input_desc", input_desc, (32, 32, 8192, 8192))
    _check_host("acl.media.dvpp_jpeg_encode_async", "size", size, 4)
    room = _struct.unpack("<I", _ctypes.string_at(size, 4))[0]
    out_alloc, out = _dvpp_view("data", data, room)

    def encode() -> None:
        import io

        from PIL import Image

        w, h = src.width & ~1, src.height & ~1
        y, u, v = _img.read_yuv420(src.view, src.fmt, w, h, src.width_stride, src.height_stride)
        full = _np.stack([y, u.repeat(2, 0).repeat(2, 1), v.repeat(2, 0).repeat(2, 1)], axis=-1)
        encoded = io.BytesIO()
        Image.fromarray(full, "YCbCr").save(encoded, "JPEG", quality=max(level, 1), subsampling=2)
        blob = _np.frombuffer(encoded.getvalue(), dtype=_np.uint8)
        if len(blob) > room:
            raise _Fail(_BAD, f"the {len(blob)}-byte JPEG does not fit the {room} bytes at data")
        out[: len(blob)] = blob
        _ctypes.memmove(size, _struct.pack("<I", len(blob)), 4)

    _queue("media.dvpp_jpeg_encode_async", stream, encode, [src.alloc, out_alloc])
    return 0
