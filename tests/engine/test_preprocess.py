"""The engine's image stage: JPEGs in, decoded and resized with DVPP into the OM's AIPP input, batched with
other requests; how close the pixels the model sees are to Pillow's decode and resize on the host (the
tolerance docs/simulator.md states), a bad image failing its request alone, nothing allocated per request."""

from __future__ import annotations

import io
import json
from pathlib import Path

import matplotlib
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from PIL import Image

from ge_plugin.atc.aipp import for_images
from ge_plugin.atc.flags import parse_args
from ge_plugin.atc.simbuild import build
from ge_plugin.engine import Engine
from ge_plugin.errors import ConfigError, ImageError, RequestError
from ge_plugin.sim import counters

H, W = 224, 224
#: a photograph (matplotlib's sample data: Grace Hopper, 512 x 600, 4:2:0)
PHOTO = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
#: the pixel tolerance the simulator's DVPP and AIPP keep against Pillow's decode and bilinear resize, in
#: levels of 0..255 (docs/simulator.md states it): (mean, 99th percentile) of the absolute difference, for an
#: image resized by at most 1.5 either way, and for one shrunk more than twice (Pillow's bilinear filters a
#: shrink over the whole source; VPC's takes two pixels, as OpenCV's INTER_LINEAR does)
NEAR = (3.0, 25.0)
FAR = (6.0, 50.0)
#: the mean a smooth picture keeps (the stages that differ agree where nothing changes fast)
MEAN_TOLERANCE = 1.5


def identity_images() -> onnx.ModelProto:
    """images float [batch, 3, H, W] -> pixels, the same: the pixels the model sees, read back."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["images"], ["pixels"])],
        "identity_images",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, H, W])],
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["batch", 3, H, W])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def oms(tmp_path_factory) -> dict[str, str]:
    """Sim OMs of the identity model: with AIPP (RGB, 0..255) on batch gears 1, 2, 4 and a static batch of 1;
    and without AIPP."""
    folder = tmp_path_factory.mktemp("image-oms")
    onnx.save(identity_images(), folder / "identity_images.onnx")
    (folder / "aipp.cfg").write_text(for_images(bgr=False, mean=(0, 0, 0), std=(1, 1, 1)).text())
    base = [
        f"--model={folder / 'identity_images.onnx'}",
        "--framework=5",
        "--soc_version=Ascend310P3",
        "--precision_mode=must_keep_origin_dtype",
    ]
    aipp = f"--insert_op_conf={folder / 'aipp.cfg'}"
    paths = {}
    for name, flags in {
        "batched": [aipp, f"--input_shape=images:-1,3,{H},{W}", "--dynamic_batch_size=1,2,4"],
        "single": [aipp, f"--input_shape=images:1,3,{H},{W}"],
        "plain": [f"--input_shape=images:-1,3,{H},{W}", "--dynamic_batch_size=1,2,4"],
    }.items():
        paths[name] = str(build(parse_args([*base, f"--output={folder / name}", *flags])).path)
    return paths


def images_config(om: str, *, max_batch_size: int = 4, **prep: object) -> dict:
    request = str(prep.get("request", "uint8"))
    preprocess = {"input": "images", "max_bytes": 1 << 20, "max_side": 2048, **prep}

    return {
        "name": "images",
        "backend": "ge",
        "max_batch_size": max_batch_size,
        "input": [
            {
                "name": "images",
                "data_type": "TYPE_UINT8" if request == "uint8" else "TYPE_STRING",
                "dims": [-1] if request == "uint8" else [1],
            }
        ],
        "output": [{"name": "pixels", "data_type": "TYPE_FP32", "dims": [3, H, W]}],
        "parameters": {
            "om_model_path": {"string_value": om},
            "preprocess": {"string_value": json.dumps(preprocess)},
            "warmup": {"string_value": "1"},
        },
    }


def jpeg(width: int, height: int, seed: int = 0, **options: object) -> bytes:
    """A smooth colour picture (gradients and a disc), as a camera or a screenshot holds."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    disc = ((x - width * 0.6) ** 2 + (y - height * 0.4) ** 2 < (min(width, height) * 0.3) ** 2) * 90
    rgb = np.stack(
        [x * 255 / width, y * 255 / height, (128 + 100 * np.sin((x + y + 13 * seed) / 17)) - disc], -1
    )
    out = io.BytesIO()
    Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8)).save(out, "JPEG", **{"quality": 92, **options})
    return out.getvalue()


def pillow(data: bytes, resize: str = "stretch") -> np.ndarray:
    """The host's way: Pillow decodes to RGB and resizes (bilinear) to the model's size; [3, H, W] floats."""
    image = Image.open(io.BytesIO(data)).convert("RGB")
    if resize == "stretch":  # JPEGD writes even sides: an odd last column or row is not resized
        out = np.asarray(
            image.crop((0, 0, image.size[0] & ~1, image.size[1] & ~1)).resize((W, H), Image.BILINEAR)
        )
    else:
        w, h = image.size[0] & ~1, image.size[1] & ~1
        scale = min(W / w, H / h)
        pw, ph = max(16, min(W, int(w * scale)) & ~1), max(6, min(H, int(h * scale)) & ~1)
        left, top = (W - pw) // 2 // 16 * 16, (H - ph) // 2 & ~1
        canvas = np.zeros((H, W, 3), np.uint8)
        canvas[top : top + ph, left : left + pw] = np.asarray(
            image.crop((0, 0, w, h)).resize((pw, ph), Image.BILINEAR)
        )
        out = canvas
    return out.astype(np.float32).transpose(2, 0, 1)


def uint8_request(*images: bytes) -> dict[str, np.ndarray]:
    """One request of images as TYPE_UINT8 [images, bytes]: each row one image, the shorter ones followed by
    zeros (after a JPEG's end-of-image marker, bytes are not read)."""
    longest = max(len(data) for data in images)
    return {"images": np.stack([np.frombuffer(data.ljust(longest, b"\0"), np.uint8) for data in images])}


def bytes_request(*images: bytes) -> dict[str, np.ndarray]:
    return {"images": np.array([[data] for data in images], dtype=object)}


def photo(width: int, height: int, **options: object) -> bytes:
    """The photograph at ``width`` x ``height``, as a camera would have saved it."""
    out = io.BytesIO()
    image = Image.open(PHOTO).convert("RGB").resize((width, height), Image.LANCZOS)
    image.save(out, "JPEG", **{"quality": 90, **options})
    return out.getvalue()


@pytest.mark.parametrize(
    "width, height, options, tolerance",
    [
        (224, 224, {}, NEAR),
        (320, 240, {}, NEAR),
        (160, 120, {}, NEAR),
        (97, 65, {}, NEAR),  # odd sides, shrunk to 96 x 64 by JPEGD, then enlarged 2.3 and 3.4 times
        (300, 300, {"subsampling": 0}, NEAR),  # 4:4:4
        (256, 192, {"subsampling": 1}, NEAR),  # 4:2:2
        (640, 480, {}, FAR),
        (900, 1000, {}, FAR),
    ],
)
def test_pixels_the_model_sees_are_within_the_stated_tolerance_of_pillows(
    oms, width, height, options, tolerance
):
    data = photo(width, height, **options)
    with Engine.from_model_config(images_config(oms["batched"]), version_dir="/") as engine:
        (result,) = engine.execute([uint8_request(data)])
    diff = np.abs(result["pixels"][0] - pillow(data))
    mean, p99 = tolerance
    assert float(diff.mean()) <= mean and float(np.percentile(diff, 99)) <= p99


def test_letterbox_keeps_the_aspect_on_black_as_pillow_would(oms):
    config = images_config(oms["batched"], resize="letterbox")
    with Engine.from_model_config(config, version_dir="/") as engine:
        datas = [jpeg(300, 300), jpeg(400, 120, 1), jpeg(60, 200, 2)]
        results = engine.execute([uint8_request(d) for d in datas])
    for result, data in zip(results, datas):
        expected = pillow(data, "letterbox")
        got = result["pixels"][0]
        assert ((expected == 0) == (got == 0)).mean() > 0.97  # the black bars in the same places
        assert np.abs(got - expected).mean() <= MEAN_TOLERANCE * 2


def test_requests_of_several_images_and_both_forms_batch_together(oms):
    a, b, c = jpeg(320, 240), jpeg(320, 240, 1), jpeg(150, 100, 2)
    with Engine.from_model_config(images_config(oms["batched"]), version_dir="/") as engine:
        two, one = engine.execute([uint8_request(a, b), uint8_request(c)])
        assert engine.stats.executes == 1  # one execute for the three images (warm-up is not counted)
    assert two["pixels"].shape == (2, 3, H, W) and one["pixels"].shape == (1, 3, H, W)
    assert np.abs(two["pixels"][1] - pillow(b)).mean() <= MEAN_TOLERANCE
    with Engine.from_model_config(images_config(oms["batched"], request="bytes"), version_dir="/") as engine:
        (both,) = engine.execute([bytes_request(a, c)])
    assert np.abs(both["pixels"][1] - one["pixels"][0]).max() == 0


def progressive() -> bytes:
    return jpeg(120, 90, progressive=True)


def damaged() -> bytes:
    """A JPEG whose header is fine and whose scan JPEGD fails on."""
    data = bytearray(jpeg(120, 90))
    sos = data.find(b"\xff\xda")
    for i in range(sos + 20, len(data) - 10, 7):
        data[i] = 0xFF if data[i] != 0xFF else 0
    return bytes(data)


def bomb() -> bytes:
    """A few hundred bytes that declare a 65535 x 65535 picture: refused from the header, nothing decoded."""
    data = bytearray(jpeg(64, 64))
    sof = data.find(b"\xff\xc0")
    data[sof + 5 : sof + 9] = (65535).to_bytes(2, "big") * 2
    return bytes(data)


BAD = [
    (b"", "image 0 is empty (0 bytes)"),
    (
        b"\x89PNG\r\n\x1a\n" + b"\0" * 40,
        "is not a JPEG: it starts with 89504e47, not the JPEG start marker ffd8 (it looks like a PNG",
    ),
    (b"hello world", "is not a JPEG"),
    (jpeg(120, 90)[:300], "is cut short: no end-of-image marker (ffd9) after its scan"),
    (progressive(), "a JPEG kind DVPP's JPEGD does not decode, such as progressive"),
    (bomb(), "DVPP's JPEGD does not take this 65535x65535 JPEG"),
    (jpeg(2100, 64), "is 2100x64, larger than the model takes (2048 a side: max_side)"),
    (jpeg(16, 16), "DVPP's JPEGD does not take this 16x16 JPEG"),
    (jpeg(200, 150) + bytes(1 << 20), "more than the model takes (1048576: max_bytes)"),
    (damaged(), "DVPP's JPEGD could not decode it (ACL_ERROR_FAILURE 500001): its data is damaged"),
]


@pytest.mark.parametrize("streams", [1, 2])
def test_a_bad_image_fails_its_request_alone(oms, streams):
    good = jpeg(320, 240)
    requests = [uint8_request(good)]
    for data, _ in BAD:
        requests += [
            uint8_request(data) if data else {"images": np.zeros((1, 0), np.uint8)},
            uint8_request(good),
        ]
    config = images_config(oms["batched"])
    config["parameters"]["streams_per_instance"] = {"string_value": str(streams)}
    with Engine.from_model_config(config, version_dir="/") as engine:
        if streams == 1:
            results = engine.execute(requests)
        else:
            results = [None] * len(requests)

            def put(index: int, outcome: object) -> None:  # outputs live until put returns: keep copies
                results[index] = (
                    {k: v.copy() for k, v in outcome.items()} if isinstance(outcome, dict) else outcome
                )

            engine.submit(requests, None, put)
            engine.wait_idle()
        assert engine.images.held == {}  # every image let go once its request was answered
        assert engine.stats.request_errors == len(BAD)
    expected = pillow(good)
    for result in results[::2]:
        assert np.abs(result["pixels"][0] - expected).mean() <= MEAN_TOLERANCE
    for result, (_, message) in zip(results[1::2], BAD):
        assert isinstance(result, ImageError) and message in str(result), (message, result)
        assert str(result).startswith("input 'images' image 0")


@pytest.mark.parametrize(
    "value, message",
    [
        (
            np.zeros((1, 10), np.float32),
            "takes each image's bytes as UINT8 [images, bytes], got float32 [1, 10]",
        ),
        (np.zeros((0, 10), np.uint8), "holds no image"),
        (np.zeros((5, 10), np.uint8), "holds 5 images; the model takes at most 4 at once"),
        (np.array([["x"]], dtype=object), "image 0 is str, not bytes"),
    ],
)
def test_what_is_not_images_is_refused_naming_the_form(oms, value, message):
    form = "bytes" if value.dtype == object else "uint8"
    with Engine.from_model_config(images_config(oms["batched"], request=form), version_dir="/") as engine:
        (result,) = engine.execute([{"images": value}])
    assert isinstance(result, RequestError) and message in str(result)


def test_an_unbatched_model_takes_its_one_image(oms):
    config = images_config(oms["single"], max_batch_size=0)
    config["input"][0]["dims"] = [-1]
    config["output"][0]["dims"] = [1, 3, H, W]
    with Engine.from_model_config(config, version_dir="/") as engine:
        data = jpeg(320, 240)
        (result, two) = engine.execute([{"images": np.frombuffer(data, np.uint8)}, uint8_request(data, data)])
    assert np.abs(result["pixels"][0] - pillow(data)).mean() <= MEAN_TOLERANCE
    assert "takes each image's bytes as UINT8 [bytes]" in str(two)


def test_nothing_is_allocated_per_request(oms):
    with Engine.from_model_config(images_config(oms["batched"]), version_dir="/") as engine:
        engine.execute([uint8_request(jpeg(320, 240))])
        before = counters.snapshot()
        for n in range(3):
            engine.execute([uint8_request(jpeg(200 + 40 * n, 150, n)), uint8_request(b"not a jpeg")])
        after = counters.snapshot()
    assert after["devices"][0]["mallocs"] == before["devices"][0]["mallocs"]
    assert after["host_pinned"]["mallocs"] == before["host_pinned"]["mallocs"]


def test_an_om_without_aipp_is_refused_at_load_naming_what_it_has(oms):
    with pytest.raises(
        ConfigError, match=r"the OM's input is fp32 \[-1, 3, 224, 224\] without a static AIPP"
    ):
        Engine.from_model_config(images_config(oms["plain"]), version_dir="/")
