"""ATC flag checks: what ATC rejects is rejected, with ATC's message codes and a reason."""

from __future__ import annotations

import pytest

from ge_plugin.atc.flags import parse_args
from ge_plugin.errors import AtcError

BASE = ["--model=m.onnx", "--framework=5", "--output=out", "--soc_version=Ascend910B3"]


def rejected(*extra: str, base=BASE) -> str:
    with pytest.raises(AtcError) as caught:
        parse_args([*base, *extra])
    return str(caught.value)


def test_both_flag_forms_and_leading_atc():
    options = parse_args(
        ["atc", "--model", "m.onnx", "--framework=5", "--output", "dir/out.om", "--soc_version=X"]
    )
    assert (options.model, options.framework, options.output, options.om_path) == (
        "m.onnx",
        5,
        "dir/out",
        "dir/out.om",
    )
    assert options.dynamic_mode == "static" and options.precision == "fp16"
    assert options.command().startswith("atc --model=m.onnx --framework=5")


def test_last_occurrence_wins():
    assert parse_args([*BASE, "--log=info", "--log=error"]).log == "error"


@pytest.mark.parametrize("flag", ["model", "framework", "output", "soc_version"])
def test_required_flags(flag):
    base = [f for f in BASE if not f.startswith(f"--{flag}=")]
    assert rejected(base=base) == f"E10004: Value for --{flag} is empty."


def test_framework_must_be_onnx():
    message = rejected("--framework=3", base=BASE[:1] + BASE[2:])
    assert message.startswith("E10001: Value [3] for parameter [--framework] is invalid. Reason:")
    assert "ONNX models only (--framework=5)" in message and "TensorFlow" in message
    assert "E10001" in rejected("--framework=onnx", base=BASE[:1] + BASE[2:])


def test_unknown_and_unsupported_flags():
    assert rejected("--modle=x") == "ERROR: unknown command line flag 'modle'"
    assert "--keep_dtype is an ATC flag the ge-plugin simulator does not support" in rejected(
        "--keep_dtype=a.cfg"
    )
    assert parse_args([*BASE, "--host_env_os=linux"]).given[-1] == ("host_env_os", "linux")


def test_mode_other_than_build_is_refused():
    assert "--mode=0" in rejected("--mode=1")


def test_gear_counts_must_be_2_to_100():
    assert rejected("--input_shape=x:-1,4", "--dynamic_batch_size=4").startswith("E10035:")
    many = ",".join(str(i) for i in range(1, 102))
    assert rejected("--input_shape=x:-1,4", f"--dynamic_batch_size={many}").startswith("E10036:")
    grid = ";".join(f"{i},1" for i in range(1, 102))
    assert rejected("--input_shape=x:-1,-1", "--input_format=ND", f"--dynamic_dims={grid}").startswith(
        "E10036:"
    )
    options = parse_args(
        [*BASE, "--input_shape=x:-1,4", "--dynamic_batch_size=" + ",".join(map(str, range(1, 101)))]
    )
    assert len(options.gears) == 100


def test_only_one_gear_flag():
    message = rejected("--input_shape=x:-1,-1", "--dynamic_batch_size=1,2", "--dynamic_dims=1,2;3,4")
    assert message.startswith("E10009:") and "mutually exclusive" in message


def test_minus_one_dims_need_a_gear_flag():
    message = rejected("--input_shape=x:-1,4")
    assert message.startswith("E10011:") and "--dynamic_batch_size" in message


def test_shape_ranges_are_not_simulated():
    assert "shape range" in rejected("--input_shape=x:1~8,4")


def test_dynamic_batch_size_rules():
    assert rejected("--input_shape=x:2,4", "--dynamic_batch_size=1,2").startswith("E10031:")
    assert rejected("--input_shape=x:-1,-1", "--dynamic_batch_size=1,2").startswith("E10018:")
    assert rejected("--input_shape=x:-1,4", "--dynamic_batch_size=1,0").startswith("E10038:")
    assert rejected("--input_shape=x:-1,4", "--dynamic_batch_size=1,2,2").startswith("E10039:")
    assert "[a] is not an integer" in rejected("--input_shape=x:-1,4", "--dynamic_batch_size=1,a")
    options = parse_args([*BASE, "--input_shape=x:-1,4;y:-1", "--dynamic_batch_size=1,2,4"])
    assert options.dynamic_mode == "batch" and options.gears == ((1,), (2,), (4,))


def test_dynamic_dims_rules():
    shape = "--input_shape=ids:-1,-1;mask:-1,-1"
    assert "--dynamic_dims needs --input_format=ND" in rejected(shape, "--dynamic_dims=1,2,1,2;2,4,2,4")
    nd = "--input_format=ND"
    assert rejected(shape, nd, "--dynamic_dims=1,2;2,4").startswith("E10045:")
    assert rejected(shape, nd, "--dynamic_dims=1,2,1,2;2,4,2").startswith("E10037:")
    options = parse_args([*BASE, shape, nd, "--dynamic_dims=1,16,1,16;4,32,4,32"])
    assert options.dynamic_mode == "dims" and options.gears == ((1, 16, 1, 16), (4, 32, 4, 32))


def test_dynamic_image_size_rules():
    assert rejected("--input_shape=x:1,-1,224,224", "--dynamic_image_size=1,2;3,4").startswith("E10019:")
    assert rejected("--input_shape=x:1,3,-1,-1", "--dynamic_image_size=1,2,3;4,5,6").startswith("E10020:")
    options = parse_args([*BASE, "--input_shape=x:1,3,-1,-1", "--dynamic_image_size=224,224;448,448"])
    assert options.dynamic_mode == "hw" and options.gears == ((224, 224), (448, 448))


def test_input_shape_syntax():
    assert rejected("--input_shape=x:1,a").startswith("E10002:")
    assert rejected("--input_shape=1,2").startswith("E10002:")
    assert rejected("--input_shape=x:1,0").startswith("E10011:")
    assert rejected("--input_shape=x:1;x:2").startswith("E10002:")
    options = parse_args([*BASE, "--input_shape=scalar:;tf/in:0:1,3"])
    assert options.input_shape == (("scalar", ()), ("tf/in:0", (1, 3)))


def test_precision_flags():
    assert parse_args([*BASE, "--precision_mode=must_keep_origin_dtype"]).precision == "fp32"
    assert parse_args([*BASE, "--precision_mode=allow_mix_precision_bf16"]).precision == "bf16"
    assert parse_args([*BASE, "--precision_mode_v2=mixed_float16"]).precision == "fp16"
    assert parse_args([*BASE, "--precision_mode_v2=origin"]).precision == "fp32"
    assert rejected("--precision_mode=fast").startswith(
        "E10001: Value [fast] for parameter [--precision_mode]"
    )
    both = rejected("--precision_mode=force_fp16", "--precision_mode_v2=fp16")
    assert both.startswith("E10047:")
    assert "HiFloat8" in rejected("--precision_mode_v2=mixed_hif8")


def test_output_type_forms():
    assert parse_args([*BASE, "--output_type=fp16"]).output_type == "FP16"
    assert rejected("--output_type=BF16").startswith("E10001:")
    assert "needs --out_nodes" in rejected("--output_type=mm:0:FP16")
    options = parse_args([*BASE, "--out_nodes=mm:0;y", "--output_type=mm:0:FP16;y:0:FP32"])
    assert options.output_type_per_node == (("mm", 0, "FP16"), ("y", 0, "FP32"))
    assert "is not node:index:type" in rejected("--out_nodes=y", "--output_type=y:FP16")


@pytest.mark.parametrize("index", ["²", "٢", "x"])
def test_output_type_index_that_is_not_an_ascii_number_is_refused_as_atc_does(index):
    """``"²".isdigit()`` is true and ``int("²")`` raises a bare ValueError; ``int("٢")`` is 2."""
    message = rejected("--out_nodes=mm:0", f"--output_type=mm:{index}:FP16")
    assert message == (
        f"E10001: Value [mm:{index}:FP16] for parameter [--output_type] is invalid. Reason: [mm:{index}:FP16] "
        "is not node:index:type"
    )


def test_input_format_and_log():
    assert rejected("--input_format=NHWC").startswith("E10001: Value [NHWC] for parameter [--input_format]")
    assert rejected("--log=verbose").startswith("E10010:")


def test_value_missing_at_the_end():
    assert rejected("--log") == "E10004: Value for --log is empty."
    assert "is not a flag" in rejected("stray")


def test_one_dash_and_hyphenated_names_are_the_flags_atc_takes():
    """The ATC guide: a one-dash prefix becomes two, ``-`` in a name is ``_`` (``-soc-version``)."""
    options = parse_args(
        ["-model=m.onnx", "-framework", "5", "-output=out", "--soc-version=Ascend310P3", "-output_type=FP32"]
    )
    assert (options.model, options.framework, options.output, options.soc_version) == (
        "m.onnx",
        5,
        "out",
        "Ascend310P3",
    )
    assert options.output_type == "FP32"


def test_flags_of_atcs_list_that_change_nothing_here_are_accepted_with_their_values_checked():
    options = parse_args(
        [*BASE, "--check_report=report.json", "-save_original_model=false", "--deterministic=1"]
    )
    assert options.given[-3:] == (
        ("check_report", "report.json"),
        ("save_original_model", "false"),
        ("deterministic", "1"),
    )
    assert rejected("--save_original_model=no") == (
        "E10001: Value [no] for parameter [--save_original_model] is invalid. Reason: use true or false"
    )
    assert "does not support" in rejected("--op_name_map=map.cfg")
