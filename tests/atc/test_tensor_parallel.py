"""``tp_size`` and ATC's distributed-build flags get the answer to "split requests over 8 NPUs", not a bare
"unknown option": from the ATC flag checks, from ``ge-plugin atc`` and from ``ge-plugin validate``."""

from __future__ import annotations

import pytest

from ge_plugin.atc.flags import parse_args
from ge_plugin.atc.tables import DISTRIBUTED_ATC_FLAGS
from ge_plugin.cli import main
from ge_plugin.errors import AtcError

BASE = ["--model=m.onnx", "--framework=5", "--output=out", "--soc_version=Ascend910B3"]

SPEC = """\
name: big
model:
  om: big.om
  source: big.onnx
  soc_version: Ascend910B3
inputs:
  - name: x
    dtype: fp32
    dims: [4]
outputs:
  - name: y
    dtype: fp32
    dims: [4]
"""


def explains_data_parallel(text: str) -> bool:
    return "list them in placement.devices: one instance group per NPU" in text and "docs/serving.md" in text


@pytest.mark.parametrize("flag", ["tp_size", "tensor_parallel_size"])
def test_parse_args_answers_tp_size_as_atc_would_and_says_why(flag):
    with pytest.raises(AtcError) as caught:
        parse_args([*BASE, f"--{flag}=8"])

    message = str(caught.value)
    assert message.startswith(f"ERROR: unknown command line flag '{flag}': ATC has no such flag")
    assert "--distributed_cluster_build=1 --enable_graph_parallel=1" in message
    assert "only through GE's Session::LoadGraph" in message and "aclmdlLoadFromFile" in message
    assert explains_data_parallel(message)


@pytest.mark.parametrize("flag", DISTRIBUTED_ATC_FLAGS)
def test_parse_args_refuses_distributed_build_flags_with_the_loading_reason(flag):
    with pytest.raises(AtcError) as caught:
        parse_args([*BASE, f"--{flag}=1"])

    message = str(caught.value)
    assert message.startswith(
        f"E10001: Value [1] for parameter [--{flag}] is invalid. Reason: this flag builds"
    )
    assert "not with aclmdlLoadFromFile" in message and explains_data_parallel(message)


def test_atc_command_answers_tp_size_instead_of_a_usage_error(capsys):
    assert main(["atc", *BASE, "--tp_size=8"]) == 1

    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("ATC run failed")
    assert err[1].startswith("ERROR: unknown command line flag 'tp_size': ATC has no such flag")


def test_atc_command_answers_tp_size_given_next_to_specs(tmp_path, capsys):
    spec = tmp_path / "big.yaml"
    spec.write_text(SPEC)

    assert main(["atc", str(spec), "--sim", "--tp_size", "8"]) == 1

    assert "ERROR: unknown command line flag 'tp_size': ATC has no such flag" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "fragment"),
    [
        ("tp_size: 8", "--tp_size: ATC has no such flag"),
        (
            "distributed_cluster_build: 1",
            "--distributed_cluster_build: this flag builds an OM for distributed",
        ),
    ],
)
def test_validate_answers_multi_device_atc_options(tmp_path, capsys, option, fragment):
    spec = tmp_path / "big.yaml"
    spec.write_text(SPEC + f"atc_options:\n  {option}\n")

    assert main(["validate", str(spec)]) == 1

    problem = capsys.readouterr().err.splitlines()[0]
    assert problem.startswith(f"{spec}:15: $.atc_options.{option.split(':')[0]}: {fragment}")
    assert explains_data_parallel(problem)
