"""Every kind of invalid request gets HTTP 400 / gRPC INVALID_ARGUMENT naming the input, what was expected
and what came; its batch-mates still run and the server stays ready.

Triton itself refuses wrong input sets, data types, ranks, fixed dims and batch sizes before the backend
sees the request; the ``ge`` backend refuses a sequence longer than the largest dims gear, inside a batch
that Triton already formed.
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

pytestmark = pytest.mark.e2e

PROTOCOLS = ("http", "grpc")
INVALID = {"http": "400", "grpc": "StatusCode.INVALID_ARGUMENT"}
TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


def zeros(*shape: int, dtype=np.float32) -> np.ndarray:
    return np.zeros(shape, dtype=dtype)


def ids(rows: int, length: int, seed: int = 0) -> dict[str, np.ndarray]:
    tokens = np.random.default_rng(seed).integers(1, 1000, (rows, length), dtype=np.int64)
    return {"input_ids": tokens, "attention_mask": np.ones_like(tokens)}


@attrs.frozen
class BadRequest:
    kind: str
    model: str
    inputs: dict
    #: the input the message must name, then what the model expected and what came, as Triton or the
    #: backend words them
    names: str
    mentions: tuple[str, ...]

    def __str__(self) -> str:
        return self.kind


BAD_REQUESTS = [
    BadRequest(
        "missing-input",
        "bert_e2e",
        {"input_ids": ids(1, 5)["input_ids"]},
        "attention_mask",
        ("expected 2 inputs but got 1",),
    ),
    BadRequest(
        "extra-input",
        "identity_e2e",
        {"INPUT0": zeros(1, 16), "BOGUS": zeros(1, 16)},
        "BOGUS",
        ("expected 1 inputs but got 2",),
    ),
    BadRequest(
        "dtype",
        "identity_e2e",
        {"INPUT0": zeros(1, 16, dtype=np.int32)},
        "INPUT0",
        ("INT32", "expects 'FP32'"),
    ),
    BadRequest("rank", "identity_e2e", {"INPUT0": zeros(1, 16, 1)}, "INPUT0", ("[-1,16]", "[1,16,1]")),
    BadRequest(
        "fixed-dim-features-0",
        "mlp_e2e",
        {"features": zeros(1, 7), "context": zeros(1, 2, 4)},
        "features",
        ("[-1,8]", "[1,7]"),
    ),
    BadRequest(
        "fixed-dim-context-0",
        "mlp_e2e",
        {"features": zeros(1, 8), "context": zeros(1, 3, 4)},
        "context",
        ("[-1,2,4]", "[1,3,4]"),
    ),
    BadRequest(
        "fixed-dim-context-1",
        "mlp_e2e",
        {"features": zeros(1, 8), "context": zeros(1, 2, 5)},
        "context",
        ("[-1,2,4]", "[1,2,5]"),
    ),
    BadRequest(
        "longer-than-dims-gear",
        "llama_e2e",
        {"input_ids": np.ones((1, 65), dtype=np.int64)},
        "input_ids",
        ("65", "largest sequence gear 64"),
    ),
    BadRequest(
        "negative-token-id",
        "llama_e2e",
        {"input_ids": np.array([[-1, 5]], dtype=np.int64)},
        "input_ids",
        ("value -1 at [0, 0]", "outside the accepted range [0, 31999]"),
    ),
    BadRequest(
        "mask-of-another-length",
        "bert_e2e",
        {"input_ids": np.ones((1, 4), dtype=np.int64), "attention_mask": np.ones((1, 5), dtype=np.int64)},
        "attention_mask",
        ("shape [1, 5] differs from input 'input_ids'", "[1, 4]"),
    ),
    BadRequest(
        "longer-than-dims-gear-two-inputs",
        "bert_e2e",
        ids(2, 100),
        "input_ids",
        ("100", "largest sequence gear 64"),
    ),
]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("bad", BAD_REQUESTS, ids=str)
def test_bad_request_is_invalid_argument_naming_the_input(server, bad, protocol):
    with pytest.raises(InferenceServerException) as caught:
        server.infer(protocol, bad.model, bad.inputs)
    message = caught.value.message()
    assert caught.value.status() == INVALID[protocol], message
    assert f"'{bad.names}'" in message
    for text in bad.mentions:
        assert text in message
    assert server.is_ready()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_batch_larger_than_largest_gear_is_invalid_argument(server, protocol):
    # Triton 2.51 refuses it before the backend runs; its message names neither the input nor the batch that
    # came (docs/serving.md, errors), which is all a client learns.
    with pytest.raises(InferenceServerException) as caught:
        server.infer(protocol, "identity_e2e", {"INPUT0": zeros(9, 16)})
    message = caught.value.message()
    assert caught.value.status() == INVALID[protocol], message
    assert "batch-size must be <= 8" in message
    assert server.is_ready()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_sequence_too_long_fails_alone_inside_its_batch(server, reference, protocol):
    """Seven good one-row requests and one too long, sent together, run as one execute of the backend
    (bert_queue holds requests until eight rows are queued): only the long one fails."""
    labels = {"model": "bert_queue"}
    lengths = [5, 64, 12, 80, 33, 1, 20, 47]
    requests = [ids(1, n, seed=i) for i, n in enumerate(lengths)]
    before = server.baseline()

    answers = server.infer_many(protocol, "bert_queue", requests)

    for n, request, answer in zip(lengths, requests, answers):
        if n == 80:
            assert isinstance(answer, InferenceServerException)
            assert answer.status() == INVALID[protocol]
            assert (
                "input 'input_ids': dim 1 is 80, longer than the largest sequence gear 64" in answer.message()
            )
        else:
            assert not isinstance(answer, Exception), answer
            expected = reference("tiny_bert", **request)["last_hidden_state"]
            np.testing.assert_allclose(answer["last_hidden_state"], expected, **TOLERANCE)
    server.assert_deltas(
        before,
        [
            # all eight in one execute of the backend (Triton counts the refused one as a success: the
            # Python backend reports an error response as a completed request)
            ("nv_inference_exec_count", labels, 1),
            ("nv_inference_count", labels, 8),
            ("ge_request_errors_total", labels, 1),
            ("ge_rows_total", labels, 7),
            ("ge_executes_total", {**labels, "gear": "8x64"}, 1),
        ],
    )
    assert server.is_ready()


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    "bad",
    [
        {"input_ids": ids(1, 9)["input_ids"]},
        {"input_ids": ids(1, 9)["input_ids"].astype(np.int32), "attention_mask": ids(1, 9)["attention_mask"]},
        {"input_ids": ids(1, 9)["input_ids"][None], "attention_mask": ids(1, 9)["attention_mask"]},
    ],
    ids=["missing-input", "dtype", "rank"],
)
def test_request_triton_refuses_leaves_the_batch_it_was_sent_with(server, reference, protocol, bad):
    """Eight good requests sent with one Triton refuses: the eight still run together, correctly."""
    labels = {"model": "bert_queue"}
    good = [ids(1, 4 + 7 * i, seed=10 + i) for i in range(8)]
    before = server.baseline()

    answers = server.infer_many(protocol, "bert_queue", [*good[:4], bad, *good[4:]])

    refused = answers.pop(4)
    assert isinstance(refused, InferenceServerException)
    assert refused.status() == INVALID[protocol]
    for request, answer in zip(good, answers):
        assert not isinstance(answer, Exception), answer
        expected = reference("tiny_bert", **request)["last_hidden_state"]
        np.testing.assert_allclose(answer["last_hidden_state"], expected, **TOLERANCE)
    server.assert_deltas(
        before,
        [
            ("nv_inference_exec_count", labels, 1),
            ("nv_inference_request_success", labels, 8),
            ("ge_rows_total", labels, 8),
            ("ge_request_errors_total", labels, 0),
        ],
    )
    assert server.is_ready()
