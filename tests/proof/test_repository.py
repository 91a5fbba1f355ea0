"""The bench repository: ge models as users render them, Python twins that differ only in execute."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from benchmarks.proof.repository import bench_specs, build_repository, models
from ge_plugin.engine import read_config_pbtxt
from ge_plugin.errors import BenchError
from ge_plugin.models import LLAMA_VOCAB
from ge_plugin.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]


def test_bench_llama_spec_is_the_served_llama(tmp_path):
    (bench,) = [s for s in bench_specs(tmp_path) if s.name == "ge_llama"]
    served = load_spec(ROOT / "specs" / "llama.yaml")
    # everything but the name and where the ONNX comes from
    same = attrs.evolve(bench, name=served.name, model=attrs.evolve(bench.model, source=served.model.source))
    assert attrs.evolve(same, path=None) == attrs.evolve(served, path=None)


def test_build_repository_writes_every_model_with_its_om(bench_repo):
    assert sorted(p.name for p in bench_repo.root.iterdir()) == sorted(m.name for m in models(16))
    assert (bench_repo.version_dir("ge_identity") / "identity.om").is_file()
    llama = (bench_repo.version_dir("ge_llama") / "llama.om").read_bytes()
    for name in ("replica_ge_llama", "replica_ge_llama_1x1", "replica_ge_llama_2x1", "replica_naive_llama"):
        assert (bench_repo.version_dir(name) / "llama.om").read_bytes() == llama
    for floor in ("py_logits", "replica_py_logits"):
        assert not (bench_repo.version_dir(floor) / "llama.om").exists()
    assert bench_repo.reports.is_dir() and not any(bench_repo.reports.iterdir())


def test_build_repository_drops_models_an_older_bench_left(tmp_path):
    stale = tmp_path / "work" / "repository" / "naive_llama"
    stale.mkdir(parents=True)
    (stale / "config.pbtxt").write_text('name: "naive_llama"\nbackend: "python"\n')
    repo = build_repository(tmp_path / "work")
    assert not stale.exists() and repo.config("replica_naive_llama").is_file()


def _parameter(config: dict[str, Any], name: str) -> str:
    return config["parameters"][name]["string_value"]


def _sim_section(config: dict[str, Any]) -> dict:
    return json.loads(_parameter(config, "acl_json"))["ge_plugin_sim"]


def test_host_models_are_timing_only_without_device_time(bench_repo):
    for name in ("ge_identity", "ge_llama"):
        assert _sim_section(read_config_pbtxt(bench_repo.config(name))) == {"timing_only": True}


def test_replica_models_take_the_seeds_direct_times_on_every_gear(bench_repo):
    for name in (
        "replica_ge_llama",
        "replica_ge_llama_1x1",
        "replica_ge_llama_2x1",
        "replica_naive_llama",
        "replica_py_logits",  # reads the same table to wait as long
    ):
        sim = _sim_section(read_config_pbtxt(bench_repo.config(name)))
        assert sim["timing_only"] is True
        latency = sim["execute_latency_ms"]
        assert len(latency) == 12  # 3 batch gears x 4 sequence gears
        assert (latency["1,16"], latency["4,64"], latency["8,128"]) == (78.0, 145.0, 220.0)


@pytest.mark.parametrize(
    ("name", "instances", "streams"),
    [("replica_ge_llama", 1, 2), ("replica_ge_llama_1x1", 1, 1), ("replica_ge_llama_2x1", 2, 1)],
)
def test_replica_layouts_differ_only_in_instances_and_streams(bench_repo, name, instances, streams):
    config = read_config_pbtxt(bench_repo.config(name))
    served = read_config_pbtxt(bench_repo.config("replica_ge_llama"))
    assert sum(group["count"] for group in config["instance_group"]) == instances
    assert _parameter(config, "streams_per_instance") == str(streams)
    for field in ("max_batch_size", "input", "output", "dynamic_batching"):
        assert config[field] == served[field], field


@pytest.mark.parametrize(
    ("twin", "source", "instances"),
    [
        ("py_identity", "ge_identity", None),
        # a second instance keeps the floor's c=1 points off Triton's 500 ms batcher poll (py_logits.py)
        ("py_logits", "ge_llama", 2),
        # two stubs, each with the device in turn: as many loads of the model as the served layout's lanes
        ("replica_py_logits", "replica_ge_llama_2x1", None),
        ("replica_naive_llama", "replica_ge_llama_2x1", None),
    ],
)
def test_python_twin_differs_from_its_ge_model_only_in_backend(bench_repo, twin, source, instances):
    python, ge = read_config_pbtxt(bench_repo.config(twin)), read_config_pbtxt(bench_repo.config(source))
    assert (python["backend"], ge["backend"]) == ("python", "ge")
    for field in ("max_batch_size", "input", "output", "dynamic_batching"):
        assert python[field] == ge[field], field
    expected = [{**group, "count": instances or group["count"]} for group in ge["instance_group"]]
    assert python["instance_group"] == expected
    model_py = (bench_repo.version_dir(twin) / "model.py").read_text()
    assert "class TritonPythonModel" in model_py


def test_naive_model_keeps_the_om_parameters_and_does_the_published_per_request_work(bench_repo):
    config = read_config_pbtxt(bench_repo.config("replica_naive_llama"))
    assert _parameter(config, "om_model_path") == "llama.om"
    assert "execute_latency_ms" in _parameter(config, "acl_json")  # the same simulated device
    model_py = (bench_repo.version_dir("replica_naive_llama") / "model.py").read_text()
    for call in (
        "acl.init(path)",
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
    assert repo.inputs["replica_naive_llama"] == repo.inputs["py_logits"] == repo.inputs["ge_llama"]
    identity = json.loads(repo.inputs["py_identity"].read_text())["data"][0]["INPUT0"]
    assert identity["shape"] == [16] and len(identity["content"]) == 16


def test_build_repository_refuses_a_length_the_llama_has_no_gear_for(tmp_path):
    with pytest.raises(BenchError, match=r"--seq 20 is not a sequence gear.*16, 32, 64, 128"):
        build_repository(tmp_path, seq=20)
