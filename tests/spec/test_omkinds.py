"""Specs for every gear mode: image sizes (with ATC's own rules for them), and padding as each input's
decision; the ATC command and the parameters they give."""

from __future__ import annotations

import shlex

import onnx
import pytest

from ge_plugin.atc.command import atc_args
from ge_plugin.cli import main
from ge_plugin.errors import SpecError
from ge_plugin.models import tiny_cnn
from ge_plugin.spec import load_spec

#: every line matters: the tests below name lines of this text
IMAGES = """\
name: cnn
model:
  om: cnn.om
  source: tiny_cnn.onnx
  soc_version: Ascend310P3
inputs:
  - name: images
    dtype: fp32
    dims: [3, -1, -1]
outputs:
  - name: logits
    dtype: fp32
    dims: [10]
batching:
  gears: [8]
  max_queue_delay_us: 100
image_sizes: [[224, 224], [448, 448]]
"""


def problems(write_spec, text: str) -> list[tuple[int, str, str]]:
    """(line, path, message) of every problem the spec has."""
    with pytest.raises(SpecError) as info:
        load_spec(write_spec(text))
    out = []
    for problem in info.value.problems:
        _, line, path, message = problem.split(": ", 1)[0].rsplit(":", 1) + problem.split(": ", 2)[1:]
        out.append((int(line), path, message))
    return out


def test_an_image_spec_fixes_the_batch_and_gives_atc_its_image_sizes(write_spec):
    spec = load_spec(write_spec(IMAGES))
    args = atc_args(spec)
    assert "--input_shape=images:8,3,-1,-1" in args
    assert "--dynamic_image_size=224,224;448,448" in args
    assert not [a for a in args if a.startswith(("--dynamic_batch_size", "--dynamic_dims", "--input_format"))]
    params = spec.to_params()
    assert params.image_sizes == ((224, 224), (448, 448))
    assert params.gears == (8,) and params.pad_inputs == ()
    assert spec.max_batch_size == 8


def test_an_unbatched_image_spec_keeps_its_batch_of_one(write_spec, variant):
    text = variant(
        {
            "    dims: [3, -1, -1]": "    dims: [1, 3, -1, -1]",
            "    dims: [10]": "    dims: [1, 10]",
            "batching:": "",
            "  gears: [8]": "",
            "  max_queue_delay_us: 100": "",
        },
        base=IMAGES,
    )
    args = atc_args(load_spec(write_spec(text)))
    assert "--input_shape=images:1,3,-1,-1" in args and "--dynamic_image_size=224,224;448,448" in args


@pytest.mark.parametrize(
    ("replace", "expected"),
    [
        (
            {"  gears: [8]": "  gears: [1, 8]"},
            (
                15,
                "$.batching.gears",
                "ATC: --dynamic_batch_size, --dynamic_image_size, --input_shape_range, and "
                "--dynamic_dims are mutually exclusive (E10009): with image_sizes an OM has one batch size, so "
                "list one gear, the OM's fixed batch (--input_shape=NAME:8,3,-1,-1)",
            ),
        ),
        (
            {
                "image_sizes: [[224, 224], [448, 448]]": "image_sizes: [[224, 224], [448, 448]]\ndims_gears: [[1, 2]]"
            },
            (
                18,
                "$.dims_gears",
                "are mutually exclusive (E10009): give an image's height and width as "
                "image_sizes or every -1 dim as dims_gears, not both",
            ),
        ),
        (
            {"    dims: [3, -1, -1]": "    dims: [3, 224, -1]"},
            (
                9,
                "$.inputs[0].dims",
                "ATC: when --dynamic_image_size is included, only the height and width axes "
                "can be -1 in --input_shape (E10019): an NCHW input with -1 in H and W, got images [batch, 3, 224, -1]",
            ),
        ),
        (
            {"    dims: [3, -1, -1]": "    dims: [3, 224, 224]"},
            (17, "$.image_sizes", "no input has -1 height and width (dims [3, -1, -1] when batching"),
        ),
        (
            {"image_sizes: [[224, 224], [448, 448]]": "image_sizes: [[224, 224]]"},
            (17, "$.image_sizes", "ATC takes 2 to 100 image sizes, got 1"),
        ),
        (
            {"image_sizes: [[224, 224], [448, 448]]": "image_sizes: [[224, 224], [448]]"},
            (17, "$.image_sizes[1]", "an image size is [height, width], got [448]"),
        ),
        (
            {"image_sizes: [[224, 224], [448, 448]]": "image_sizes: [[224, 224], [224, 224]]"},
            (17, "$.image_sizes[1]", "[224, 224] is listed twice (also at index 0)"),
        ),
        (
            {"    dims: [3, -1, -1]": "    dims: [3, -1, -1]\n    pad: 1"},
            (10, "$.inputs[0].pad", "expected true or false, got 1"),
        ),
    ],
)
def test_image_spec_mistakes_are_refused_in_atcs_own_words(write_spec, variant, replace, expected):
    found = problems(write_spec, variant(replace, base=IMAGES))
    assert len(found) == 1, found
    line, path, message = found[0]
    assert (line, path) == expected[:2]
    assert expected[2] in message


def test_an_image_spec_refuses_an_input_format_other_than_nchw(write_spec):
    found = problems(write_spec, IMAGES + "atc_options:\n  input_format: ND\n")
    assert found == [
        (
            19,
            "$.atc_options.input_format",
            "a model with image_sizes is compiled with --dynamic_image_size, which needs NCHW inputs, got 'ND'",
        )
    ]


def test_the_atc_flag_itself_points_to_image_sizes(write_spec):
    found = problems(write_spec, IMAGES + 'atc_options:\n  dynamic_image_size: "224,224;448,448"\n')
    assert found == [
        (19, "$.atc_options.dynamic_image_size", "--dynamic_image_size is set by the spec; use image_sizes")
    ]


def test_padding_is_each_inputs_decision_and_off_by_default(write_spec, variant):
    assert load_spec(write_spec(IMAGES)).to_params().pad_inputs == ()
    padded = variant({"    dims: [3, -1, -1]": "    dims: [3, -1, -1]\n    pad: true"}, base=IMAGES)
    assert load_spec(write_spec(padded)).to_params().pad_inputs == ("images",)


def test_the_shipped_specs_state_their_padding(write_spec):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    llama = load_spec(root / "specs" / "llama.yaml")
    bert = load_spec(root / "specs" / "bert.yaml")
    assert llama.to_params().pad_inputs == ("input_ids",)
    assert bert.to_params().pad_inputs == ("input_ids", "attention_mask")


def test_cli_print_gives_the_exact_dynamic_image_size_flag(tmp_path, capsys):
    onnx.save(tiny_cnn(), tmp_path / "tiny_cnn.onnx")
    (tmp_path / "cnn.yaml").write_text(IMAGES)
    assert main(["atc", str(tmp_path / "cnn.yaml"), "--print"]) == 0
    words = shlex.split(capsys.readouterr().out)
    assert "--dynamic_image_size=224,224;448,448" in words
    assert "--input_shape=images:8,3,-1,-1" in words


def test_cli_validate_refuses_batch_gears_beside_image_sizes_in_atcs_words(tmp_path, capsys):
    (tmp_path / "cnn.yaml").write_text(IMAGES.replace("  gears: [8]", "  gears: [1, 8]"))
    assert main(["validate", str(tmp_path / "cnn.yaml")]) == 1
    err = capsys.readouterr()
    assert (
        "--dynamic_batch_size, --dynamic_image_size, --input_shape_range, and --dynamic_dims are mutually "
        "exclusive (E10009)"
    ) in err.out + err.err


def test_cli_sim_builds_an_image_size_om(tmp_path, capsys):
    onnx.save(tiny_cnn(), tmp_path / "tiny_cnn.onnx")
    (tmp_path / "cnn.yaml").write_text(IMAGES.replace("[[224, 224], [448, 448]]", "[[8, 8], [16, 12]]"))
    assert main(["atc", str(tmp_path / "cnn.yaml"), "--sim", "--repository", str(tmp_path / "repo")]) == 0
    from ge_plugin.atc import simom

    header = simom.read(tmp_path / "repo" / "cnn" / "1" / "cnn.om").header
    assert header["dynamic"]["mode"] == "hw"
    assert [g["inputs"] for g in header["dynamic"]["gears"]] == [[[8, 3, 8, 8]], [[8, 3, 16, 12]]]
