"""``ge-plugin atc``: ATC's flags (ATC-like answers), SPEC --print and SPEC --sim."""

from __future__ import annotations

import shlex

import onnx
import pytest

from ge_plugin.atc import simom
from ge_plugin.cli import main
from ge_plugin.models import identity

SPEC = """\
name: ident
model:
  om: ident.om
  source: identity.onnx
  soc_version: Ascend310P3
inputs:
  - name: INPUT0
    dtype: fp32
    dims: [16]
outputs:
  - name: OUTPUT0
    dtype: fp32
    dims: [16]
batching:
  gears: [1, 2, 4]
  max_queue_delay_us: 100
placement:
  devices: [0]
  instances_per_device: 1
precision: origin
"""


@pytest.fixture
def spec_dir(tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    onnx.save(identity(), specs / "identity.onnx")
    (specs / "ident.yaml").write_text(SPEC)
    return specs


def test_flags_build_with_atc_answers(base, tmp_path, capsys):
    code = main(["atc", *base, "--input_shape", "ids:1,2;x:1,2,4", "--log=info"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("ATC start working now, please wait for a moment.\n")
    assert out.rstrip().endswith("ATC run success, welcome to the next use.")
    assert "gear static" in out  # --log=info shows the build
    assert simom.read(tmp_path / "out.om").header["dynamic"]["mode"] == "static"


def test_flags_failure_is_atc_like(base, capsys):
    code = main(["atc", *base, "--input_shape=ids:-1,2;x:-1,2,4", "--dynamic_batch_size=8"])
    err = capsys.readouterr().err.splitlines()
    assert code == 1
    assert err[0] == "ATC run failed, Please check the detail log, Try 'atc --help' for more information"
    assert err[1].startswith("E10035: --dynamic_batch_size has 1 profiles")


def test_unknown_flag_is_a_usage_error_in_atcs_words(base, capsys):
    assert main(["atc", *base, "--frobnicate=1"]) == 2
    assert capsys.readouterr().err == "ERROR: unknown command line flag 'frobnicate'\n"
    assert main(["atc", *base, "--modle", "x.onnx"]) == 2  # a value apart from its flag
    assert capsys.readouterr().err == (
        "ERROR: unknown command line flag 'modle' (did you mean --mode or --model?)\n"
    )
    assert main(["atc", *base, "--mod=0"]) == 2  # no prefix matching: ATC has --mode and --model
    assert "unknown command line flag 'mod'" in capsys.readouterr().err


def test_other_commands_still_refuse_unknown_arguments_as_argparse_does(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["validate", "specs", "--frobnicate"])
    assert exited.value.code == 2
    assert "ge-plugin: error: unrecognized arguments: --frobnicate" in capsys.readouterr().err


def test_help_lists_flags_and_ends_with_examples(capsys):
    with pytest.raises(SystemExit):
        main(["atc", "--help"])
    out = capsys.readouterr().out
    assert "--dynamic_dims VALUE" in out and "--precision_mode_v2 VALUE" in out
    assert out.rstrip().splitlines()[-1].strip() == (
        "ge-plugin atc specs/llama.yaml --sim --model-version 2    # only the OM of version 2"
    )


def test_spec_print_gives_the_real_atc_command(spec_dir, capsys):
    assert main(["atc", str(spec_dir / "ident.yaml"), "--print"]) == 0
    words = shlex.split(capsys.readouterr().out)
    assert words[0] == "atc"
    assert "--dynamic_batch_size=1,2,4" in words and "--input_shape=INPUT0:-1,16" in words


def test_spec_sim_builds_into_the_repository(spec_dir, tmp_path, capsys):
    repo = tmp_path / "repo"
    assert main(["atc", str(spec_dir), "--sim", "--repository", str(repo)]) == 0
    out = capsys.readouterr().out
    path = repo / "ident" / "1" / "ident.om"
    assert f"ident: sim OM written to {path}" in out
    header = simom.read(path).header
    assert header["dynamic"]["mode"] == "batch"
    assert [g["values"] for g in header["dynamic"]["gears"]] == [[1], [2], [4]]
    assert header["precision"] == "fp32" and header["soc_version"] == "Ascend310P3"


def test_spec_sim_reports_atc_failures(spec_dir, tmp_path, capsys):
    (spec_dir / "ident.yaml").write_text(SPEC + "atc_options:\n  out_nodes: missing\n")
    assert main(["atc", str(spec_dir), "--sim", "--repository", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert "ident: E10016: Opname [missing] specified in [--out_nodes]" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["atc"],
        ["atc", "specs"],
        ["atc", "--print"],
        ["atc", "specs", "--sim", "--model=x.onnx"],
        ["atc", "specs", "--sim", "--print"],
    ],
)
def test_usage_errors(argv):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2


def test_the_flag_forms_of_the_samples_readmes_build_the_same_om(model_file, tmp_path, capsys):
    """What the public samples' READMEs write (issue 31): one-dash flags, --check_report,
    --save_original_model; exit 2 before."""
    argv = [
        f"-model={model_file}",
        "-framework=5",
        f"-output={tmp_path / 'one_dash'}",
        "-soc_version=Ascend310P3",
        "-input_shape=ids:1,2;x:1,2,4",
        "-output_type=FP32",
        f"--check_report={tmp_path / 'check_result.json'}",
        "--save_original_model=false",
        "--soc-version=Ascend310P3",
    ]
    assert main(["atc", *argv]) == 0, capsys.readouterr().err
    header = simom.read(tmp_path / "one_dash.om").header
    twin = [a.replace("-", "--", 1) if not a.startswith("--") else a for a in argv]
    twin = [a.replace("one_dash", "two_dash").replace("--soc-version", "--soc_version") for a in twin]
    assert main(["atc", *twin]) == 0
    assert simom.read(tmp_path / "two_dash.om").header["outputs"] == header["outputs"]
    assert main(["atc", *argv[:4], "-save_original_model=maybe"]) == 1
    assert "[--save_original_model] is invalid" in capsys.readouterr().err
