"""``ge-plugin atc`` with a spec that lists versions: one OM per version, each in its own folder."""

from __future__ import annotations

import shlex

import onnx
import pytest

from ge_plugin.atc import simom
from ge_plugin.atc.command import atc_args
from ge_plugin.cli import main
from ge_plugin.errors import AtcError
from ge_plugin.models import identity
from ge_plugin.spec import load_spec

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
versions:
  1: {}
  2: {source: plus_one.onnx}
  3: {om: ident_v3.om, source: plus_one.onnx}
version_policy: {latest: 2}
"""


@pytest.fixture
def spec_path(tmp_path, graphs):
    specs = tmp_path / "specs"
    specs.mkdir()
    onnx.save(identity(), specs / "identity.onnx")
    onnx.save(graphs.plus_one(), specs / "plus_one.onnx")
    (specs / "ident.yaml").write_text(SPEC)
    return specs / "ident.yaml"


def test_atc_args_compile_each_version_from_its_own_source(spec_path):
    spec = load_spec(spec_path)

    assert f"--model={spec_path.parent / 'identity.onnx'}" in atc_args(spec, version=1)
    assert f"--model={spec_path.parent / 'plus_one.onnx'}" in atc_args(spec, version=2)
    assert f"--output={spec_path.parent / 'ident_v3'}" in atc_args(spec, version=3)
    with pytest.raises(AtcError, match=r"model 'ident' has no version 4 \(its versions: 1, 2, 3\)"):
        atc_args(spec, version=4)


def test_sim_builds_every_version_into_its_folder(spec_path, tmp_path, capsys):
    repo = tmp_path / "repo"

    assert main(["atc", str(spec_path), "--sim", "--repository", str(repo)]) == 0

    out = capsys.readouterr().out
    built = {
        version: repo / "ident" / version / name
        for version, name in (("1", "ident.om"), ("2", "ident.om"), ("3", "ident_v3.om"))
    }
    for path in built.values():
        assert f"ident: sim OM written to {path}\n" in out
    sources = {v: simom.read(path).header["atc_options"]["model"] for v, path in built.items()}
    assert sources == {
        "1": str(spec_path.parent / "identity.onnx"),
        "2": str(spec_path.parent / "plus_one.onnx"),
        "3": str(spec_path.parent / "plus_one.onnx"),
    }


def test_sim_model_version_builds_only_that_version_and_leaves_the_others_untouched(
    spec_path, tmp_path, capsys
):
    repo = tmp_path / "repo"
    assert main(["atc", str(spec_path), "--sim", "--repository", str(repo), "--model-version", "1"]) == 0
    v1 = repo / "ident" / "1" / "ident.om"
    before = v1.stat().st_mtime_ns

    assert main(["atc", str(spec_path), "--sim", "--repository", str(repo), "--model-version", "2"]) == 0

    assert v1.stat().st_mtime_ns == before
    assert (repo / "ident" / "2" / "ident.om").is_file()
    assert not (repo / "ident" / "3").exists()
    assert capsys.readouterr().out.count("sim OM written to") == 2


def test_sim_model_version_names_the_versions_of_a_spec_that_lacks_it(spec_path, tmp_path, capsys):
    assert main(["atc", str(spec_path), "--sim", "--repository", str(tmp_path), "--model-version", "7"]) == 1

    err = capsys.readouterr().err
    assert "ident: --model-version 7: the spec has no such version (its versions: 1, 2, 3)" in err
    assert not (tmp_path / "ident").exists()


def test_print_gives_one_command_per_version_into_its_folder(spec_path, tmp_path, capsys):
    repo = tmp_path / "repo"

    assert main(["atc", str(spec_path), "--print", "--repository", str(repo)]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[0::2] == ["# ident version 1", "# ident version 2", "# ident version 3"]
    outputs = [next(w for w in shlex.split(line) if w.startswith("--output=")) for line in lines[1::2]]
    assert outputs == [
        f"--output={repo / 'ident' / '1' / 'ident'}",
        f"--output={repo / 'ident' / '2' / 'ident'}",
        f"--output={repo / 'ident' / '3' / 'ident_v3'}",
    ]


def test_model_version_needs_specs():
    with pytest.raises(SystemExit) as exited:
        main(["atc", "--model=x.onnx", "--framework=5", "--model-version", "2"])
    assert exited.value.code == 2
