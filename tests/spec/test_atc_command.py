from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from ge_plugin.atc.command import atc_args, atc_command, dynamic_dims_gears, input_shape
from ge_plugin.errors import AtcError
from ge_plugin.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]


def test_atc_args_for_llama_use_dynamic_dims_over_the_batch_by_sequence_grid():
    spec = load_spec(ROOT / "specs" / "llama.yaml")
    models = ROOT / "build" / "models"

    assert atc_args(spec) == [
        f"--model={models / 'tiny_llama.onnx'}",
        "--framework=5",
        f"--output={models / 'llama'}",
        "--input_shape=input_ids:-1,-1",
        "--input_format=ND",
        "--dynamic_dims=1,16;1,32;1,64;1,128;4,16;4,32;4,64;4,128;8,16;8,32;8,64;8,128",
        "--soc_version=Ascend910B3",
        "--precision_mode=must_keep_origin_dtype",
    ]


def test_dynamic_dims_gears_for_bert_list_every_inputs_batch_and_sequence():
    spec = load_spec(ROOT / "specs" / "bert.yaml")

    grid = dynamic_dims_gears(spec)

    assert input_shape(spec) == "input_ids:-1,-1;attention_mask:-1,-1"
    assert grid[:3] == [(1, 16, 1, 16), (1, 32, 1, 32), (1, 64, 1, 64)]
    assert grid[-1] == (8, 128, 8, 128)
    assert len(grid) == 4 * 4


def test_atc_args_with_fixed_dims_use_dynamic_batch_size(write_spec, variant):
    text = variant(
        {
            "    dims: [-1]": "    dims: [3, 224, 224]",
            "    dims: [-1, 8]": "    dims: [1000]",
            "    follows: {0: input_ids:0}": "",
            "dims_gears: [16, 32]": "",
        }
    )
    args = atc_args(load_spec(write_spec(text)))

    assert "--input_shape=input_ids:-1,3,224,224" in args
    assert "--dynamic_batch_size=1,4,8" in args
    assert not [a for a in args if a.startswith(("--dynamic_dims", "--input_format"))]


def test_atc_args_with_dims_gears_alone_leave_out_the_batch(write_spec, variant):
    text = variant(
        {
            "batching:": "",
            "  gears: [1, 4, 8]": "",
            "  max_queue_delay_us: 100": "",
            "    dims: [-1]": "    dims: [1, -1]",
            "    dims: [-1, 8]": "    dims: [1, -1, 8]",
            "    follows: {0: input_ids:0}": "",
        }
    )
    args = atc_args(load_spec(write_spec(text)))

    assert "--input_shape=input_ids:1,-1" in args
    assert "--dynamic_dims=16;32" in args
    assert not [a for a in args if a.startswith("--dynamic_batch_size")]


def test_atc_args_for_a_static_model_have_no_dynamic_flags(write_spec, variant):
    text = variant(
        {
            "batching:": "",
            "  gears: [1, 4, 8]": "",
            "  max_queue_delay_us: 100": "",
            "dims_gears: [16, 32]": "",
            "    dims: [-1]": "    dims: [1, 128]",
            "    dims: [-1, 8]": "    dims: [1, 128, 8]",
            "    follows: {0: input_ids:0}": "",
        }
    )
    args = atc_args(load_spec(write_spec(text)))

    assert "--input_shape=input_ids:1,128" in args
    assert not [a for a in args if a.startswith(("--dynamic", "--input_format"))]


@pytest.mark.parametrize(
    ("precision", "flag"),
    [("origin", "must_keep_origin_dtype"), ("fp16", "force_fp16"), ("bf16", "allow_mix_precision_bf16")],
)
def test_atc_args_map_precision_to_precision_mode(write_spec, variant, precision, flag):
    args = atc_args(load_spec(write_spec(variant(append=f"precision: {precision}\n"))))

    assert [a for a in args if a.startswith("--precision")] == [f"--precision_mode={flag}"]


def test_atc_args_pass_atc_options_through_in_order(write_spec, variant):
    text = variant(
        append="atc_options:\n  log: error\n  output_type: FP32\n  input_format: ND\n  op_select_implmode: 1\n"
    )
    args = atc_args(load_spec(write_spec(text)))

    assert args[-3:] == ["--log=error", "--output_type=FP32", "--op_select_implmode=1"]
    assert args.count("--input_format=ND") == 1


def test_atc_args_output_drops_a_trailing_om(write_spec, variant):
    spec = load_spec(write_spec(variant()))

    assert f"--output={Path('repo/m/1/m')}" in atc_args(spec, output=Path("repo/m/1/m.om"))
    assert "--output=out/m" in atc_args(spec, output="out/m")
    assert f"--output={spec.path.parent / 'm'}" in atc_args(spec)


def test_atc_command_is_one_shell_quoted_line(write_spec, variant):
    spec = load_spec(write_spec(variant()))

    line = atc_command(spec, output="out dir/m")

    assert line.startswith("atc --model=")
    assert shlex.split(line) == ["atc", *atc_args(spec, output="out dir/m")]
    assert "'--dynamic_dims=1,16;1,32;4,16;4,32;8,16;8,32'" in line


def test_atc_args_refuse_a_spec_atc_would_reject(write_spec, variant):
    spec = load_spec(write_spec(variant()))
    broken = type(spec)(
        **{**{f: getattr(spec, f) for f in ("name", "model", "inputs", "outputs", "batching")}}
    )

    with pytest.raises(AtcError, match=r"\$\.inputs\[0\]\.dims\[0\]: a -1 dim needs dims_gears"):
        atc_args(broken)
