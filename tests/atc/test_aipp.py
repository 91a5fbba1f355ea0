"""ATC's static AIPP (--insert_op_conf): the config file read as ATC reads it, the OM's input as pyACL reports an
AIPP input, and the images an execute reads converted as the ATC guide's CSC and normalisation say."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from PIL import Image

from ge_plugin import acl_constants as C
from ge_plugin.atc import aipp, simbuild, simom
from ge_plugin.atc.flags import parse_args
from ge_plugin.errors import AtcError


def identity_images(height: int = 32, width: int = 48) -> onnx.ModelProto:
    """images float [batch, 3, H, W] -> pixels, the same: what AIPP hands the graph, read back."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["images"], ["pixels"])],
        "identity_images",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, height, width])],
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["batch", 3, height, width])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def images_model(tmp_path):
    path = tmp_path / "identity_images.onnx"
    onnx.save(identity_images(), path)
    return path


def build(tmp_path, model, config: str, *flags: str):
    (tmp_path / "aipp.cfg").write_text(config)
    argv = [
        f"--model={model}",
        "--framework=5",
        f"--output={tmp_path / 'om'}",
        "--soc_version=Ascend310P3",
        f"--insert_op_conf={tmp_path / 'aipp.cfg'}",
        *flags,
    ]
    return simbuild.build(parse_args(argv))


def refused(text: str) -> str:
    with pytest.raises(AtcError) as caught:
        aipp.parse(text, "a.cfg")
    return str(caught.value)


JPEG_RGB = aipp.for_images(bgr=False, mean=(0, 0, 0), std=(1, 1, 1)).text()


def test_the_config_written_for_a_spec_reads_back_as_itself():
    section = aipp.for_images(bgr=True, mean=(123.675, 116.28, 103.53), std=(58.395, 57.12, 57.375))
    (parsed,) = aipp.parse("# a comment\n" + section.text())
    assert parsed == section
    assert parsed.matrix[:3] == (256, 454, 0)  # BGR: the JPEG matrix's rows reversed, B first
    assert parsed.mean_chn == (123, 116, 103, 0) and parsed.min_chn[:3] == (0.675, 0.28, 0.53)
    assert parsed.var_reci_chn[0] == pytest.approx(1 / 58.395)


@pytest.mark.parametrize(
    "text, reason",
    [
        ("aipp_op { aipp_mode : dynamic }", "dynamic AIPP is not simulated"),
        (
            "aipp_op { aipp_mode : static input_format : YUV422SP_U8 }",
            "input_format 'YUV422SP_U8' is not simulated",
        ),
        (
            "aipp_op { aipp_mode : static input_format : RGB888_U8 crop : true }",
            "crop : true is an AIPP feature the ge-plugin simulator does not carry out",
        ),
        (
            "aipp_op { aipp_mode : static input_format : YUV420SP_U8 csc_switch : true matrix_r0c0 : 256 }",
            "matrix_r0c1",
        ),
        ("aipp_op { aipp_mode : static input_formt : RGB888_U8 }", "'input_formt' is not a key of aipp_op"),
        ("aipp_op { aipp_mode : static aipp_mode : static }", "'aipp_mode' is given twice"),
        ("aipp_op { aipp_mode : static input_format : RGB888_U8", "not closed"),
        (
            "aipp_op { aipp_mode : static input_format : RGB888_U8 mean_chn_0 : 300 }",
            "mean_chn_0 is 300, outside 0..255",
        ),
        (
            "aipp_op { aipp_mode : static input_format : RGB888_U8 } aipp_op { aipp_mode : static input_format : RGB888_U8 }",
            "two aipp_op sections are for the same input",
        ),
        ("", "no aipp_op section"),
    ],
)
def test_configs_atc_would_refuse_or_the_simulator_cannot_carry_out_are_e10001(text, reason):
    message = refused(text)
    assert message.startswith("E10001: Value [a.cfg] for parameter [--insert_op_conf] is invalid.")
    assert reason in message


def test_an_aipp_input_is_reported_as_pyacl_reports_one(acl, tmp_path, images_model):
    result = build(
        tmp_path, images_model, JPEG_RGB, "--input_shape=images:-1,3,32,48", "--dynamic_batch_size=1,4"
    )
    entry = simom.read(result.path).header["inputs"][0]
    assert entry["dims"] == [-1, 32, 48, 3] and entry["dims_v2"] == [-1, 48, 48, 1]
    assert entry["dtype"] == C.ACL_UINT8 and entry["format"] == C.ACL_FORMAT_NHWC
    model_id, ret = acl.mdl.load_from_file(str(result.path))
    assert ret == 0
    desc = acl.mdl.create_desc()
    assert acl.mdl.get_desc(desc, model_id) == 0
    assert acl.mdl.get_input_dims(desc, 0)[0]["dims"] == [-1, 32, 48, 3]
    assert acl.mdl.get_input_dims_v2(desc, 0)[0]["dims"] == [-1, 48, 48, 1]
    assert acl.mdl.get_input_size_by_index(desc, 0) == 4 * 48 * 48  # the largest gear's NV12 images
    assert acl.mdl.get_input_data_type(desc, 0) == C.ACL_UINT8
    assert acl.mdl.get_aipp_type(model_id, 0) == (C.ACL_DATA_WITH_STATIC_AIPP, 0xFFFFFFFF, 0)
    assert acl.mdl.get_aipp_type(model_id, 1)[0] == 0  # ascend_mbatch_shape_data


@pytest.mark.parametrize(
    "flags, reason",
    [
        (
            ("--input_shape=images:1,3,-1,-1", "--dynamic_image_size=32,48;64,64"),
            "--dynamic_image_size is not simulated",
        ),
        (("--input_shape=images:1,3,32,48",), None),
        (("--input_shape=images:-1,3,32,48", "--dynamic_batch_size=1,2"), None),
    ],
)
def test_aipp_goes_with_a_static_model_or_batch_gears(tmp_path, flags, reason):
    from ge_plugin.models import tiny_cnn

    model = tmp_path / "tiny_cnn.onnx"
    onnx.save(tiny_cnn(), model)
    if reason is None:
        build(tmp_path, model, JPEG_RGB, *flags)
        return
    with pytest.raises(AtcError, match=reason):
        build(tmp_path, model, JPEG_RGB, *flags)


def test_aipp_feeds_only_an_nchw_input_of_its_size(tmp_path, images_model):
    shape = "--input_shape=images:1,3,32,48"
    with pytest.raises(AtcError, match="src_image_size_w is 64 but input images is 48 there"):
        build(
            tmp_path, images_model, JPEG_RGB.replace("src_image_size_w : 0", "src_image_size_w : 64"), shape
        )
    with pytest.raises(AtcError, match="related_input_rank 1 names no input"):
        build(
            tmp_path,
            images_model,
            JPEG_RGB.replace("related_input_rank : 0", "related_input_rank : 1"),
            shape,
        )
    with pytest.raises(AtcError, match="the file does not exist"):
        simbuild.build(
            parse_args(
                [
                    f"--model={images_model}",
                    "--framework=5",
                    f"--output={tmp_path / 'om'}",
                    "--soc_version=Ascend310P3",
                    f"--insert_op_conf={tmp_path / 'missing.cfg'}",
                ]
            )
        )


def _nv12(ycbcr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Full-range YCbCr (height x width x 3) as NV12 bytes (chroma averaged over 2x2), and the YCbCr the NV12
    holds at full resolution (chroma repeated over its block, as AIPP reads it)."""
    h, w = ycbcr.shape[:2]
    chroma = ycbcr[..., 1:].astype(np.float64).reshape(h // 2, 2, w // 2, 2, 2).mean(axis=(1, 3))
    chroma = np.floor(chroma + 0.5).astype(np.uint8)
    nv12 = np.concatenate([ycbcr[..., 0].astype(np.uint8), chroma.reshape(h // 2, w)], axis=0)
    held = np.concatenate([ycbcr[..., :1], chroma.repeat(2, 0).repeat(2, 1)], axis=-1).astype(np.uint8)
    return nv12, held


def test_an_execute_converts_nv12_as_the_csc_and_normalisation_say(acl, tmp_path, images_model):
    """Grey pixels come out exactly (the JPEG matrix's first column is 256: Y itself); colours within two levels
    of Pillow's own YCbCr -> RGB of the same samples (Pillow's fixed point is not AIPP's); then (x - mean) / std
    per channel, in the order the matrix's rows give."""
    grey = np.zeros((32, 48, 3), np.uint8)
    grey[..., 0] = np.arange(48, dtype=np.uint8)[None, :] * 5
    grey[..., 1:] = 128
    path = build(tmp_path, images_model, JPEG_RGB, "--input_shape=images:1,3,32,48").path
    out = _run(acl, path, _nv12(grey)[0])
    assert (out == grey[..., 0].astype(np.float32)[None]).all()

    y, x = np.mgrid[0:32, 0:48]
    rgb = np.stack([x * 5, y * 8, (x * 3 + y * 5) % 256], -1).astype(np.uint8)
    nv12, held = _nv12(np.asarray(Image.fromarray(rgb).convert("YCbCr")))
    expected = np.asarray(Image.fromarray(held, "YCbCr").convert("RGB")).astype(np.float32).transpose(2, 0, 1)
    out = _run(acl, path, nv12)
    assert np.abs(out - expected).max() <= 2

    mean, std = (123.675, 116.28, 103.53), (58.395, 57.12, 57.375)
    config = aipp.for_images(bgr=True, mean=mean, std=std).text()
    normalised = _run(acl, build(tmp_path, images_model, config, "--input_shape=images:1,3,32,48").path, nv12)
    want = (expected[::-1] - np.asarray(mean, np.float32)[:, None, None]) / np.asarray(std, np.float32)[
        :, None, None
    ]
    assert np.abs(normalised - want).max() <= 2 / min(std)


def _run(acl, path, nv12: np.ndarray) -> np.ndarray:
    model_id, ret = acl.mdl.load_from_file(str(path))
    assert ret == 0, acl.get_recent_err_msg()
    desc = acl.mdl.create_desc()
    acl.mdl.get_desc(desc, model_id)
    ins, outs = acl.mdl.create_dataset(), acl.mdl.create_dataset()
    size = acl.mdl.get_input_size_by_index(desc, 0)
    src, _ = acl.rt.malloc(size, 0)
    data = np.ascontiguousarray(nv12)
    assert acl.rt.memcpy(src, size, data.ctypes.data, data.nbytes, C.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    acl.mdl.add_dataset_buffer(ins, acl.create_data_buffer(src, size))
    out_size = acl.mdl.get_output_size_by_index(desc, 0)
    dst, _ = acl.rt.malloc(out_size, 0)
    acl.mdl.add_dataset_buffer(outs, acl.create_data_buffer(dst, out_size))
    assert acl.mdl.execute(model_id, ins, outs) == 0, acl.get_recent_err_msg()
    out = np.empty(out_size // 4, np.float32)
    assert acl.rt.memcpy(out.ctypes.data, out.nbytes, dst, out.nbytes, C.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    return out.reshape(3, 32, 48)
