"""Served answers equal onnxruntime run directly on the same ONNX, alone and under 32 concurrent requests."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.e2e

PROTOCOLS = ("http", "grpc")
LLAMA = "llama_e2e"
BERT = "bert_e2e"
#: the sim runs the same ONNX through onnxruntime, but on a padded gear shape, so kernels may sum in
#: another order; anything beyond float rounding is a bug
TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


def llama_ids(rng: np.random.Generator, length: int) -> np.ndarray:
    return rng.integers(0, 32000, (1, length), dtype=np.int64)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_llama_single_request_equals_onnxruntime(server, reference, protocol):
    ids = llama_ids(np.random.default_rng(1), 11)
    served = server.infer(protocol, LLAMA, {"input_ids": ids})
    expected = reference("tiny_llama", input_ids=ids)["logits"]
    assert served["logits"].shape == (1, 11, 32000)
    np.testing.assert_allclose(served["logits"], expected, **TOLERANCE)
    # the counting model: the next token after n is n + 1
    assert np.array_equal(served["logits"].argmax(-1), (ids + 1) % 32000)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bert_single_request_with_mask_equals_onnxruntime(server, reference, protocol):
    rng = np.random.default_rng(2)
    ids = rng.integers(0, 1000, (3, 21), dtype=np.int64)
    mask = np.ones_like(ids)
    mask[1, 15:] = 0
    mask[2, 4:] = 0
    served = server.infer(protocol, BERT, {"input_ids": ids, "attention_mask": mask})
    expected = reference("tiny_bert", input_ids=ids, attention_mask=mask)["last_hidden_state"]
    assert served["last_hidden_state"].shape == (3, 21, 64)
    np.testing.assert_allclose(served["last_hidden_state"], expected, **TOLERANCE)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_mlp_two_inputs_two_outputs_equal_onnxruntime(server, reference, protocol):
    rng = np.random.default_rng(3)
    features = rng.standard_normal((4, 8), dtype=np.float32)
    context = rng.standard_normal((4, 2, 4), dtype=np.float32)
    served = server.infer(protocol, "mlp_e2e", {"features": features, "context": context})
    expected = reference("mlp", features=features, context=context)
    assert sorted(served) == ["aux", "score"]
    for name in ("score", "aux"):
        np.testing.assert_allclose(served[name], expected[name], **TOLERANCE)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_llama_32_concurrent_requests_are_batched_and_equal_onnxruntime(server, reference, protocol):
    rng = np.random.default_rng(4 if protocol == "http" else 5)
    lengths = [int(n) for n in rng.integers(1, 41, 32)]
    requests = [{"input_ids": llama_ids(rng, n)} for n in lengths]
    labels = {"model": LLAMA}
    before = server.baseline()

    answers = server.infer_many(protocol, LLAMA, requests)

    for request, answer in zip(requests, answers):
        assert not isinstance(answer, Exception), answer
        ids = request["input_ids"]
        assert answer["logits"].shape == (1, ids.shape[1], 32000)
        np.testing.assert_allclose(
            answer["logits"], reference("tiny_llama", input_ids=ids)["logits"], **TOLERANCE
        )
    after = server.wait_totals(
        [
            (
                "nv_inference_request_success",
                labels,
                before.total("nv_inference_request_success", **labels) + 32,
            ),
            ("ge_rows_total", labels, before.total("ge_rows_total", **labels) + 32),
        ]
    )
    executes = after.total("nv_inference_exec_count", **labels) - before.total(
        "nv_inference_exec_count", **labels
    )
    ge_executes = after.total("ge_executes_total", **labels) - before.total("ge_executes_total", **labels)
    # fewer executes than requests: Triton's dynamic batcher handed the backend batches of more than one
    assert 1 <= executes < 32, f"32 requests ran in {executes} executes"
    assert ge_executes == executes
    batched_gears = {
        lab["gear"]
        for lab, value in after.select("ge_executes_total", **labels)
        if value > before.total("ge_executes_total", gear=lab["gear"], **labels)
        and not lab["gear"].startswith("1x")
    }
    assert batched_gears, "no execute ran on a gear of more than one row"
