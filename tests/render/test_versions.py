"""Versions in the repository: a folder per version, version_policy in config.pbtxt, per-version OM paths
that the engine resolves in the folder Triton loads, and re-rendering that leaves serving versions alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from google.protobuf import json_format

from ge_plugin.atc.command import atc_args
from ge_plugin.atc.flags import parse_args
from ge_plugin.atc.simbuild import build
from ge_plugin.engine import Engine
from ge_plugin.models import identity
from ge_plugin.render import diff_repository, render_config, served_versions, stale_versions, write_repository
from ge_plugin.spec import load_spec

SPEC = """\
name: ident
model:
  om: ident.om
  source: identity.onnx
  soc_version: Ascend310P3
inputs:
  - {name: INPUT0, dtype: fp32, dims: [16]}
outputs:
  - {name: OUTPUT0, dtype: fp32, dims: [16]}
batching:
  gears: [1, 2]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ident.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("all", {"all": {}}),
        ("{latest: 3}", {"latest": {"num_versions": 3}}),
        ("{specific: [1, 2]}", {"specific": {"versions": ["1", "2"]}}),
    ],
)
def test_render_config_writes_the_version_policy(tmp_path, policy, expected):
    spec = load_spec(write(tmp_path, SPEC + f"versions: {{1, 2}}\nversion_policy: {policy}\n"))

    config = json_format.MessageToDict(render_config(spec), preserving_proto_field_name=True)

    assert config["version_policy"] == expected


def test_render_config_leaves_the_policy_to_triton_when_the_spec_has_none(tmp_path):
    assert not render_config(load_spec(write(tmp_path, SPEC))).HasField("version_policy")


def test_write_repository_makes_a_folder_per_version(tmp_path):
    spec = load_spec(write(tmp_path, SPEC + "versions: {2, 5}\n"))

    write_repository([spec], tmp_path / "repo")

    model = tmp_path / "repo" / "ident"
    assert sorted(p.name for p in model.iterdir()) == ["2", "5", "config.pbtxt"]
    assert (model / "2" / ".gitkeep").is_file() and (model / "5" / ".gitkeep").is_file()


def test_write_repository_again_leaves_version_folders_and_their_times_alone(tmp_path):
    # Triton reloads a version whose folder looks modified: re-rendering must not make a served version
    # look new in the middle of a rolling update.
    repo = tmp_path / "repo"
    spec = load_spec(write(tmp_path, SPEC + "versions: {1}\n"))
    write_repository([spec], repo)
    (repo / "ident" / "1" / "ident.om").write_bytes(b"om")
    old = 1_000_000_000
    for path in (repo / "ident" / "1", repo / "ident" / "1" / ".gitkeep", repo / "ident" / "1" / "ident.om"):
        os.utime(path, ns=(old, old))

    spec2 = load_spec(write(tmp_path, SPEC + "versions: {1, 2}\nversion_policy: all\n"))
    write_repository([spec2], repo)

    for path in (repo / "ident" / "1", repo / "ident" / "1" / ".gitkeep", repo / "ident" / "1" / "ident.om"):
        assert path.stat().st_mtime_ns == old, path
    assert (repo / "ident" / "2" / ".gitkeep").is_file()


def test_diff_repository_lists_missing_version_folders(tmp_path):
    repo = tmp_path / "repo"
    write_repository([load_spec(write(tmp_path, SPEC))], repo)

    spec = load_spec(write(tmp_path, SPEC + "versions: {1, 2}\n"))

    assert f"Only in the specs: {repo / 'ident' / '2'}{os.sep}\n" in diff_repository([spec], repo)


@pytest.mark.parametrize(
    ("policy", "folders", "reported"),
    [
        ("", [1, 3], [3]),  # the latest is 3, a folder no spec lists: Triton would serve it instead of 2
        ("", [1], []),  # an old folder the default policy no longer serves: harmless
        ("version_policy: all\n", [1, 7], [1, 7]),
        ("version_policy: {latest: 2}\n", [1, 3], [3]),
        ("version_policy: {specific: [2]}\n", [1, 3], []),
    ],
)
def test_stale_versions_are_folders_no_spec_lists_that_triton_would_serve(
    tmp_path, policy, folders, reported
):
    repo = tmp_path / "repo"
    spec = load_spec(write(tmp_path, SPEC + "versions: {2}\n" + policy))
    write_repository([spec], repo)
    for number in folders:
        (repo / "ident" / str(number)).mkdir()
    (repo / "ident" / "04").mkdir()  # Triton ignores names starting with 0
    (repo / "ident" / "notes").mkdir()

    stale = stale_versions([spec], repo)

    assert [path for path, _ in stale] == [repo / "ident" / str(v) for v in reported]
    diff = diff_repository([spec], repo)
    for path, why in stale:
        assert f"Only in the repository: {path}{os.sep} ({why})\n" in diff
        assert why.startswith(f"version {path.name} is in no spec, yet ")
    assert bool(diff) == bool(reported)


def test_served_versions_follow_triton_policies(tmp_path):
    def served(policy: str) -> list[int]:
        return served_versions(load_spec(write(tmp_path, SPEC + f"versions: {{1}}\n{policy}")), [1, 2, 5])

    assert served("") == [5]
    assert served("version_policy: all\n") == [1, 2, 5]
    assert served("version_policy: {latest: 2}\n") == [2, 5]
    assert served("version_policy: {specific: [1]}\n") == [1]


def test_render_command_warns_of_a_version_folder_triton_would_serve(tmp_path):
    repo = tmp_path / "repo"
    spec = write(tmp_path, SPEC + "versions: {1}\n")
    (repo / "ident" / "2").mkdir(parents=True)

    result = subprocess.run(
        [sys.executable, "-m", "ge_plugin", "render", str(spec), "-o", str(repo)],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    assert result.stderr == (
        f"warning: {repo / 'ident' / '2'}: version 2 is in no spec, yet Triton's default policy, the latest "
        "version serves it: delete the folder or list it\n"
    )


def test_engine_serves_each_version_its_own_om(tmp_path, fresh_sim, graphs):
    onnx.save(identity(), tmp_path / "identity.onnx")
    onnx.save(graphs.plus_one(), tmp_path / "plus_one.onnx")
    spec = load_spec(
        write(
            tmp_path, SPEC + "versions:\n  1: {}\n  2: {om: ident_v2.om, source: plus_one.onnx}\nwarmup: 0\n"
        )
    )
    repo = tmp_path / "repo"
    write_repository([spec], repo)
    for version in spec.version_numbers:
        output = repo / "ident" / str(version) / Path(spec.om_filename_for(version)).stem
        build(parse_args(atc_args(spec, version=version, output=output)))
    config = json_format.MessageToDict(render_config(spec), preserving_proto_field_name=True)
    rows = np.arange(32, dtype=np.float32).reshape(2, 16)

    answers = {}
    for version in (1, 2):
        engine = Engine.from_model_config(config, version_dir=repo / "ident" / str(version))
        try:
            assert Path(engine.om_path).name == spec.om_filename_for(version)
            (result,) = engine.execute([{"INPUT0": rows}])
            answers[version] = result["OUTPUT0"]
        finally:
            engine.close()

    np.testing.assert_array_equal(answers[1], rows)
    np.testing.assert_array_equal(answers[2], rows + 1)
