"""The bench repository: ge models as users render them, Python twins that differ only in execute."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from ge_plugin.bench.repository import bench_specs, build_repository
from ge_plugin.errors import BenchError
from ge_plugin.models import LLAMA_VOCAB
from ge_plugin.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]


def _config(path: Path) -> mc.ModelConfig:
    text = "\n".join(line for line in path.read_text().splitlines() if not line.startswith("#"))
    return text_format.Parse(text, mc.ModelConfig())


def test_bench_llama_spec_is_the_served_llama(tmp_path):
    (bench,) = [s for s in bench_specs(tmp_path) if s.name == "ge_llama"]
    served = load_spec(ROOT / "specs" / "llama.yaml")
    # everything but the name and where the ONNX comes from
    same = attrs.evolve(bench, name=served.name, model=attrs.evolve(bench.model, source=served.model.source))
    assert attrs.evolve(same, path=None) == attrs.evolve(served, path=None)


def test_build_repository_writes_four_models_with_oms(bench_repo):
    assert sorted(p.name for p in bench_repo.root.iterdir()) == [
        "ge_identity",
        "ge_llama",
        "naive_llama",
        "py_identity",
    ]
    assert (bench_repo.version_dir("ge_identity") / "identity.om").is_file()
    assert (bench_repo.version_dir("ge_llama") / "llama.om").is_file()
    assert (bench_repo.version_dir("naive_llama") / "llama.om").read_bytes() == (
        bench_repo.version_dir("ge_llama") / "llama.om"
    ).read_bytes()
    assert bench_repo.reports.is_dir() and not any(bench_repo.reports.iterdir())


@pytest.mark.parametrize(("twin", "source"), [("py_identity", "ge_identity"), ("naive_llama", "ge_llama")])
def test_python_twin_differs_from_its_ge_model_only_in_backend(bench_repo, twin, source):
    python, ge = _config(bench_repo.config(twin)), _config(bench_repo.config(source))
    assert (python.backend, ge.backend) == ("python", "ge")
    for field in ("max_batch_size", "input", "output", "instance_group", "dynamic_batching"):
        assert getattr(python, field) == getattr(ge, field), field
    model_py = (bench_repo.version_dir(twin) / "model.py").read_text()
    assert "class TritonPythonModel" in model_py


def test_naive_model_keeps_the_om_parameters_and_does_the_published_per_request_work(bench_repo):
    config = _config(bench_repo.config("naive_llama"))
    assert config.parameters["om_model_path"].string_value == "llama.om"
    model_py = (bench_repo.version_dir("naive_llama") / "model.py").read_text()
    for call in (
        "acl.rt.malloc(",
        "acl.rt.malloc_host(",
        "acl.mdl.create_dataset()",
        "acl.mdl.set_input_dynamic_dims(",
        "acl.mdl.execute(",
        "acl.rt.free(",
        "acl.rt.free_host(",
        "acl.mdl.destroy_dataset(",
    ):
        assert call in model_py
    assert "execute_async" not in model_py


def test_input_data_holds_valid_token_ids_of_the_requested_length(tmp_path):
    repo = build_repository(tmp_path / "work", seq=32)
    data = json.loads(repo.inputs["ge_llama"].read_text())
    (entry,) = data["data"]
    ids = entry["input_ids"]["content"]
    assert entry["input_ids"]["shape"] == [32] and len(ids) == 32
    assert all(0 <= i < LLAMA_VOCAB for i in ids)
    assert repo.inputs["naive_llama"] == repo.inputs["ge_llama"]
    identity = json.loads(repo.inputs["py_identity"].read_text())["data"][0]["INPUT0"]
    assert identity["shape"] == [16] and len(identity["content"]) == 16


def test_build_repository_refuses_a_length_the_llama_has_no_gear_for(tmp_path):
    with pytest.raises(BenchError, match=r"--seq 20 is not a sequence gear.*16, 32, 64, 128"):
        build_repository(tmp_path, seq=20)
