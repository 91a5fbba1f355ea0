from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ge_plugin.errors import RenderError
from ge_plugin.render import diff_repository, render_text, stale_models, write_repository
from ge_plugin.spec import load_specs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def specs():
    return load_specs([ROOT / "specs"])


def test_write_repository_writes_configs_and_version_folders(specs, tmp_path):
    written = write_repository(specs, tmp_path / "repo")

    assert written == [tmp_path / "repo" / s.name / "config.pbtxt" for s in specs]
    for spec, config in zip(specs, written):
        assert config.read_text() == render_text(spec)
        assert config.stat().st_mode & 0o044 == 0o044  # readable by a tritonserver running as someone else
        assert (config.parent / "1" / ".gitkeep").is_file()


def test_write_repository_leaves_other_files_and_unchanged_configs_alone(specs, tmp_path):
    repo = tmp_path / "repo"
    write_repository(specs, repo)
    om = repo / specs[0].name / "1" / specs[0].om_filename
    om.write_bytes(b"model")
    other = repo / "onnx_model" / "config.pbtxt"
    other.parent.mkdir()
    other.write_text('backend: "onnxruntime"\n')
    config = repo / specs[0].name / "config.pbtxt"
    before = config.stat().st_mtime_ns

    write_repository(specs, repo)

    assert om.read_bytes() == b"model"
    assert other.read_text() == 'backend: "onnxruntime"\n'
    assert config.stat().st_mtime_ns == before


def test_write_repository_refuses_to_overwrite_another_backends_model(specs, tmp_path):
    clash = tmp_path / specs[0].name / "config.pbtxt"
    clash.parent.mkdir()
    clash.write_text('name: "x"\nplatform: "onnxruntime_onnx"\n')

    with pytest.raises(RenderError, match="belongs to another backend"):
        write_repository(specs, tmp_path)

    assert clash.read_text() == 'name: "x"\nplatform: "onnxruntime_onnx"\n'


def test_diff_repository_is_empty_after_writing(specs, tmp_path):
    write_repository(specs, tmp_path)

    assert diff_repository(specs, tmp_path) == ""


def test_diff_repository_shows_a_changed_line(specs, tmp_path):
    write_repository(specs, tmp_path)
    config = tmp_path / specs[0].name / "config.pbtxt"
    config.write_text(config.read_text().replace("max_batch_size: 8", "max_batch_size: 4"))

    diff = diff_repository(specs, tmp_path)

    assert diff.startswith(f"--- {config}\n+++ {config} (rendered from {specs[0].path})\n")
    assert "\n-max_batch_size: 4\n+max_batch_size: 8\n" in diff


def test_diff_repository_shows_missing_models_and_version_folders(specs, tmp_path):
    write_repository(specs[1:], tmp_path)
    shutil.rmtree(tmp_path / specs[1].name / "1")

    diff = diff_repository(specs, tmp_path)

    assert f"--- /dev/null\n+++ {tmp_path / specs[0].name / 'config.pbtxt'} (rendered from" in diff
    assert f"Only in the specs: {tmp_path / specs[1].name / '1'}/\n" in diff


def test_diff_repository_removes_stale_ge_models_but_ignores_other_backends(specs, tmp_path):
    write_repository(specs, tmp_path)
    stale = tmp_path / "old_model" / "config.pbtxt"
    stale.parent.mkdir()
    stale.write_text('name: "old_model"\nbackend: "ge"\n')
    other = tmp_path / "onnx_model" / "config.pbtxt"
    other.parent.mkdir()
    other.write_text('name: "onnx_model"\nbackend: "onnxruntime"\n')

    diff = diff_repository(specs, tmp_path)

    assert stale_models(specs, tmp_path) == [stale]
    assert diff == (
        f"--- {stale}\n+++ /dev/null (no spec renders this model: {stale})\n"
        '@@ -1,2 +0,0 @@\n-name: "old_model"\n-backend: "ge"\n'
    )


def test_diff_repository_marks_a_missing_final_newline(specs, tmp_path):
    write_repository(specs, tmp_path)
    config = tmp_path / specs[0].name / "config.pbtxt"
    config.write_text(config.read_text().rstrip("\n"))

    assert "\\ No newline at end of file\n" in diff_repository(specs, tmp_path)


def test_model_repository_in_git_is_the_rendered_form_of_specs(specs):
    assert diff_repository(specs, ROOT / "model_repository") == ""


def test_write_repository_refuses_a_file_as_repository(specs, tmp_path):
    (tmp_path / "repo").write_text("")

    with pytest.raises(RenderError, match="is not a directory"):
        write_repository(specs, tmp_path / "repo")
