"""Determinism and the write-only-if-changed behaviour that keeps demo re-runs fast."""

from __future__ import annotations

import hashlib

import onnx
import pytest

from ge_plugin import models


@pytest.mark.parametrize("stem", list(models.DEMO_MODELS))
def test_demo_models_are_byte_identical_when_built_twice(stem):
    build = models.DEMO_MODELS[stem]
    first = hashlib.sha256(build().SerializeToString()).hexdigest()
    second = hashlib.sha256(build().SerializeToString()).hexdigest()
    assert first == second


@pytest.mark.parametrize("stem", list(models.DEMO_MODELS))
def test_demo_models_embed_no_changing_versions(stem):
    model = models.DEMO_MODELS[stem]()
    assert model.producer_version == ""
    assert model.ir_version == 8


def test_write_demo_models_creates_the_directory_and_a_loadable_file_each(tmp_path):
    paths = models.write_demo_models(tmp_path / "new" / "models")
    assert {stem: path.name for stem, path in paths.items()} == {
        "tiny_llama": "tiny_llama.onnx",
        "tiny_bert": "tiny_bert.onnx",
        "identity": "identity.onnx",
        "tiny_cnn": "tiny_cnn.onnx",
        "bf16_affine": "bf16_affine.onnx",
        "tiny_llama_gen": "tiny_llama_gen.onnx",
        "tiny_llama_kv": "tiny_llama_kv.onnx",
        "tiny_llama_kv_layers": "tiny_llama_kv_layers.onnx",
    }
    for stem, path in paths.items():
        assert onnx.load(path).SerializeToString() == models.DEMO_MODELS[stem]().SerializeToString()
    assert sorted(p.name for p in (tmp_path / "new" / "models").iterdir()) == sorted(
        p.name for p in paths.values()
    )  # no temporary files left behind


def test_write_demo_models_leaves_identical_files_alone(tmp_path):
    paths = models.write_demo_models(tmp_path)
    before = {stem: path.stat() for stem, path in paths.items()}
    models.write_demo_models(tmp_path)
    for stem, path in paths.items():
        after = path.stat()
        # A rewrite goes through a temporary file and a rename, which would give a new inode.
        assert (after.st_ino, after.st_mtime_ns) == (before[stem].st_ino, before[stem].st_mtime_ns)


def test_write_model_replaces_a_file_with_different_bytes(tmp_path):
    path = tmp_path / "identity.onnx"
    path.write_bytes(b"not a model")
    assert models.write_model(path, models.identity()) is True
    assert path.read_bytes() == models.identity().SerializeToString()
    assert models.write_model(path, models.identity()) is False


def test_write_demo_models_refuses_a_directory_that_is_a_file(tmp_path):
    target = tmp_path / "taken"
    target.write_text("a file, not a directory")
    with pytest.raises(FileExistsError):
        models.write_demo_models(target)
