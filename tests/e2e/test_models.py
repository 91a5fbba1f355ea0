"""Several models in one server, and a client asking for only some of a model's outputs."""

from __future__ import annotations

import concurrent.futures

import numpy as np
import pytest

pytestmark = pytest.mark.e2e

PROTOCOLS = ("http", "grpc")
TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


def test_every_model_of_the_repository_is_ready_in_one_server(server, session_models):
    _, names = session_models
    client = server.client("http")
    try:
        index = {entry["name"]: entry.get("state") for entry in client.get_model_repository_index()}
        for name in names:
            assert client.is_model_ready(name), name
    finally:
        client.close()
    assert index == dict.fromkeys(names, "READY")
    assert len(server.stub_pids()) == len(names)  # one instance each (instances_per_device: 1)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_two_models_answer_interleaved_concurrent_requests(server, reference, protocol):
    rng = np.random.default_rng(20)
    jobs = []
    for i in range(12):
        tokens = rng.integers(0, 1000, (1, 3 + 2 * i), dtype=np.int64)
        if i % 2:
            jobs.append(("llama_e2e", "tiny_llama", {"input_ids": tokens}))
        else:
            jobs.append(
                ("bert_e2e", "tiny_bert", {"input_ids": tokens, "attention_mask": np.ones_like(tokens)})
            )

    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        answers = list(pool.map(lambda job: server.infer(protocol, job[0], job[2]), jobs))

    for (_, stem, inputs), answer in zip(jobs, answers):
        expected = reference(stem, **inputs)
        assert sorted(answer) == sorted(expected)
        for name, value in expected.items():
            np.testing.assert_allclose(answer[name], value, **TOLERANCE)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("wanted", [["aux"], ["score"], ["aux", "score"]], ids="+".join)
def test_requested_outputs_only_are_returned_and_copied_back(server, reference, protocol, wanted):
    """A one-row request runs alone on gear 1: score is 4 floats, aux 3; only the wanted ones leave the device."""
    rng = np.random.default_rng(21)
    inputs = {
        "features": rng.standard_normal((1, 8), dtype=np.float32),
        "context": rng.standard_normal((1, 2, 4), dtype=np.float32),
    }
    labels = {"model": "mlp_e2e"}
    before = server.baseline()

    served = server.infer(protocol, "mlp_e2e", inputs, outputs=wanted)

    assert sorted(served) == sorted(wanted)
    expected = reference("mlp", **inputs)
    for name in wanted:
        np.testing.assert_allclose(served[name], expected[name], **TOLERANCE)
    copied = sum({"score": 4 * 4, "aux": 3 * 4}[name] for name in wanted)
    server.assert_deltas(
        before, [("ge_executes_total", {**labels, "gear": "1"}, 1), ("ge_d2h_bytes_total", labels, copied)]
    )
