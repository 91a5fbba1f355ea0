"""A spec input's ``preprocess:``: what it renders (the parameter, the Triton tensor its requests carry, ATC's
AIPP config) and the mistakes it is refused for, each at its file:line."""

from __future__ import annotations

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from ge_plugin.atc import aipp
from ge_plugin.atc.command import atc_args, atc_command
from ge_plugin.errors import ConfigError, SpecError
from ge_plugin.params import ModelParams
from ge_plugin.render.pbtxt import render_text
from ge_plugin.spec import load_spec

#: every line matters: the tests below name lines of this text
IMAGES = """\
name: cnn_jpeg
model:
  om: cnn.om
  source: tiny_cnn.onnx
  soc_version: Ascend310P3
inputs:
  - name: images
    dtype: fp32
    dims: [3, 224, 224]
    preprocess:
      mean: [123.675, 116.28, 103.53]
      std: [58.395, 57.12, 57.375]
outputs:
  - name: logits
    dtype: fp32
    dims: [10]
batching:
  gears: [1, 4, 8]
"""


def problems(write_spec, text: str) -> list[tuple[int, str, str]]:
    """(line, path, message) of every problem the spec has."""
    with pytest.raises(SpecError) as info:
        load_spec(write_spec(text))
    out = []
    for problem in info.value.problems:
        where, message = problem.split(": ", 2)[0], problem.split(": ", 2)[2]
        path = problem.split(": ", 2)[1]
        out.append((int(where.rsplit(":", 1)[1]), path, message))
    return out


def test_a_preprocess_input_renders_the_tensor_its_requests_carry_and_the_parameter(write_spec):
    spec = load_spec(write_spec(IMAGES))
    config = text_format.Parse(render_text(spec), mc.ModelConfig())
    (images,) = config.input
    assert (images.data_type, list(images.dims), images.allow_ragged_batch) == (mc.TYPE_UINT8, [-1], True)
    params = ModelParams.from_parameters({k: v.string_value for k, v in config.parameters.items()})
    prep = params.preprocess
    assert prep is not None and (prep.input, prep.format, prep.request, prep.resize) == (
        "images",
        "jpeg",
        "uint8",
        "stretch",
    )
    assert (prep.max_bytes, prep.max_side) == (4 << 20, 4096)

    as_bytes = load_spec(
        write_spec(IMAGES.replace("    preprocess:\n", "    preprocess:\n      request: bytes\n"))
    )
    (images,) = text_format.Parse(render_text(as_bytes), mc.ModelConfig()).input
    assert (images.data_type, list(images.dims), images.allow_ragged_batch) == (mc.TYPE_STRING, [1], False)


def test_atc_gets_the_aipp_config_of_the_spec_written_beside_the_output(write_spec, tmp_path):
    spec = load_spec(write_spec(IMAGES.replace("      mean:", "      colour: bgr\n      mean:")))
    args = atc_args(spec, output=tmp_path / "repo" / "cnn_jpeg" / "1" / "cnn")
    assert "--input_shape=images:-1,3,224,224" in args
    config = tmp_path / "repo" / "cnn_jpeg" / "1" / "cnn_aipp.cfg"
    assert f"--insert_op_conf={config}" in args
    (section,) = aipp.parse(config.read_text())
    assert section == aipp.for_images(
        bgr=True, mean=(123.675, 116.28, 103.53), std=(58.395, 57.12, 57.375), height=224, width=224
    )
    assert f"--insert_op_conf={tmp_path / 'out_aipp.cfg'}" in atc_command(spec, output=tmp_path / "out")
    assert (tmp_path / "out_aipp.cfg").read_text() == config.read_text()


@pytest.mark.parametrize(
    "change, line, path, message",
    [
        (("    dims: [3, 224, 224]", "    dims: [3, -1, 224]"), 9, "$.inputs[0].dims", "[3, HEIGHT, WIDTH]"),
        (("    dims: [3, 224, 224]", "    dims: [3, 224, 200]"), 9, "$.inputs[0].dims", "multiple of 16"),
        (("    dims: [3, 224, 224]", "    dims: [3, 224, 8192]"), 9, "$.inputs[0].dims", "within 32..4096"),
        (
            ("    dtype: fp32", "    dtype: uint8"),
            8,
            "$.inputs[0].dtype",
            "the OM's AIPP feeds a float input",
        ),
        (
            ("      mean: [123.675, 116.28, 103.53]", "      mean: [300, 0, 0]"),
            11,
            "$.inputs[0].preprocess.mean[0]",
            "0..255",
        ),
        (
            ("      std: [58.395, 57.12, 57.375]", "      std: [1, 0, 1]"),
            12,
            "$.inputs[0].preprocess.std[1]",
            "at least 1/65504",
        ),
        (
            ("      std: [58.395, 57.12, 57.375]", "      std: [1, 2]"),
            12,
            "$.inputs[0].preprocess.std",
            "one value per channel",
        ),
        (
            ("      std: [58.395, 57.12, 57.375]", "      resize: crop"),
            12,
            "$.inputs[0].preprocess.resize",
            "stretch, letterbox",
        ),
        (
            ("      std: [58.395, 57.12, 57.375]", "      format: png"),
            12,
            "$.inputs[0].preprocess.format",
            "expected one of jpeg",
        ),
        (
            ("      std: [58.395, 57.12, 57.375]", "      max_side: 10000"),
            12,
            "$.inputs[0].preprocess.max_side",
            "at most 8192",
        ),
        (
            ("      std: [58.395, 57.12, 57.375]", "      stdev: [1, 1, 1]"),
            12,
            "$.inputs[0].preprocess.stdev",
            "unknown key 'stdev' (did you mean 'std'?)",
        ),
    ],
)
def test_mistakes_are_refused_at_their_line(write_spec, change, line, path, message):
    old, new = change
    found = problems(write_spec, IMAGES.replace(old + "\n", new + "\n"))
    assert any(at == line and p == path and message in m for at, p, m in found), found


def test_one_input_takes_images_without_padding_or_image_size_gears(write_spec):
    two = IMAGES.replace(
        "outputs:\n",
        "  - name: more\n    dtype: fp32\n    dims: [3, 64, 64]\n    pad: true\n    preprocess:\n      format: jpeg\noutputs:\n",
    )
    found = problems(write_spec, two)
    assert (17, "$.inputs[1].preprocess", "only one input may take images; images does") in found
    sizes = problems(
        write_spec,
        IMAGES.replace("  gears: [1, 4, 8]\n", "  gears: [8]\nimage_sizes: [[224, 224], [448, 448]]\n"),
    )
    assert any(p == "$.image_sizes" and "takes images resized to one size" in m for _, p, m in sizes), sizes


@pytest.mark.parametrize(
    "value, message",
    [
        ('{"format":"jpeg"}', "input must name the input"),
        ('{"input":"images","resize":"fit"}', "resize must be one of stretch, letterbox"),
        ('{"input":"images","max_bytes":0}', "max_bytes must be an integer in 1..67108864"),
        ('{"input":"images","colour":"rgb"}', "unknown field(s) colour"),
        ("images", "expected a JSON object"),
    ],
)
def test_the_preprocess_parameter_is_checked_like_every_other(value, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ModelParams.from_parameters({"om_model_path": "m.om", "preprocess": value})
