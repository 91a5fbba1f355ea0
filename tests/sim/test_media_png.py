"""``acl.media``'s PNGD as pyACL programs call it: image info, the size prediction, the decode into packed RGB888
and RGBA8888 with DVPP's strides, and the refusals. PNG is lossless, so the pixels are compared exactly."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ge_plugin import acl_constants as C
from ge_plugin.sim import device_time, sanitizer

SAMPLE = Path(__file__).parent / "samples" / "png_sample.py"
RGB888, RGBA8888, UNKNOWN, NV12 = 12, 16, 10000, 1
H2D, D2H = C.ACL_MEMCPY_HOST_TO_DEVICE, C.ACL_MEMCPY_DEVICE_TO_HOST
FAILURE = 500001
BAD = C.ACL_ERROR_INVALID_PARAM
pytestmark = pytest.mark.filterwarnings("ignore:acl.util.numpy_to_ptr will be deprecated")


def _pixels(width: int, height: int, channels: int) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width]
    planes = [x * 255 // (width - 1), y * 255 // (height - 1), (x * 7 + y * 3) % 256, (x + 2 * y) % 256]
    return np.stack(planes[:channels], -1).astype(np.uint8).squeeze()


def _png(width: int = 150, height: int = 70, mode: str = "RGB") -> tuple[bytes, np.ndarray]:
    """A PNG and the RGBA pixels it holds (grey expanded, alpha 255 where it has none)."""
    channels = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4}[mode]
    image = Image.fromarray(_pixels(width, height, channels), mode)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue(), np.asarray(image.convert("RGBA"))


def _align(n: int, to: int) -> int:
    return (n + to - 1) // to * to


class _Pngd:
    def __init__(self, acl, stream: int):
        self.acl, self.stream = acl, stream
        self.channel = acl.media.dvpp_create_channel_desc()
        assert acl.media.dvpp_create_channel(self.channel) == 0

    def upload(self, data: bytes) -> int:
        dev, ret = self.acl.media.dvpp_malloc(len(data))
        assert ret == 0
        assert self.acl.rt.memcpy(dev, len(data), self.acl.util.bytes_to_ptr(data), len(data), H2D) == 0
        self.keep = data
        return dev

    def output(self, fmt: int, width: int, height: int, stride_w: int, stride_h: int, size: int = 0):
        size = size or stride_w * stride_h
        buf, ret = self.acl.media.dvpp_malloc(size)
        assert ret == 0
        m = self.acl.media
        desc = m.dvpp_create_pic_desc()
        for setter, value in (
            (m.dvpp_set_pic_desc_data, buf),
            (m.dvpp_set_pic_desc_format, fmt),
            (m.dvpp_set_pic_desc_width, width),
            (m.dvpp_set_pic_desc_height, height),
            (m.dvpp_set_pic_desc_width_stride, stride_w),
            (m.dvpp_set_pic_desc_height_stride, stride_h),
            (m.dvpp_set_pic_desc_size, size),
        ):
            assert setter(desc, value) == 0
        return desc, buf, size

    def decode(self, data: bytes, desc: int) -> int:
        return self.acl.media.dvpp_png_decode_async(
            self.channel, self.upload(data), len(data), desc, self.stream
        )

    def read(self, buf: int, size: int) -> np.ndarray:
        host = np.zeros(size, np.uint8)
        assert self.acl.rt.memcpy(self.acl.util.numpy_to_ptr(host), size, buf, size, D2H) == 0
        return host


@pytest.fixture
def pngd(acl, ready):
    return _Pngd(acl, ready)


@pytest.mark.parametrize(
    "mode, components, source",
    [("RGB", 3, RGB888), ("L", 1, RGB888), ("RGBA", 4, RGBA8888), ("LA", 2, RGBA8888)],
)
def test_pngd_decodes_each_source_kind_to_the_formats_the_docs_list_exactly(
    acl, pngd, mode, components, source
):
    data, rgba = _png(150, 70, mode)
    ptr = acl.util.bytes_to_ptr(data)
    assert acl.media.dvpp_png_get_image_info(ptr, len(data)) == (150, 70, components, 0)
    bpp = 4 if source == RGBA8888 else 3
    assert acl.media.dvpp_png_predict_dec_size(ptr, len(data), UNKNOWN) == (256 * bpp * 80, 0)
    assert acl.media.dvpp_png_predict_dec_size(ptr, len(data), RGB888) == (256 * 3 * 80, 0)
    for fmt, expected, pixel_bytes in ((UNKNOWN, source, bpp), (RGB888, RGB888, 3)):
        desc, buf, size = pngd.output(fmt, 150, 70, 256 * pixel_bytes, 80)
        assert pngd.decode(data, desc) == 0 and acl.rt.synchronize_stream(pngd.stream) == 0
        assert acl.media.dvpp_get_pic_desc_format(desc) == expected
        assert acl.media.dvpp_get_pic_desc_ret_code(desc) == 0
        rows = pngd.read(buf, size).reshape(80, 256 * pixel_bytes)[:70, : 150 * pixel_bytes]
        assert (rows.reshape(70, 150, pixel_bytes) == rgba[..., :pixel_bytes]).all()


def test_rgba8888_is_only_for_pngs_with_alpha(acl, pngd):
    data, _ = _png(64, 64, "RGB")
    assert acl.media.dvpp_png_predict_dec_size(acl.util.bytes_to_ptr(data), len(data), RGBA8888) == (0, BAD)
    assert "PNGD writes an RGB or grey PNG as RGB888 (12)" in acl.get_recent_err_msg()
    desc, _, _ = pngd.output(NV12, 64, 64, 512, 64)
    assert pngd.decode(data, desc) == BAD  # a YUV format (the description's default) is not PNGD's


def test_not_a_png_and_sizes_outside_pngds_range_are_invalid(acl, pngd):
    jpeg = io.BytesIO()
    Image.fromarray(_pixels(40, 40, 3)).save(jpeg, "JPEG")
    data = jpeg.getvalue()
    assert acl.media.dvpp_png_get_image_info(acl.util.bytes_to_ptr(data), len(data)) == (0, 0, 0, BAD)
    assert "not a PNG" in acl.get_recent_err_msg()
    for width, height, why in ((16, 40, "width 16"), (40, 5000, "height 5000")):
        small, _ = _png(width, height)
        ptr = acl.util.bytes_to_ptr(small)
        assert acl.media.dvpp_png_get_image_info(ptr, len(small))[3] == 0  # the header reads
        assert acl.media.dvpp_png_predict_dec_size(ptr, len(small), RGB888) == (0, BAD)
        assert f"{why} is outside PNGD's 32..4096" in acl.get_recent_err_msg()


@pytest.mark.parametrize(
    "stride_w, stride_h, size, message",
    [
        (300 * 3, 64, 0, "width stride 900 must be the width rounded up to 128 times 3"),
        (128 * 3, 64, 0, "at least 768"),
        (256 * 3, 60, 0, "height stride 60 must be a multiple of 16"),
        (256 * 3, 64, 1000, "size 1000 is less than the 49152 bytes a RGB888 picture"),
    ],
)
def test_output_strides_and_sizes_follow_pngds_rules(acl, pngd, stride_w, stride_h, size, message):
    data, _ = _png(150, 64)
    desc, _, _ = pngd.output(RGB888, 150, 64, stride_w, stride_h, size)
    assert pngd.decode(data, desc) == BAD
    assert message in acl.get_recent_err_msg()


def test_a_png_whose_data_does_not_decode_fails_on_the_stream(acl, pngd):
    data, _ = _png()
    desc, _, _ = pngd.output(RGB888, 150, 70, 768, 80)
    assert pngd.decode(data[: len(data) // 2], desc) == 0  # the header is fine
    assert acl.rt.synchronize_stream(pngd.stream) == FAILURE
    assert acl.media.dvpp_get_pic_desc_ret_code(desc) == FAILURE
    assert "the PNG does not decode" in acl.get_recent_err_msg()


def test_pngd_reads_and_writes_dvpp_memory_only(acl, pngd, checking):
    data, _ = _png()
    dev, _ = acl.rt.malloc(len(data), 0)
    desc, _, _ = pngd.output(RGB888, 150, 70, 768, 80)
    assert acl.media.dvpp_png_decode_async(pngd.channel, dev, len(data), desc, pngd.stream) == BAD
    assert "DVPP reads and writes memory from acl.media.dvpp_malloc only" in acl.get_recent_err_msg()
    assert [f.kind for f in sanitizer.findings() if f.severity == sanitizer.ERROR] == [
        sanitizer.WRONG_MEMORY_KIND
    ]
    assert acl.rt.free(dev) == 0


def test_timing_only_decodes_no_png(acl, pngd):
    data, _ = _png()
    desc, buf, size = pngd.output(RGB888, 150, 70, 768, 80)
    acl.rt.memset(buf, size, 7, size)
    device_time.set_timing_only(True)
    try:
        assert pngd.decode(data, desc) == 0
        assert acl.rt.synchronize_stream(pngd.stream) == 0
    finally:
        device_time.set_timing_only(False)
    assert (pngd.read(buf, 64) == 7).all()


def test_call_forms_are_pyacls(acl):
    with pytest.raises(TypeError):
        acl.media.dvpp_png_get_image_info(1.5, 10)
    with pytest.raises(TypeError):
        acl.media.dvpp_png_predict_dec_size(1, 10, "12")
    assert acl.media.dvpp_png_get_image_info(0, 10) == (0, 0, 0, BAD)


def test_the_png_sample_runs_under_check_and_its_pixels_are_the_pngs(tmp_path):
    data, rgba = _png(97, 41, "RGBA")
    (tmp_path / "img.png").write_bytes(data)
    out = tmp_path / "out"
    out.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ge_plugin.sim",
            "run",
            "--check",
            str(SAMPLE),
            str(tmp_path / "img.png"),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "png sample OK 97 41 4" in result.stdout
    assert "ge-plugin sim check: 0 errors, 0 unchecked raw pointers, 0 leaked allocations" in result.stderr
    info = {
        line.split()[0]: [int(v) for v in line.split()[1:]]
        for line in (out / "info.txt").read_text().splitlines()
    }
    assert info["source"] == [97, 41, _align(97, 128) * 4, 48, RGBA8888]
    assert info["rgb888"] == [97, 41, _align(97, 128) * 3, 48, RGB888]
    for name, pixel_bytes in (("source", 4), ("rgb888", 3)):
        _, _, stride_w, stride_h, _ = info[name]
        raw = np.fromfile(out / f"{name}.raw", dtype=np.uint8)[: stride_w * stride_h].reshape(
            stride_h, stride_w
        )
        assert (raw[:41, : 97 * pixel_bytes].reshape(41, 97, pixel_bytes) == rgba[..., :pixel_bytes]).all()


def test_palette_and_16_bit_pngs_decode_to_rgb888_as_libpng_expands_them(acl, pngd):
    """Neither is in the docs' table (RGB, grey, RGBA, grey with alpha): the simulator decodes them as libpng
    expands them (a palette to its colours, 16-bit samples to their high byte), as docs/simulator.md says."""
    grey16 = (np.arange(64 * 40, dtype=np.uint16).reshape(40, 64) * 25).astype(np.uint16)
    out = io.BytesIO()
    Image.fromarray(grey16).save(out, "PNG")  # mode I;16
    palette = io.BytesIO()
    Image.fromarray(_pixels(64, 40, 3)).convert("P").save(palette, "PNG")
    expected16 = np.repeat((grey16 >> 8).astype(np.uint8)[..., None], 3, axis=-1)
    expected_palette = np.asarray(Image.open(io.BytesIO(palette.getvalue())).convert("RGB"))
    for data, expected in ((out.getvalue(), expected16), (palette.getvalue(), expected_palette)):
        assert acl.media.dvpp_png_get_image_info(acl.util.bytes_to_ptr(data), len(data))[2:] in (
            (1, 0),
            (3, 0),
        )
        desc, buf, size = pngd.output(UNKNOWN, 64, 40, 384, 48)
        assert pngd.decode(data, desc) == 0 and acl.rt.synchronize_stream(pngd.stream) == 0
        assert acl.media.dvpp_get_pic_desc_format(desc) == RGB888
        rows = pngd.read(buf, size).reshape(48, 384)[:40, : 64 * 3].reshape(40, 64, 3)
        assert (rows == expected).all()
