"""``versions`` and ``version_policy``: several OMs of one model, and which of them Triton serves."""

from __future__ import annotations

from pathlib import Path

import pytest

from ge_plugin.errors import SpecError
from ge_plugin.spec import VersionFiles, VersionPolicy, load_spec

VERSIONS = """\
versions:
  1: {}
  2: {source: m_v2.onnx}
  3: {om: m_v3.om, source: m_v3.onnx}
"""


def problems(write_spec, text: str) -> list[str]:
    path = write_spec(text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return [problem.removeprefix(f"{path}:") for problem in info.value.problems]


def test_load_spec_without_versions_has_version_1_from_model(write_spec, variant):
    spec = load_spec(write_spec(variant()))

    assert spec.versions == {} and spec.version_policy is None
    assert spec.version_numbers == (1,)
    assert (spec.om_filename_for(1), spec.source_path_for(1)) == ("m.om", spec.source_path)
    assert spec.to_params().version_om_model_paths == ()


def test_load_spec_versions_default_to_the_model_files(write_spec, variant):
    spec = load_spec(write_spec(variant(append=VERSIONS)))
    folder = spec.path.parent

    assert spec.version_numbers == (1, 2, 3)
    assert [spec.om_filename_for(v) for v in (1, 2, 3)] == ["m.om", "m.om", "m_v3.om"]
    assert [spec.source_path_for(v) for v in (1, 2, 3)] == [
        Path(folder / "m.onnx"),
        Path(folder / "m_v2.onnx"),
        Path(folder / "m_v3.onnx"),
    ]
    # only a version whose OM has another name needs a path of its own in config.pbtxt
    assert spec.to_params().version_om_model_paths == ((3, "m_v3.om"),)


def test_load_spec_takes_a_version_with_nothing_as_the_model_files(write_spec, variant):
    spec = load_spec(write_spec(variant(append="versions: {1, 2}\n")))

    assert spec.versions == {1: VersionFiles(), 2: VersionFiles()}


def test_version_files_names_the_versions_a_spec_has(write_spec, variant):
    spec = load_spec(write_spec(variant(append=VERSIONS)))

    with pytest.raises(ValueError, match=r"model 'm' has no version 4 \(its versions: 1, 2, 3\)"):
        spec.om_filename_for(4)


@pytest.mark.parametrize(
    ("text", "policy"),
    [
        ("version_policy: all\n", VersionPolicy(all_versions=True)),
        ("version_policy: {latest: 2}\n", VersionPolicy(latest=2)),
        ("version_policy: {specific: [1, 3]}\n", VersionPolicy(specific=(1, 3))),
    ],
)
def test_load_spec_reads_each_form_of_version_policy(write_spec, variant, text, policy):
    assert load_spec(write_spec(variant(append=VERSIONS + text))).version_policy == policy


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("versions: {0: {}}\n", ["22: $.versions[0]: a version is 1 to 9223372036854775807"]),
        ("versions: {'2': {}}\n", ["22: $.versions['2']: expected an integer, got '2'"]),
        ("versions: [1, 2]\n", ["22: $.versions: expected a mapping, got a list"]),
        (
            "versions: {1: {om: ../x.om, source: x.pb}}\n",
            [
                "22: $.versions[1].om: the OM file lives in the model's version folder",
                "22: $.versions[1].source: the source is the ONNX model ATC compiles",
            ],
        ),
        ("version_policy: newest\n", ["22: $.version_policy: expected all, {latest: N} or {specific: [ver"]),
        ("version_policy: {}\n", ["22: $.version_policy: give one of latest: N or specific: [versions]"]),
        ("version_policy: {latest: 0}\n", ["22: $.version_policy.latest: serve the latest 1 to 4294967295"]),
        ("version_policy: {oldest: 1}\n", ["22: $.version_policy.oldest: unknown key 'oldest'"]),
        (
            "versions: {1, 2}\nversion_policy: {specific: [2, 3, 3]}\n",
            [
                "23: $.version_policy.specific[1]: version 3 is not among the spec's versions (1, 2): it would "
                "have no folder for Triton to load",
                "23: $.version_policy.specific[2]: version 3 is listed twice",
            ],
        ),
        (
            "version_policy: {specific: [2]}\n",
            ["22: $.version_policy.specific[0]: version 2 is not among the spec's versions (1)"],
        ),
    ],
)
def test_load_spec_reports_version_mistakes_at_their_line(write_spec, variant, text, expected):
    found = problems(write_spec, variant(append=text))

    assert len(found) == len(expected), found
    for problem, start in zip(sorted(found), sorted(expected)):
        assert problem.startswith(start), problem
