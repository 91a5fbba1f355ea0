"""The spec's ``tokenizer:`` section: validated with the rest, rendered as copies beside the model that the
config's parameters name, and read back from a repository as the front reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ge_plugin.errors import RenderError, SpecError, TokenizerError
from ge_plugin.render import diff_repository, render_text, write_repository
from ge_plugin.spec import load_specs
from ge_plugin.text import files
from ge_plugin.text.demo import write_demo_tokenizer

SPEC = """\
name: chat
model:
  om: m.om
  source: m.onnx
  soc_version: Ascend310P3
inputs:
  - name: input_ids
    dtype: int64
    dims: [-1]
outputs:
  - name: logits
    dtype: fp32
    dims: [-1, 512]
dims_gears: [16, 32]
"""


def write(tmp_path: Path, section: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC + section, encoding="utf-8")
    return path


@pytest.fixture
def tokenizer_dir(tmp_path) -> Path:
    write_demo_tokenizer(tmp_path / "models")
    return tmp_path / "models"


def test_tokenizer_section_renders_copies_and_parameters(tmp_path, tokenizer_dir):
    spec_path = write(
        tmp_path, "tokenizer:\n  file: models/tokenizer.json\n  config: models/tokenizer_config.json\n"
    )
    (spec,) = load_specs([spec_path])
    assert spec.tokenizer_sources() == (
        tokenizer_dir / "tokenizer.json",
        tokenizer_dir / "tokenizer_config.json",
    )
    text = render_text(spec)
    assert 'key: "tokenizer_json"\n  value {\n    string_value: "tokenizer.json"' in text
    assert 'key: "tokenizer_config_json"\n  value {\n    string_value: "tokenizer_config.json"' in text
    repo = tmp_path / "repo"
    (config,) = write_repository([spec], repo)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (repo / "chat" / name).read_bytes() == (tokenizer_dir / name).read_bytes()
    assert diff_repository([spec], repo) == ""
    # the front's reading of the repository finds the same files
    assert files.tokenizer_paths(files.config_parameters(config), repo / "chat") == (
        repo / "chat" / "tokenizer.json",
        repo / "chat" / "tokenizer_config.json",
    )
    (repo / "chat" / "tokenizer.json").write_text("{}")
    assert "Files differ:" in diff_repository([spec], repo)
    write_repository([spec], repo)  # a second render puts the spec's file back
    assert (repo / "chat" / "tokenizer.json").read_bytes() == (tokenizer_dir / "tokenizer.json").read_bytes()


def test_tokenizer_section_without_config_names_only_the_tokenizer(tmp_path, tokenizer_dir):
    (spec,) = load_specs([write(tmp_path, "tokenizer:\n  file: models/tokenizer.json\n")])
    assert "tokenizer_json" in render_text(spec) and "tokenizer_config_json" not in render_text(spec)
    assert "tokenizer" not in render_text(load_specs([write(tmp_path, "")])[0])


def test_tokenizer_section_mistakes_name_the_line(tmp_path):
    with pytest.raises(
        SpecError,
        match=r"spec\.yaml:16: \$\.tokenizer\.file: a Hugging Face tokenizer file is a \.json file, got 'models/tok\.model'",
    ):
        load_specs([write(tmp_path, "tokenizer:\n  file: models/tok.model\n")])
    with pytest.raises(SpecError, match="vocab"):
        load_specs([write(tmp_path, "tokenizer:\n  file: t.json\n  vocab: 3\n")])


def test_tokenizer_file_missing_at_render_is_left_to_the_load(tmp_path):
    """As with an ONNX source, rendering needs no tokenizer yet (demo-models writes the demo's); the config
    names it all the same, and the model's load (or the front) says which file is missing."""
    (spec,) = load_specs([write(tmp_path, "tokenizer:\n  file: models/tokenizer.json\n")])
    (config,) = write_repository([spec], tmp_path / "repo")
    assert "tokenizer_json" in config.read_text() and not (config.parent / "tokenizer.json").exists()
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tokenizer.json").mkdir()  # unreadable as a file
    with pytest.raises(RenderError, match=r"tokenizer file .*models/tokenizer\.json cannot be read"):
        write_repository([spec], tmp_path / "repo")


def test_tokenizer_parameters_may_not_leave_the_model_folder(tmp_path):
    with pytest.raises(TokenizerError, match="inside the model's folder"):
        files.tokenizer_paths({"tokenizer_json": "../../etc/passwd"}, tmp_path)
    assert files.tokenizer_paths({"om_model_path": "m.om"}, tmp_path) is None
