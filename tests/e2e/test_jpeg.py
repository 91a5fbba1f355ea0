"""JPEG requests served on the real tritonserver: clients send each image's bytes (TYPE_UINT8 rows, or BYTES
elements), the ``ge`` backend decodes and resizes them with DVPP (the simulator's) into the OM's AIPP input,
batched with the other requests; the answers equal onnxruntime's on the same image decoded and resized by
Pillow on the host, within what the pixel tolerance allows (docs/simulator.md). Every kind of bad image, over
HTTP (through the front) and gRPC, fails only its own request with 400 / INVALID_ARGUMENT naming it."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib
import numpy as np
import pytest
from PIL import Image
from tritonclient.utils import InferenceServerException

pytestmark = pytest.mark.e2e

PROTOCOLS = ("http", "grpc")
INVALID = {"http": "400", "grpc": "StatusCode.INVALID_ARGUMENT"}
PHOTO = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
SIDE = 224
#: how far the logits may be from onnxruntime's on Pillow's pixels: the pixels differ by up to the stated
#: tolerance (mean 3 levels, 99% within 25, for these scales), which the CNN's global average mostly cancels
LOGITS = {"atol": 0.05, "rtol": 0.0}


def photo(width: int, height: int, seed: int = 0) -> bytes:
    """The photograph (matplotlib's sample data), cropped by ``seed`` and saved at ``width`` x ``height``."""
    image = Image.open(PHOTO).convert("RGB")
    image = image.crop((seed * 17, seed * 11, image.size[0] - seed * 5, image.size[1] - seed * 23))
    out = io.BytesIO()
    image.resize((width, height), Image.LANCZOS).save(out, "JPEG", quality=90)
    return out.getvalue()


def pixels(data: bytes, *, letterbox: bool = False) -> np.ndarray:
    """Pillow's decode and bilinear resize to 224 x 224 (JPEGD writes even sides: an odd last row and column
    are cut first), RGB 0..255, [224, 224, 3]; letterboxed as the backend places it (centred, its left edge on
    a multiple of 16, on black)."""
    image = Image.open(io.BytesIO(data)).convert("RGB")
    w, h = image.size[0] & ~1, image.size[1] & ~1
    image = image.crop((0, 0, w, h))
    if not letterbox:
        return np.asarray(image.resize((SIDE, SIDE), Image.BILINEAR)).astype(np.float32)
    scale = min(SIDE / w, SIDE / h)
    pw, ph = max(16, min(SIDE, int(w * scale)) & ~1), max(6, min(SIDE, int(h * scale)) & ~1)
    left, top = (SIDE - pw) // 2 // 16 * 16, (SIDE - ph) // 2 & ~1
    canvas = np.zeros((SIDE, SIDE, 3), np.float32)
    canvas[top : top + ph, left : left + pw] = np.asarray(image.resize((pw, ph), Image.BILINEAR))
    return canvas


def expected_logits(reference, rgb: np.ndarray, mean, std, *, bgr: bool = False) -> np.ndarray:
    channels = rgb[..., ::-1] if bgr else rgb
    normalised = (channels - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    return reference("tiny_cnn", images=normalised.transpose(2, 0, 1)[None].astype(np.float32))["logits"]


IMAGENET = ((123.675, 116.28, 103.53), (58.395, 57.12, 57.375))
BYTES_NORM = ((100, 110, 120), (64, 64, 64))


def as_uint8(data: bytes) -> dict[str, np.ndarray]:
    return {"images": np.frombuffer(data, np.uint8)[None]}


def as_bytes(data: bytes) -> dict[str, np.ndarray]:
    return {"images": np.array([[data]], dtype=object)}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_jpegs_sent_together_are_answered_as_onnxruntime_answers_pillows_pixels(server, reference, protocol):
    """Four photos of different sizes (shrunk and enlarged to 224 x 224) in one batch window: one execute,
    each answer within LOGITS of onnxruntime on Pillow's decode and resize, and the same class."""
    datas = [photo(320, 240), photo(256, 256, 1), photo(160, 120, 2), photo(300, 200, 3)]
    before = server.baseline()
    answers = server.infer_many(protocol, "cnn_jpeg_e2e", [as_uint8(d) for d in datas])
    for data, answer in zip(datas, answers):
        assert not isinstance(answer, Exception), answer
        want = expected_logits(reference, pixels(data), *IMAGENET)
        np.testing.assert_allclose(answer["logits"], want, **LOGITS)
        assert answer["logits"].argmax() == want.argmax()
    labels = {"model": "cnn_jpeg_e2e"}
    server.assert_deltas(
        before, [("nv_inference_exec_count", labels, 1), ("ge_executes_total", {**labels, "gear": "4"}, 1)]
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bytes_elements_letterboxed_into_bgr_are_answered_as_onnxruntime_answers(server, reference, protocol):
    """The BYTES form, two images in one request and one in another, letterboxed, BGR, on two lanes."""
    wide, tall, square = photo(400, 200, 4), photo(150, 300, 5), photo(224, 224, 6)
    request = {"images": np.array([[wide], [tall]], dtype=object)}
    both, single = server.infer_many(protocol, "cnn_jpeg_bytes", [request, as_bytes(square)])
    assert not isinstance(both, Exception) and not isinstance(single, Exception), (both, single)
    assert both["logits"].shape == (2, 10)
    for data, logits in ((wide, both["logits"][0]), (tall, both["logits"][1]), (square, single["logits"][0])):
        want = expected_logits(reference, pixels(data, letterbox=True), *BYTES_NORM, bgr=True)
        np.testing.assert_allclose(logits[None], want, **LOGITS)


def progressive() -> bytes:
    out = io.BytesIO()
    Image.open(PHOTO).convert("RGB").resize((200, 150)).save(out, "JPEG", quality=85, progressive=True)
    return out.getvalue()


def damaged() -> bytes:
    """A JPEG whose header is fine and whose scan JPEGD fails on while decoding."""
    data = bytearray(photo(200, 150))
    scan = data.find(b"\xff\xda")
    for i in range(scan + 20, len(data) - 10, 7):
        data[i] = 0xFF if data[i] != 0xFF else 0
    return bytes(data)


def bomb() -> bytes:
    """A 2 KB JPEG whose header declares 65535 x 65535 pixels (12 GB of NV12 if anyone believed it)."""
    out = io.BytesIO()
    Image.new("RGB", (64, 64), (200, 30, 30)).save(out, "JPEG")
    data = bytearray(out.getvalue())
    frame = data.find(b"\xff\xc0")
    data[frame + 5 : frame + 9] = (65535).to_bytes(2, "big") * 2
    return bytes(data)


def cmyk() -> bytes:
    out = io.BytesIO()
    Image.open(PHOTO).convert("CMYK").resize((120, 120)).save(out, "JPEG")
    return out.getvalue()


def png() -> bytes:
    out = io.BytesIO()
    Image.open(PHOTO).convert("RGB").resize((64, 64)).save(out, "PNG")
    return out.getvalue()


#: (kind, bytes, what the 400 says): every way an image can be one DVPP cannot take
BAD_IMAGES = [
    (
        "not-a-jpeg",
        b"GIF89a" + bytes(100),
        "is not a JPEG: it starts with 47494638, not the JPEG start marker ffd8 (it looks like a GIF",
    ),
    ("png", png(), "(it looks like a PNG; this model takes JPEGs)"),
    ("truncated", photo(200, 150)[:2000], "is cut short: no end-of-image marker (ffd9) after its scan"),
    (
        "progressive",
        progressive(),
        "a JPEG kind DVPP's JPEGD does not decode, such as progressive or arithmetic-coded",
    ),
    ("cmyk", cmyk(), "a JPEG kind DVPP's JPEGD does not decode"),
    ("bomb", bomb(), "DVPP's JPEGD does not take this 65535x65535 JPEG"),
    ("too-large", photo(2100, 100), "is 2100x100, larger than the model takes (2048 a side: max_side)"),
    ("too-many-bytes", photo(200, 150) + bytes(1 << 20), "more than the model takes (1048576: max_bytes)"),
    ("tiny", photo(16, 16), "DVPP's JPEGD does not take this 16x16 JPEG"),
    (
        "damaged",
        damaged(),
        "DVPP's JPEGD could not decode it (ACL_ERROR_FAILURE 500001): its data is damaged",
    ),
]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_each_bad_image_fails_only_its_own_request_naming_why(server, reference, protocol):
    """The bad images and good ones sent together: each bad one is answered 400 / INVALID_ARGUMENT naming the
    input, the image and why; each good one as if the bad ones had not been there; the server stays ready."""
    good = photo(320, 240, 7)
    want = expected_logits(reference, pixels(good), *IMAGENET)
    requests = []
    for _, data, _ in BAD_IMAGES:
        requests += [as_uint8(data), as_uint8(good)]
    answers = server.infer_many(protocol, "cnn_jpeg_e2e", requests)
    for (kind, _, message), answer in zip(BAD_IMAGES, answers[::2]):
        assert isinstance(answer, InferenceServerException), (kind, answer)
        assert INVALID[protocol] in str(answer.status()), (kind, answer.status())
        assert "input 'images' image 0" in answer.message() and message in answer.message(), (kind, answer)
    for answer in answers[1::2]:
        assert not isinstance(answer, Exception), answer
        np.testing.assert_allclose(answer["logits"], want, **LOGITS)
    assert server.is_ready()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_other_form_and_empty_tensors_are_refused(server, protocol):
    """BYTES to the UINT8 model and UINT8 to the BYTES one are refused by Triton's own type check; an empty
    image or an element that holds nothing by the backend, naming it."""
    data = photo(200, 150)
    cases = [
        ("cnn_jpeg_e2e", as_bytes(data), "BYTES"),
        ("cnn_jpeg_bytes", as_uint8(data), "UINT8"),
        ("cnn_jpeg_e2e", {"images": np.zeros((1, 0), np.uint8)}, "image 0 is empty (0 bytes)"),
        ("cnn_jpeg_bytes", as_bytes(b""), "image 0 is empty (0 bytes)"),
    ]
    for model, inputs, message in cases:
        with pytest.raises(InferenceServerException) as caught:
            server.infer(protocol, model, inputs)
        assert INVALID[protocol] in str(caught.value.status()), caught.value
        assert message in caught.value.message(), caught.value
