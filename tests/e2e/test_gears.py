"""Batches are padded up to a batch gear and a sequence gear, and each request gets back only its own rows
and positions. The backend's padding metrics say which gear ran and how much was padding."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.e2e

PROTOCOLS = ("http", "grpc")
TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_batch_gear_pads_three_rows_to_four_and_trims(server, protocol):
    labels = {"model": "identity_e2e"}
    rows = np.arange(3 * 16, dtype=np.float32).reshape(3, 16) - 7.5
    before = server.baseline()

    served = server.infer(protocol, "identity_e2e", {"INPUT0": rows})

    assert served["OUTPUT0"].shape == (3, 16)
    assert np.array_equal(served["OUTPUT0"], rows)
    server.assert_deltas(
        before,
        [
            ("ge_executes_total", {**labels, "gear": "4"}, 1),
            ("ge_rows_total", labels, 3),
            ("ge_padded_rows_total", labels, 1),
            ("ge_padded_elements_total", labels, 16),
        ],
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_sequence_gear_pads_five_tokens_to_sixteen_and_trims(server, reference, protocol):
    labels = {"model": "llama_e2e"}
    ids = np.array([[5, 17, 31000, 2, 9]], dtype=np.int64)
    before = server.baseline()

    served = server.infer(protocol, "llama_e2e", {"input_ids": ids})

    assert served["logits"].shape == (1, 5, 32000)
    np.testing.assert_allclose(
        served["logits"], reference("tiny_llama", input_ids=ids)["logits"], **TOLERANCE
    )
    server.assert_deltas(
        before,
        [
            ("ge_executes_total", {**labels, "gear": "1x16"}, 1),
            ("ge_rows_total", labels, 1),
            ("ge_padded_rows_total", labels, 0),
            ("ge_padded_elements_total", labels, 16 - 5),
        ],
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_two_input_sequence_gear_pads_rows_and_positions_and_trims(server, reference, protocol):
    """3 rows of 20 tokens run on gear 4x32: one padded row and 12 padded positions, on both inputs."""
    labels = {"model": "bert_e2e"}
    rng = np.random.default_rng(6)
    ids = rng.integers(0, 1000, (3, 20), dtype=np.int64)
    mask = np.ones_like(ids)
    mask[0, 13:] = 0
    before = server.baseline()

    served = server.infer(protocol, "bert_e2e", {"input_ids": ids, "attention_mask": mask})

    assert served["last_hidden_state"].shape == (3, 20, 64)
    expected = reference("tiny_bert", input_ids=ids, attention_mask=mask)["last_hidden_state"]
    np.testing.assert_allclose(served["last_hidden_state"], expected, **TOLERANCE)
    server.assert_deltas(
        before,
        [
            ("ge_executes_total", {**labels, "gear": "4x32"}, 1),
            ("ge_rows_total", labels, 3),
            ("ge_padded_rows_total", labels, 1),
            ("ge_padded_elements_total", labels, 2 * (4 * 32 - 3 * 20)),
        ],
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_ragged_batch_of_different_lengths_trims_each_request_to_its_own(server, reference, protocol):
    """Eight one-row requests of different lengths sent together to bert_queue (which holds requests until
    eight rows are queued) run as one execute on gear 8x64; each answer has its own length."""
    labels = {"model": "bert_queue"}
    lengths = [3, 64, 17, 1, 40, 16, 33, 9]
    rng = np.random.default_rng(7)
    requests = []
    for n in lengths:
        ids = rng.integers(0, 1000, (1, n), dtype=np.int64)
        requests.append({"input_ids": ids, "attention_mask": np.ones_like(ids)})
    before = server.baseline()

    answers = server.infer_many(protocol, "bert_queue", requests)

    for request, answer in zip(requests, answers):
        assert not isinstance(answer, Exception), answer
        n = request["input_ids"].shape[1]
        assert answer["last_hidden_state"].shape == (1, n, 64)
        expected = reference("tiny_bert", **request)["last_hidden_state"]
        np.testing.assert_allclose(answer["last_hidden_state"], expected, **TOLERANCE)
    server.assert_deltas(
        before,
        [
            ("nv_inference_exec_count", labels, 1),
            ("ge_executes_total", {**labels, "gear": "8x64"}, 1),
            ("ge_rows_total", labels, 8),
            ("ge_padded_elements_total", labels, 2 * (8 * 64 - sum(lengths))),
        ],
    )
