"""tritonserver's gRPC buffer pool sized from a budget and the largest exchange the served models allow, and
the folders ``ge-plugin serve`` prepares its backends and tritonserver's gRPC socket in (no server started)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from ge_plugin.serve.memory import grpc_pool_size, largest_exchange, repository_configs
from ge_plugin.serve.triton import Distribution, ServerOptions, default_work_dir

MIB = 1 << 20
#: as ``ge-plugin render`` writes the tiny LLaMA of specs/llama.yaml: sequence gears up to 128, batch 8
LLAMA = """
name: "llama_model" backend: "ge" max_batch_size: 8
input { name: "input_ids" data_type: TYPE_INT64 dims: [-1] }
output { name: "logits" data_type: TYPE_FP32 dims: [-1, 32000] }
parameters { key: "om_model_path" value { string_value: "llama.om" } }
parameters { key: "dims_gears" value { string_value: "16;32;64;128" } }
parameters { key: "gears" value { string_value: "1,4,8" } }
parameters { key: "output_dim_ties" value { string_value: "logits:0=input_ids:0" } }
"""
IMAGES = """
name: "cnn" backend: "ge" max_batch_size: 4
input { name: "images" data_type: TYPE_UINT8 dims: [3, -1, -1] }
output { name: "scores" data_type: TYPE_FP32 dims: [1000] }
parameters { key: "om_model_path" value { string_value: "cnn.om" } }
parameters { key: "image_sizes" value { string_value: "224,224;448,320" } }
"""
PYTHON = """
name: "py" backend: "python" max_batch_size: 0
input { name: "INPUT0" data_type: TYPE_FP32 dims: [-1, -1] }
output { name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] }
"""


def config(text: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def test_a_ge_models_gears_bound_its_exchange():
    # input_ids: 8 x 128 int64; logits: 8 x 128 x 32000 fp32, its -1 tied to input_ids' sequence
    assert largest_exchange([config(LLAMA)], unknown=256 * MIB) == 8 * 128 * 8 + 8 * 128 * 32000 * 4
    assert largest_exchange([config(IMAGES)], unknown=256 * MIB) == 4 * 3 * 448 * 320 + 4 * 1000 * 4


def test_what_no_config_bounds_counts_as_the_largest_message_each_way():
    assert largest_exchange([config(PYTHON)], unknown=256 * MIB) == 256 * MIB + 16
    assert largest_exchange([config(PYTHON), config(LLAMA)], unknown=256 * MIB) == 256 * MIB + 16


def test_the_pool_keeps_two_exchanges_per_slot_within_the_budget_and_at_most_tritonservers_8():
    assert grpc_pool_size(1 << 30, 131 * MIB) == 3
    assert grpc_pool_size(1 << 30, 64 * MIB + 64 * MIB) == 4
    assert grpc_pool_size(1 << 30, 4096) == 8
    assert grpc_pool_size(0, 4096) == 0
    assert grpc_pool_size(1 << 30, 2 << 30) == 0


def pool_flag(options: ServerOptions) -> list[str]:
    cmd = options.command(Distribution(root=Path("/t"), libs=Path("/l")), Path("/b"))
    return [a for a in cmd if a.startswith("--grpc-infer-allocation-pool-size")]


def test_serve_passes_the_pool_it_chose_unless_the_operator_passed_one(tmp_path):
    (tmp_path / "llama_model").mkdir()
    (tmp_path / "llama_model" / "config.pbtxt").write_text(LLAMA)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.pbtxt").write_text("not a config {")
    assert repository_configs(tmp_path)[0].name == "llama_model"
    assert pool_flag(ServerOptions(repository=tmp_path)) == ["--grpc-infer-allocation-pool-size=4"]
    assert pool_flag(ServerOptions(repository=tmp_path, grpc_buffer_budget=None)) == []
    given = ["--grpc-infer-allocation-pool-size", "2"]
    assert pool_flag(ServerOptions(repository=tmp_path, extra_args=given)) == given[:1]  # as passed
    remote = ServerOptions(repository="s3://bucket/models")
    assert pool_flag(remote) == ["--grpc-infer-allocation-pool-size=1"]  # 256 MiB each way, twice a slot


def test_the_work_dir_is_the_users_cache_never_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cache = default_work_dir({"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert cache.parent == tmp_path / "cache" / "ge-plugin"
    assert cache.name.startswith(f"triton-py{sys.version_info.major}.{sys.version_info.minor}-")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_work_dir({}).parent == tmp_path / "home" / ".cache" / "ge-plugin"
    assert (
        default_work_dir({"XDG_CACHE_HOME": "relative"}).parent == tmp_path / "home" / ".cache" / "ge-plugin"
    )
    assert not (tmp_path / "build").exists()


@pytest.mark.parametrize("args", [[], ["--work-dir", "w"]])
def test_serves_work_dir_flag_defaults_to_none_so_the_cache_is_used(args):
    from ge_plugin.cli import build_parser

    parsed = build_parser().parse_args(["serve", "repo", *args])
    assert parsed.work_dir == (Path("w") if args else None)


def test_socket_folders_of_gone_processes_are_removed_at_the_next_start(tmp_path, monkeypatch):
    """``kill -9`` of ge-plugin serve leaves the folder of tritonserver's gRPC socket; the next start removes
    it, and never a live process's folder nor another name."""
    import os
    import subprocess
    import tempfile

    from ge_plugin.serve.triton import SOCKET_DIR_PREFIX, _remove_stale_socket_dirs

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead_pid = subprocess.Popen(["true"])  # a pid that has exited
    dead_pid.wait()
    stale = tmp_path / f"{SOCKET_DIR_PREFIX}{dead_pid.pid}-abc"
    live = tmp_path / f"{SOCKET_DIR_PREFIX}{os.getpid()}-def"
    other = tmp_path / f"{SOCKET_DIR_PREFIX}notapid"
    for folder in (stale, live, other):
        folder.mkdir()
        (folder / "tritonserver:0").touch()
    _remove_stale_socket_dirs()
    assert not stale.exists() and live.exists() and other.exists()
