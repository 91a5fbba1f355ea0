"""DVPP's picture rules and pixel work, for the simulator's ``acl.media``: no pyACL calls here.

The rules are the pyACL docs' "functions and restrictions" pages for JPEGD, PNGD and VPC (aclpythondevg, CANN
8.0 RC1 and 6.0.1): JPEGD decodes baseline Huffman JPEGs only (4:4:4, 4:2:2, 4:2:0, 4:4:0, 4:0:0; no progressive,
arithmetic-coded, lossless or hierarchical ones) of 32x32 to 8192x8192 pixels into semi-planar YUV whose width
stride is the width rounded up to 128 (Atlas 200/300/500 and training cards: the Ascend310 and Ascend910) or
64 (the others) and whose height stride is the height rounded up to 16; VPC reads and writes YUV420SP with
width strides of 16 and height strides of 2; PNGD decodes PNGs of 32x32 to 4096x4096 pixels into packed
RGB888 or RGBA8888 whose width stride (in bytes) is the width rounded up to 128 times 3 or 4 and whose height
stride is the height rounded up to 16. Decoding is libjpeg-turbo's, through Pillow, asked for YCbCr so
no colour conversion happens on the way; resizing is bilinear with half-pixel centres (OpenCV's INTER_LINEAR)
or nearest neighbour. Neither is DVPP's own arithmetic: pixels come within a few levels of a real card's,
not bit-exact (docs/simulator.md says how close).
"""

from __future__ import annotations

import io
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

Plane = npt.NDArray[np.uint8]

# acldvppPixelFormat (acl_dvpp.h)
YUV_400 = 0
YUV_SP_420 = 1  #: NV12
YVU_SP_420 = 2  #: NV21
YUV_SP_422 = 3
YVU_SP_422 = 4
YUV_SP_444 = 5
YVU_SP_444 = 6
YUV_SP_440 = 1000
YVU_SP_440 = 1001
RGB_888 = 12  #: packed R, G, B bytes (PNGD)
RGBA_8888 = 16  #: packed R, G, B, A bytes (PNGD)
UNKNOWN = 10000  #: PIXEL_FORMAT_UNKNOWN: JPEGD keeps the source's sampling (V before U)

FORMAT_NAMES = {
    YUV_400: "YUV400",
    YUV_SP_420: "YUV420SP NV12",
    YVU_SP_420: "YUV420SP NV21",
    YUV_SP_422: "YUV422SP",
    YVU_SP_422: "YVU422SP",
    YUV_SP_444: "YUV444SP",
    YVU_SP_444: "YVU444SP",
    YUV_SP_440: "YUV440SP",
    YVU_SP_440: "YVU440SP",
    RGB_888: "RGB888",
    RGBA_8888: "RGBA8888",
}
#: packed format -> bytes per pixel
PACKED_BYTES = {RGB_888: 3, RGBA_8888: 4}
#: semi-planar format -> (chroma subsampling (x, y), V before U)
_SEMIPLANAR = {
    YUV_SP_420: ((2, 2), False),
    YVU_SP_420: ((2, 2), True),
    YUV_SP_422: ((2, 1), False),
    YVU_SP_422: ((2, 1), True),
    YUV_SP_444: ((1, 1), False),
    YVU_SP_444: ((1, 1), True),
    YUV_SP_440: ((1, 2), False),
    YVU_SP_440: ((1, 2), True),
}
#: JPEG sampling -> what JPEGD may write from it (the docs' table), the source format first
JPEGD_OUTPUTS = {
    "444": (YVU_SP_444, YUV_SP_444, YUV_SP_420, YVU_SP_420),
    "422": (YVU_SP_422, YUV_SP_422, YUV_SP_420, YVU_SP_420),
    "420": (YVU_SP_420, YUV_SP_420),
    "440": (YVU_SP_440, YUV_SP_440, YUV_SP_420, YVU_SP_420),
    "400": (YUV_400, YUV_SP_420, YVU_SP_420),
}
VPC_FORMATS = (YUV_SP_420, YVU_SP_420)
JPEG_MIN, JPEG_MAX = 32, 8192
PNG_MIN, PNG_MAX = 32, 4096

#: the resize algorithms of acldvppSetResizeConfigInterpolation: 0 (a high-order filter on the Ascend310 and
#: Ascend910, bilinear elsewhere), 1 and 3 bilinear, 2 and 4 nearest, 5 a high-order filter; the filters are
#: done as bilinear here
BILINEAR, NEAREST = "bilinear", "nearest"
INTERPOLATIONS = {0: BILINEAR, 1: BILINEAR, 2: NEAREST, 3: BILINEAR, 4: NEAREST, 5: BILINEAR}


class BadImage(Exception):
    """An image DVPP refuses; ``unsupported``: a JPEG of a kind JPEGD does not decode (not a broken file)."""

    def __init__(self, message: str, unsupported: bool = False):
        super().__init__(message)
        self.message = message
        self.unsupported = unsupported


class Rules(NamedTuple):
    """The alignment and size rules of one SoC's DVPP."""

    soc: str
    jpegd_width_align: int
    vpc_in: tuple[int, int, int, int]  #: min width, min height, max width, max height
    vpc_out: tuple[int, int, int, int]


def rules(soc: str) -> Rules:
    """The rules of ``soc``: the first DVPP (Ascend310, Ascend910) or the later one (310P, 310B, 910B ...)."""
    later = any(soc.startswith(p) for p in ("Ascend310P", "Ascend310B", "Ascend910B", "Ascend910_93"))
    if not later and (soc.startswith("Ascend310") or soc.startswith("Ascend910")):
        return Rules(soc, 128, (32, 6, 4096, 4096), (32, 6, 4096, 4096))
    return Rules(soc, 64, (10, 6, 8192, 8192), (10, 6, 4096, 8192))


def align_up(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def picture_bytes(fmt: int, width_stride: int, height_stride: int) -> int:
    """The bytes a picture of these strides occupies (YUV400: the luma plane only; a packed format's width
    stride is in bytes already)."""
    if fmt == YUV_400 or fmt in PACKED_BYTES:
        return width_stride * height_stride
    (sx, sy), _ = _SEMIPLANAR[fmt]
    return width_stride * height_stride + 2 * width_stride * height_stride // (sx * sy)


class JpegHeader(NamedTuple):
    width: int
    height: int
    components: int
    sampling: str  #: "444", "422", "420", "440" or "400"


# SOF markers: 0xC0 baseline and 0xC1 extended sequential Huffman are what JPEGD decodes
_SOF_KINDS = {
    0xC0: None,
    0xC1: None,
    0xC2: "progressive",
    0xC3: "lossless",
    0xC5: "hierarchical (differential sequential)",
    0xC6: "hierarchical (differential progressive)",
    0xC7: "hierarchical (differential lossless)",
    0xC9: "arithmetic-coded",
    0xCA: "arithmetic-coded progressive",
    0xCB: "arithmetic-coded lossless",
    0xCD: "arithmetic-coded hierarchical",
    0xCE: "arithmetic-coded hierarchical progressive",
    0xCF: "arithmetic-coded hierarchical lossless",
}


def jpeg_header(data: bytes) -> tuple[JpegHeader, str | None]:
    """The frame header of a JPEG, and why JPEGD cannot decode it (None: it can); BadImage when ``data`` is
    no JPEG or its header is cut short. Reads the markers only (Pillow decodes)."""
    if data[:2] != b"\xff\xd8":
        raise BadImage(f"not a JPEG: it starts with {data[:4].hex() or 'nothing'}, not the SOI marker ffd8")
    at = 2
    while True:
        while at < len(data) and data[at] != 0xFF:
            at += 1  # tolerate garbage between segments, as libjpeg does
        while at < len(data) and data[at] == 0xFF:
            at += 1
        if at + 3 > len(data):
            raise BadImage("the JPEG ends before its frame header (SOF marker)")
        marker = data[at]
        length = int.from_bytes(data[at + 1 : at + 3], "big")
        if marker in _SOF_KINDS:
            return _frame(data[at + 3 : at + 1 + length], marker, length)
        if marker in (0xD9, 0xDA):
            raise BadImage("the JPEG has no frame header (SOF marker) before its scan")
        at += 1 + length


def _frame(segment: bytes, marker: int, length: int) -> tuple[JpegHeader, str | None]:
    if len(segment) < 6 or length < 8:
        raise BadImage("the JPEG's frame header is cut short")
    height = int.from_bytes(segment[1:3], "big")
    width = int.from_bytes(segment[3:5], "big")
    components = segment[5]
    if len(segment) < 6 + 3 * components:
        raise BadImage("the JPEG's frame header is cut short")
    factors = [(segment[6 + 3 * i + 1] >> 4, segment[6 + 3 * i + 1] & 15) for i in range(components)]
    why = _SOF_KINDS[marker]
    if components == 1:
        sampling = "400"
    elif components == 3 and factors[1] == factors[2] == (1, 1):
        sampling = {(1, 1): "444", (2, 1): "422", (2, 2): "420", (1, 2): "440"}.get(factors[0], "")
    else:
        sampling = ""
    if not sampling and why is None:
        why = f"{components} components sampled {factors} (JPEGD takes 4:4:4, 4:2:2, 4:2:0, 4:4:0 and 4:0:0)"
    if why is None and segment[0] != 8:
        why = f"{segment[0]}-bit samples (JPEGD takes 8-bit)"
    return JpegHeader(width, height, components, sampling or "444"), why


def decodable(data: bytes) -> JpegHeader:
    """The header of a JPEG that JPEGD decodes; BadImage (``unsupported`` for a kind it does not decode)."""
    header, why = jpeg_header(data)
    if why is not None:
        raise BadImage(f"JPEGD does not decode {why} JPEGs", unsupported=True)
    for what, value in (("width", header.width), ("height", header.height)):
        if not JPEG_MIN <= value <= JPEG_MAX:
            raise BadImage(f"the JPEG's {what} {value} is outside JPEGD's {JPEG_MIN}..{JPEG_MAX}")
    return header


def decode(data: bytes) -> tuple[Plane, Plane | None, Plane | None]:
    """Y, Cb, Cr at full resolution (Cb, Cr None for a grey JPEG), as libjpeg-turbo decodes them."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.mode != "L":
                image.draft("YCbCr", image.size)
            image.load()
            pixels = np.asarray(image.convert("YCbCr") if image.mode not in ("L", "YCbCr") else image)
    except (OSError, ValueError, SyntaxError) as exc:
        raise BadImage(f"the JPEG does not decode: {exc}") from None
    if pixels.ndim == 2:
        return pixels, None, None
    return pixels[..., 0], pixels[..., 1], pixels[..., 2]


class PngHeader(NamedTuple):
    width: int
    height: int
    components: int  #: colour channels: 1 grey, 2 grey and alpha, 3 RGB (and palette), 4 RGBA
    alpha: bool  #: RGBA or grey with alpha (what PNGD may write as RGBA8888)


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: PNG colour type -> (components, alpha); a palette decodes to RGB (its tRNS alpha is not kept)
_PNG_COLOURS = {0: (1, False), 2: (3, False), 3: (3, False), 4: (2, True), 6: (4, True)}


def png_header(data: bytes) -> PngHeader:
    """The IHDR of a PNG; BadImage when ``data`` is no PNG or its header is cut short or not one PNG allows."""
    if data[:8] != _PNG_SIGNATURE:
        raise BadImage(f"not a PNG: it starts with {data[:8].hex() or 'nothing'}, not the PNG signature")
    if len(data) < 33 or data[12:16] != b"IHDR":
        raise BadImage("the PNG ends before its header (IHDR chunk)")
    width = int.from_bytes(data[16:20], "big")
    height = int.from_bytes(data[20:24], "big")
    depth, colour = data[24], data[25]
    if colour not in _PNG_COLOURS or depth not in (1, 2, 4, 8, 16) or not width or not height:
        raise BadImage(f"the PNG's header is not one PNG allows (colour type {colour}, bit depth {depth})")
    components, alpha = _PNG_COLOURS[colour]
    return PngHeader(width, height, components, alpha)


def png_outputs(header: PngHeader) -> tuple[int, ...]:
    """What PNGD writes from this PNG (the docs' table), the source's format (PIXEL_FORMAT_UNKNOWN) first:
    RGB and grey as RGB888; RGBA and grey with alpha as RGBA8888 or RGB888."""
    return (RGBA_8888, RGB_888) if header.alpha else (RGB_888,)


def decode_png(data: bytes, fmt: int) -> Plane:
    """The PNG's pixels as ``fmt`` (RGB888 or RGBA8888), height x width x 3 or 4, as libpng decodes them
    through Pillow (16-bit samples keep their high byte)."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as opened:
            opened.load()
            image: Image.Image = opened
            if image.mode in ("I;16", "I;16B", "I"):
                image = Image.fromarray((np.asarray(image).astype(np.uint32) >> 8).astype(np.uint8), "L")
            pixels = np.asarray(image.convert("RGBA" if fmt == RGBA_8888 else "RGB"))
    except (OSError, ValueError, SyntaxError) as exc:
        raise BadImage(f"the PNG does not decode: {exc}") from None
    return pixels


def write_packed(buf: Plane, pixels: Plane, width_stride: int) -> None:
    """Write packed pixels (height x width x bytes per pixel) into ``buf`` in rows of ``width_stride`` bytes."""
    h, w, bpp = pixels.shape
    buf[: width_stride * h].reshape(h, width_stride)[:, : w * bpp] = pixels.reshape(h, w * bpp)


def _subsample(plane: Plane, sx: int, sy: int) -> Plane:
    """Chroma averaged over sx x sy blocks (the plane's sides are multiples of them)."""
    if sx == sy == 1:
        return plane
    total = np.zeros((plane.shape[0] // sy, plane.shape[1] // sx), np.uint16)
    for dy in range(sy):  # strided adds: a reshape-and-sum over small axes is several times slower
        for dx in range(sx):
            total += plane[dy::sy, dx::sx]
    total += sx * sy // 2
    total //= sx * sy
    averaged: Plane = total.astype(np.uint8)
    return averaged


def write_semiplanar(
    buf: Plane, fmt: int, y: Plane, cb: Plane | None, cr: Plane | None, width_stride: int, height_stride: int
) -> None:
    """Write full-resolution Y, Cb, Cr (sides even) into ``buf`` as ``fmt`` with these strides."""
    h, w = y.shape
    luma = buf[: width_stride * height_stride].reshape(height_stride, width_stride)
    luma[:h, :w] = y
    if fmt == YUV_400:
        return
    (sx, sy), vu = _SEMIPLANAR[fmt]
    if cb is None or cr is None:
        cb = cr = np.full_like(y, 128)
    u, v = _subsample(cb, sx, sy), _subsample(cr, sx, sy)
    rows, row_bytes = height_stride // sy, 2 * width_stride // sx
    chroma = buf[width_stride * height_stride : width_stride * height_stride + rows * row_bytes]
    pairs = chroma.reshape(rows, row_bytes)[: h // sy, : 2 * (w // sx)].reshape(h // sy, w // sx, 2)
    pairs[..., 0], pairs[..., 1] = (v, u) if vu else (u, v)


def subsampling(fmt: int) -> tuple[int, int]:
    """How a format subsamples chroma, (x, y): (2, 2) for YUV420SP; (1, 1) for YUV400 (it has none)."""
    return (1, 1) if fmt == YUV_400 else _SEMIPLANAR[fmt][0]


def read_yuv420(
    buf: Plane, fmt: int, width: int, height: int, width_stride: int, height_stride: int
) -> tuple[Plane, Plane, Plane]:
    """Y (height x width, both even) and U, V (half each way) of a YUV420SP picture in ``buf``."""
    luma = buf[: width_stride * height_stride].reshape(height_stride, width_stride)[:height, :width]
    chroma = buf[width_stride * height_stride : width_stride * height_stride * 3 // 2]
    chroma = chroma.reshape(height_stride // 2, width_stride)
    pairs = chroma[: height // 2, : width // 2 * 2].reshape(height // 2, width // 2, 2)
    u, v = (pairs[..., 1], pairs[..., 0]) if fmt == YVU_SP_420 else (pairs[..., 0], pairs[..., 1])
    return luma, u, v


def write_yuv420_region(
    buf: Plane,
    fmt: int,
    width_stride: int,
    height_stride: int,
    left: int,
    top: int,
    planes: tuple[Plane, ...],
) -> None:
    """Write Y, U, V (even-sided) into a YUV420SP picture at (left, top) (both even)."""
    y, u, v = planes
    h, w = y.shape
    luma = buf[: width_stride * height_stride].reshape(height_stride, width_stride)
    luma[top : top + h, left : left + w] = y
    chroma = buf[width_stride * height_stride : width_stride * height_stride * 3 // 2]
    rows = chroma.reshape(height_stride // 2, width_stride)
    pairs = rows[top // 2 : top // 2 + h // 2, left : left + w].reshape(h // 2, w // 2, 2)
    pairs[..., 0], pairs[..., 1] = (v, u) if fmt == YVU_SP_420 else (u, v)


def resize(plane: Plane, out_h: int, out_w: int, how: str) -> Plane:
    """``plane`` resized to out_h x out_w: bilinear with half-pixel centres, or nearest neighbour."""
    h, w = plane.shape
    if (h, w) == (out_h, out_w):
        return plane.copy()
    if how == NEAREST:
        rows = np.minimum((np.arange(out_h) * h) // out_h, h - 1)
        cols = np.minimum((np.arange(out_w) * w) // out_w, w - 1)
        picked: Plane = plane[rows][:, cols]
        return picked
    ys, y0, y1 = _taps(h, out_h)
    xs, x0, x1 = _taps(w, out_w)
    src = plane.astype(np.float32)
    top = src[y0] * (1 - ys)[:, None] + src[y1] * ys[:, None]
    out = top[:, x0] * (1 - xs)[None, :] + top[:, x1] * xs[None, :]
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _taps(size: int, out: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    pos = (np.arange(out, dtype=np.float32) + 0.5) * (size / out) - 0.5
    pos = np.clip(pos, 0, size - 1)
    low = np.floor(pos).astype(np.intp)
    high = np.minimum(low + 1, size - 1)
    return (pos - low).astype(np.float32), low, high
