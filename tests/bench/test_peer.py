"""``--peer pytriton``: PyTriton serves the same ONNX with the ge LLaMA's batching, and answers correctly."""

from __future__ import annotations

import numpy as np
import pytest

from ge_plugin.bench import peer
from ge_plugin.serve import free_port

pytestmark = pytest.mark.e2e


def test_peer_serves_the_tiny_llama_like_ge_llama(bench_repo):
    import tritonclient.grpc as grpcclient

    (llama,) = [spec for spec in bench_repo.specs if spec.name == "ge_llama"]
    ports = (free_port(), free_port(), free_port())
    server = peer.Peer.start(
        bench_repo.work / "models" / "tiny_llama.onnx", work=bench_repo.work, ports=ports, like=llama
    )
    try:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        config = client.get_model_config(peer.MODEL, as_json=True)["config"]
        assert config["max_batch_size"] == llama.max_batch_size
        batching = config["dynamic_batching"]
        assert [int(b) for b in batching["preferred_batch_size"]] == list(llama.batching.preferred)
        # proto3 JSON leaves out a zero delay
        assert int(batching.get("max_queue_delay_microseconds", 0)) == llama.batching.max_queue_delay_us
        assert sum(int(g["count"]) for g in config["instance_group"]) == llama.placement.instances_per_device
        ids = np.arange(500, 516, dtype=np.int64)[None]
        tensor = grpcclient.InferInput("input_ids", list(ids.shape), "INT64")
        tensor.set_data_from_numpy(ids)
        logits = client.infer(peer.MODEL, [tensor]).as_numpy("logits")
        assert logits.shape == (1, 16, 32000)
        assert np.array_equal(logits.argmax(-1)[0], ids[0] + 1)  # the tiny LLaMA counts
        client.close()
    finally:
        server.stop()
    assert server.process.returncode is not None
