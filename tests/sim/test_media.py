"""``acl.media``: DVPP memory, JPEGD, VPC and JPEGE as pyACL programs call them, their refusals, and how close
the pixels are to a decode and resize done on the host with Pillow."""

from __future__ import annotations

import ctypes
import io
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ge_plugin import acl_constants as C
from ge_plugin.sim import _state, device_time, sanitizer

SAMPLE = Path(__file__).parent / "samples" / "dvpp_sample.py"
NV12, NV21 = 1, 2
H2D, D2H = C.ACL_MEMCPY_HOST_TO_DEVICE, C.ACL_MEMCPY_DEVICE_TO_HOST
UNSUPPORTED_JPEG, FAILURE = 148052, 500001
pytestmark = pytest.mark.filterwarnings("ignore:acl.util.numpy_to_ptr will be deprecated")


def _gradient(width: int, height: int) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width]
    return np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), (x + y) % 256], -1).astype(
        np.uint8
    )


def _jpeg(width: int = 243, height: int = 181, **options: object) -> bytes:
    out = io.BytesIO()
    Image.fromarray(_gradient(width, height)).save(out, "JPEG", quality=95, **options)
    return out.getvalue()


def _ycbcr(data: bytes) -> np.ndarray:
    """The reference: Pillow's own decode, to RGB and back to YCbCr (what a host pipeline would do)."""
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB").convert("YCbCr")).astype(np.int16)


def _planes(raw: np.ndarray, width: int, height: int, stride_w: int, stride_h: int, nv21: bool = False):
    luma = raw[: stride_w * stride_h].reshape(stride_h, stride_w)[:height, :width]
    chroma = raw[stride_w * stride_h : stride_w * stride_h * 3 // 2].reshape(stride_h // 2, stride_w)
    pairs = chroma[: height // 2, :width].reshape(height // 2, width // 2, 2)
    u, v = (pairs[..., 1], pairs[..., 0]) if nv21 else (pairs[..., 0], pairs[..., 1])
    return luma.astype(np.int16), u.astype(np.int16), v.astype(np.int16)


def test_the_sample_runs_under_check_and_its_pictures_are_close_to_pillows(tmp_path):
    """The DVPP sample (every call of acl.media it needs) runs unmodified, under --check with no finding; each
    picture it made is within a few levels of the same step done on the host."""
    data = _jpeg()
    (tmp_path / "img.jpg").write_bytes(data)
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
            str(tmp_path / "img.jpg"),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "dvpp sample OK 243 181" in result.stdout
    assert "ge-plugin sim check: 0 errors, 0 unchecked raw pointers, 0 leaked allocations" in result.stderr
    info = {
        line.split()[0]: [int(v) for v in line.split()[1:]]
        for line in (out / "info.txt").read_text().splitlines()
    }
    assert info["image"] == [243, 181, 3]
    assert info["decode_nv12"] == [
        242,
        180,
        256,
        192,
    ]  # odd sides rounded down; the sample's 128 x 16 strides

    def planes(name: str, nv21: bool = False):
        w, h, sw, sh = info[name]
        return _planes(np.fromfile(out / f"{name}.yuv", dtype=np.uint8), w, h, sw, sh, nv21)

    ref = _ycbcr(data)[:180, :242]
    y, u, v = planes("decode_nv12")
    # libjpeg-turbo's own YCbCr against the same decode through RGB and back: the round trip's rounding
    assert np.abs(y - ref[..., 0]).max() <= 4 and np.abs(y - ref[..., 0]).mean() < 0.5
    for plane, ref_plane in ((u, ref[..., 1]), (v, ref[..., 2])):
        averaged = ref_plane.reshape(90, 2, 121, 2).mean(axis=(1, 3))
        assert np.abs(plane - averaged).max() <= 5 and np.abs(plane - averaged).mean() < 1.0
    y21, u21, v21 = planes("decode_nv21", nv21=True)
    assert (y21 == y).all() and (u21 == u).all() and (v21 == v).all()

    def pil_resize(plane: np.ndarray, w: int, h: int) -> np.ndarray:
        return np.asarray(Image.fromarray(plane.astype(np.uint8)).resize((w, h), Image.BILINEAR)).astype(
            np.int16
        )

    ry, _, _ = planes("resize_224x224")
    assert np.abs(ry - pil_resize(y, 224, 224)).mean() < 1.0
    cy, cu, _ = planes("crop_64x48")
    assert (cy == y[4:52, 10:74]).all() and (cu == u[2:26, 5:37]).all()  # a crop of its own size is a copy
    sy, _, _ = planes("crop_resize_32x24")
    assert np.abs(sy - pil_resize(y[4:52, 10:74], 32, 24)).mean() < 2.0
    py, pu, _ = planes("paste_128x96")
    inside = py[16:80, 32:96]
    assert np.abs(inside - pil_resize(y, 64, 64)).mean() < 2.5
    py[16:80, 32:96] = 128
    assert (py == 128).all() and (pu[:8] == 128).all()  # outside the paste area the canvas is untouched
    b0, _, _ = planes("batch_0_32x32")
    b1, _, _ = planes("batch_1_32x32")
    assert (b0 == y[0:32, 0:32]).all()
    assert np.abs(b1 - pil_resize(y[32:96, 32:96], 32, 32)).mean() < 2.0
    encoded = _ycbcr((out / "encoded.jpg").read_bytes())[..., 0]
    assert encoded.shape == (224, 224) and np.abs(encoded - ry).mean() < 2.0


class _Dvpp:
    """A channel, a stream and helpers over the raw calls, for the refusal tests."""

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

    def picture(self, width: int, height: int, stride_w: int, stride_h: int, fmt: int = NV12, size: int = 0):
        size = size or stride_w * stride_h * 3 // 2
        buf, ret = self.acl.media.dvpp_malloc(size)
        assert ret == 0
        desc = self.acl.media.dvpp_create_pic_desc()
        m = self.acl.media
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
        return desc, buf

    def decode(self, data: bytes, desc: int) -> int:
        dev = self.upload(data)
        return self.acl.media.dvpp_jpeg_decode_async(self.channel, dev, len(data), desc, self.stream)


@pytest.fixture
def dvpp(acl, ready):
    return _Dvpp(acl, ready)


@pytest.mark.parametrize(
    "options, why", [({"progressive": True}, "progressive"), ({"arithmetic": True}, "arithmetic-coded")]
)
def test_jpeg_kinds_jpegd_does_not_decode_are_unsupported_jpeg(acl, dvpp, options, why):
    data = _jpeg(**{k: v for k, v in options.items() if k != "arithmetic"})
    if options.get("arithmetic"):
        data = data.replace(b"\xff\xc0", b"\xff\xc9", 1)  # the frame header says arithmetic coding
    ptr = acl.util.bytes_to_ptr(data)
    assert acl.media.dvpp_jpeg_get_image_info(ptr, len(data)) == (243, 181, 3, 0)  # the header reads
    assert acl.media.dvpp_jpeg_predict_dec_size(ptr, len(data), NV12) == (0, UNSUPPORTED_JPEG)
    assert f"JPEGD does not decode {why} JPEGs" in acl.get_recent_err_msg()
    desc, _ = dvpp.picture(243, 181, 256, 192)
    assert dvpp.decode(data, desc) == UNSUPPORTED_JPEG


def test_not_a_jpeg_and_sizes_outside_jpegds_range_are_invalid(acl, dvpp):
    png = io.BytesIO()
    Image.fromarray(_gradient(40, 40)).save(png, "PNG")
    data = png.getvalue()
    assert acl.media.dvpp_jpeg_get_image_info(acl.util.bytes_to_ptr(data), len(data)) == (0, 0, 0, 100000)
    assert "not a JPEG" in acl.get_recent_err_msg()
    small = _jpeg(16, 16)
    assert acl.media.dvpp_jpeg_predict_dec_size(acl.util.bytes_to_ptr(small), len(small), NV12)[1] == 100000
    assert "width 16 is outside JPEGD's 32..8192" in acl.get_recent_err_msg()


def test_a_jpeg_whose_data_does_not_decode_fails_on_the_stream(acl, dvpp):
    data = _jpeg()
    cut = data[: len(data) // 2]
    desc, _ = dvpp.picture(243, 181, 256, 192)
    assert dvpp.decode(cut, desc) == 0  # the header is fine
    assert acl.rt.synchronize_stream(dvpp.stream) == FAILURE
    assert acl.media.dvpp_get_pic_desc_ret_code(desc) == FAILURE
    assert "does not decode" in acl.get_recent_err_msg()


@pytest.mark.parametrize(
    "soc, stride, ok",
    [
        ("Ascend310", 320, False),
        ("Ascend310", 384, True),
        ("Ascend910B3", 320, True),
        ("Ascend910B3", 300, False),
    ],
)
def test_jpegd_width_strides_follow_the_socs_rule(acl, monkeypatch, soc, stride, ok):
    monkeypatch.setenv("GE_PLUGIN_SIM_SOC", soc)
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    stream, _ = acl.rt.create_stream()
    dvpp = _Dvpp(acl, stream)
    desc, _ = dvpp.picture(300, 100, stride, 112, size=384 * 112 * 3 // 2)
    assert dvpp.decode(_jpeg(300, 100), desc) == (0 if ok else C.ACL_ERROR_INVALID_PARAM)
    if not ok:
        assert (
            f"width stride {stride} must be a multiple of {128 if soc == 'Ascend310' else 64}"
            in acl.get_recent_err_msg()
        )
    assert acl.rt.synchronize_stream(stream) == 0


def test_an_output_buffer_smaller_than_its_strides_is_refused(acl, dvpp):
    desc, _ = dvpp.picture(243, 181, 256, 192, size=256 * 192)
    assert dvpp.decode(_jpeg(), desc) == C.ACL_ERROR_INVALID_PARAM
    assert (
        "less than the 73728 bytes a YUV420SP NV12 picture of strides 256x192 takes"
        in acl.get_recent_err_msg()
    )


def test_dvpp_reads_and_writes_dvpp_memory_only_and_each_free_takes_its_own(acl, dvpp, checking):
    data = _jpeg()
    dev, _ = acl.rt.malloc(len(data), 0)
    desc, buf = dvpp.picture(243, 181, 256, 192)
    assert acl.media.dvpp_jpeg_decode_async(dvpp.channel, dev, len(data), desc, dvpp.stream) == 100000
    assert "DVPP reads and writes memory from acl.media.dvpp_malloc only" in acl.get_recent_err_msg()
    assert acl.media.dvpp_free(dev) == 100000 and acl.rt.free(buf) == 100000
    assert "free it with acl.media.dvpp_free" in acl.get_recent_err_msg()
    kinds = [f.kind for f in sanitizer.findings() if f.severity == sanitizer.ERROR]
    assert kinds == [sanitizer.WRONG_MEMORY_KIND] * 3
    assert acl.rt.free(dev) == 0 and acl.media.dvpp_free(buf) == 0
    assert acl.media.dvpp_free(buf) == 100000 and "freed by acl.media.dvpp_free" in acl.get_recent_err_msg()


def test_dvpp_memory_freed_before_the_decode_runs_fails_it(acl, dvpp):
    data = _jpeg()
    desc, buf = dvpp.picture(243, 181, 256, 192)
    gate = threading.Event()
    _state.stream(dvpp.stream, _state.current_context()).submit(gate.wait)
    assert dvpp.decode(data, desc) == 0
    assert acl.media.dvpp_free(buf) == 0
    gate.set()
    assert acl.rt.synchronize_stream(dvpp.stream) == C.ACL_ERROR_RT_MEMORY_FREE


def test_timing_only_decodes_nothing(acl, dvpp):
    desc, buf = dvpp.picture(243, 181, 256, 192)
    acl.rt.memset(buf, 256 * 192 * 3 // 2, 7, 256 * 192 * 3 // 2)
    device_time.set_timing_only(True)
    try:
        assert dvpp.decode(_jpeg(), desc) == 0
        assert acl.rt.synchronize_stream(dvpp.stream) == 0
    finally:
        device_time.set_timing_only(False)
    host = np.zeros(64, np.uint8)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(host), 64, buf, 64, D2H) == 0
    assert (host == 7).all()


def test_dvpp_memory_never_freed_is_a_leak_naming_dvpp_malloc(acl, ready, checking):
    acl.media.dvpp_malloc(100)  # leaked-dvpp
    assert acl.finalize() == 0
    (leak,) = [f for f in sanitizer.findings() if f.kind == sanitizer.LEAK]
    assert "acl.media.dvpp_malloc(100) at" in leak.message and "test_media.py" in leak.message


def test_vpc_refuses_what_dvpp_refuses(acl, dvpp):
    m = acl.media
    src, _ = dvpp.picture(64, 64, 64, 64)
    dst, _ = dvpp.picture(32, 32, 32, 32)
    odd = m.dvpp_create_roi_config(1, 30, 0, 31)
    assert m.dvpp_vpc_crop_async(dvpp.channel, src, dst, odd, dvpp.stream) == 100000
    assert "left must be a multiple of 2, top even, right and bottom odd" in acl.get_recent_err_msg()
    outside = m.dvpp_create_roi_config(0, 65, 0, 31)
    assert m.dvpp_vpc_crop_async(dvpp.channel, src, dst, outside, dvpp.stream) == 100000
    big, _ = dvpp.picture(2048, 64, 2048, 64)
    config = m.dvpp_create_resize_config()
    assert m.dvpp_vpc_resize_async(dvpp.channel, src, big, config, dvpp.stream) == 100000
    assert "VPC scales a width by 1/32 to 16: 64 to 2048 is outside" in acl.get_recent_err_msg()
    bad_stride, _ = dvpp.picture(32, 32, 40, 32)
    assert m.dvpp_vpc_resize_async(dvpp.channel, src, bad_stride, config, dvpp.stream) == 100000
    assert "width stride 40 must be a multiple of 16" in acl.get_recent_err_msg()
    assert m.dvpp_set_resize_config_interpolation(config, 6) == 100000
    unopened = m.dvpp_create_channel_desc()
    assert m.dvpp_vpc_resize_async(unopened, src, dst, config, dvpp.stream) == 100000
    assert "call acl.media.dvpp_create_channel first" in acl.get_recent_err_msg()
    assert m.dvpp_vpc_resize_async(dvpp.channel, config, dst, config, dvpp.stream) == 100000
    assert "is a resize config, not a picture description" in acl.get_recent_err_msg()


def test_call_forms_and_argument_types_are_pyacls(acl, dvpp):
    m = acl.media
    with pytest.raises(TypeError):
        m.dvpp_vpc_batch_crop_async(dvpp.channel, 1, (1,), 1, [1], dvpp.stream)
    with pytest.raises(ValueError, match="between 1 and 256"):
        m.dvpp_vpc_batch_crop_async(dvpp.channel, 1, [], 1, [1], dvpp.stream)
    with pytest.raises(TypeError):
        m.dvpp_create_roi_config(0, 1.5, 0, 1)
    assert m.dvpp_get_pic_desc_width(12345) == 0  # a getter of a bad handle: no ret, a 0
    batch = m.dvpp_create_batch_pic_desc(2)
    assert m.dvpp_get_pic_desc(batch, 2) == 0 and m.dvpp_create_batch_pic_desc(0) == 0
    assert m.dvpp_destroy_pic_desc(m.dvpp_get_pic_desc(batch, 0)) == 100000
    assert m.dvpp_destroy_batch_pic_desc(batch) == 0
    assert m.dvpp_malloc(0) == (0, 100000)


def test_acllite_style_image_processing_feeds_the_model(oms, tmp_path):
    """An acllite-style program (samples/lite/lite_imageproc.py): JPEGs decoded with JPEGD, resized with VPC
    to the model's 16 x 16 gear, converted to RGB on the host and classified; the logits match onnxruntime on
    the same steps done by Pillow within the pixel tolerance."""
    from ge_plugin.models import tiny_cnn

    images = []
    for i, (w, h) in enumerate([(97, 65), (64, 80)]):
        out = io.BytesIO()
        Image.fromarray(np.roll(_gradient(w, h), 17 * i, axis=1)).save(out, "JPEG", quality=95)
        (tmp_path / f"{i}.jpg").write_bytes(out.getvalue())
        rgb = np.asarray(
            Image.open(io.BytesIO(out.getvalue())).convert("RGB").resize((16, 16), Image.BILINEAR)
        )
        images.append(rgb.astype(np.float32).transpose(2, 0, 1) / 255.0)
    import onnxruntime as ort

    session = ort.InferenceSession(tiny_cnn().SerializeToString(), providers=["CPUExecutionProvider"])
    (expected,) = session.run(["logits"], {"images": np.stack(images)})
    sample = Path(__file__).parent / "samples" / "lite_dvpp_sample.py"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ge_plugin.sim",
            "run",
            "--check",
            str(sample),
            str(oms["cnn_hw"]),
            str(tmp_path / "0.jpg"),
            str(tmp_path / "1.jpg"),
            str(tmp_path / "logits.npy"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ASCEND_SLOG_PRINT_TO_STDOUT": "0"},
    )
    assert result.returncode == 0, result.stderr
    assert "0 errors, 0 unchecked raw pointers, 0 leaked allocations" in result.stderr
    logits = np.load(tmp_path / "logits.npy")
    assert logits.shape == (2, 10)
    np.testing.assert_allclose(logits, expected, atol=0.15)
    assert (logits.argmax(1) == expected.argmax(1)).all()


@pytest.mark.parametrize(
    "subsampling, fmt, factors",
    [(0, 5, (1, 1)), (0, 6, (1, 1)), (1, 3, (2, 1)), (1, 4, (2, 1)), (0, 10000, (1, 1)), (1, 1, (2, 2))],
)
def test_jpegd_writes_each_semiplanar_format_the_docs_list(acl, dvpp, subsampling, fmt, factors):
    """4:4:4 as YUV444SP / YVU444SP (and PIXEL_FORMAT_UNKNOWN: the source's sampling, V first), 4:2:2 as
    YUV422SP / YVU422SP or NV12: the chroma plane holds (U, V) pairs at the format's subsampling."""
    data = _jpeg(96, 64, subsampling=subsampling)
    size, ret = acl.media.dvpp_jpeg_predict_dec_size(acl.util.bytes_to_ptr(data), len(data), fmt)
    sx, sy = factors
    assert ret == 0 and size == 128 * 64 + 2 * 128 * 64 // (sx * sy)
    desc, buf = dvpp.picture(96, 64, 128, 64, fmt, size=size)
    assert dvpp.decode(data, desc) == 0 and acl.rt.synchronize_stream(dvpp.stream) == 0
    host = np.zeros(size, np.uint8)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(host), size, buf, size, D2H) == 0
    ref = _ycbcr(data)
    rows = host[128 * 64 :].reshape(64 // sy, 2 * 128 // sx)[:, : 2 * 96 // sx].reshape(64 // sy, 96 // sx, 2)
    v_first = fmt in (6, 4, 10000)
    u, v = (rows[..., 1], rows[..., 0]) if v_first else (rows[..., 0], rows[..., 1])
    for plane, ref_plane in ((u, ref[..., 1]), (v, ref[..., 2])):
        averaged = ref_plane.reshape(64 // sy, sy, 96 // sx, sx).mean(axis=(1, 3))
        assert np.abs(plane.astype(np.int16) - averaged).mean() < 1.5
    assert acl.media.dvpp_get_pic_desc_format(desc) == (6 if fmt == 10000 else fmt)


def test_a_jpeg_an_async_copy_brings_is_read_when_the_decode_runs(acl, dvpp):
    """JPEGD runs in stream order after the copy queued before it (the engine's pipeline): its header is read
    when the decode runs; what it refuses then fails on the stream, with the output's ret code set."""
    data = _jpeg()
    pinned, _ = acl.rt.malloc_host(len(data))
    ctypes.memmove(pinned, data, len(data))
    dev, _ = acl.media.dvpp_malloc(len(data))
    desc, buf = dvpp.picture(243, 181, 256, 192)
    assert acl.rt.memcpy_async(dev, len(data), pinned, len(data), H2D, dvpp.stream) == 0
    assert acl.media.dvpp_jpeg_decode_async(dvpp.channel, dev, len(data), desc, dvpp.stream) == 0
    assert acl.rt.synchronize_stream(dvpp.stream) == 0
    assert acl.media.dvpp_get_pic_desc_width(desc) == 242 and acl.media.dvpp_get_pic_desc_ret_code(desc) == 0
    host = np.zeros(256 * 192, np.uint8)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(host), host.size, buf, host.size, D2H) == 0
    assert (
        np.abs(host.reshape(192, 256)[:180, :242].astype(np.int16) - _ycbcr(data)[:180, :242, 0]).mean() < 0.5
    )

    progressive = _jpeg(progressive=True)
    ctypes.memmove(pinned, progressive, len(progressive))
    assert acl.rt.memcpy_async(dev, len(data), pinned, len(progressive), H2D, dvpp.stream) == 0
    assert acl.media.dvpp_jpeg_decode_async(dvpp.channel, dev, len(progressive), desc, dvpp.stream) == 0
    assert acl.rt.synchronize_stream(dvpp.stream) == UNSUPPORTED_JPEG
    assert acl.media.dvpp_get_pic_desc_ret_code(desc) == UNSUPPORTED_JPEG
    assert "JPEGD does not decode progressive JPEGs" in acl.get_recent_err_msg()
    assert acl.rt.free_host(pinned) == 0 and acl.media.dvpp_free(dev) == 0
