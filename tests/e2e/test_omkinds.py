"""Rows of the OM table on the real tritonserver: an OM built with --dynamic_image_size (two sizes in one
batch window, each on its own gear, equal to onnxruntime; another size refused with 400 naming the sizes),
a CNN whose H and W are dims gears (no longer answered after zero padding), and TYPE_BF16 in and out over
HTTP (binary) and gRPC with tritonclient's own BF16 support, bit for bit."""

from __future__ import annotations

import concurrent.futures

import ml_dtypes
import numpy as np
import pytest

from ge_plugin.models.bf16 import SCALE, SHIFT

pytestmark = pytest.mark.e2e

PROTOCOLS = ("http", "grpc")
TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


def images(seed: int, size: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 3, size, size)).astype(np.float32)


def together(server, protocol: str, model: str, requests: list[dict]) -> list:
    """The requests sent at once (a thread each), so that they meet in one batch window."""
    return server.infer_many(protocol, model, requests)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_224_and_448_images_in_one_batch_window_each_run_on_their_gear(server, reference, protocol):
    labels = {"model": "cnn_images"}
    small, large = images(1, 224), images(2, 448)
    before = server.baseline()

    answers = together(server, protocol, "cnn_images", [{"images": small}, {"images": large}])

    for request, answer in zip((small, large), answers):
        assert not isinstance(answer, Exception), answer
        expected = reference("tiny_cnn", images=request)
        assert answer["logits"].shape == (1, 10)
        assert answer["features"].shape == (1, 4, *request.shape[2:])
        np.testing.assert_allclose(answer["logits"], expected["logits"], **TOLERANCE)
        np.testing.assert_allclose(answer["features"], expected["features"], **TOLERANCE)
    server.assert_deltas(
        before,
        [
            ("nv_inference_exec_count", labels, 1),  # one batch window: Triton called execute once
            ("ge_executes_total", {**labels, "gear": "224x224"}, 1),
            ("ge_executes_total", {**labels, "gear": "448x448"}, 1),
            ("ge_padded_rows_total", labels, 2),  # each one row on the OM's fixed batch of 2
        ],
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_300x300_image_is_refused_naming_the_sizes_and_its_batch_mate_is_answered(
    server, reference, protocol
):
    from tritonclient.utils import InferenceServerException

    labels = {"model": "cnn_images"}
    good, odd = images(3, 224), images(4, 300)
    before = server.baseline()

    served, refused = together(server, protocol, "cnn_images", [{"images": good}, {"images": odd}])

    assert not isinstance(served, Exception), served
    np.testing.assert_allclose(served["logits"], reference("tiny_cnn", images=good)["logits"], **TOLERANCE)
    assert isinstance(refused, InferenceServerException)
    assert refused.status() in ("400", "StatusCode.INVALID_ARGUMENT")
    assert (
        "input 'images' [1, 3, 300, 300]: its height x width 300x300 is not one of the model's image sizes "
        "(224x224, 448x448); resize the image to one of them"
    ) in refused.message()
    server.assert_deltas(
        before,
        [
            ("nv_inference_exec_count", labels, 1),
            ("ge_executes_total", {**labels, "gear": "224x224"}, 1),
            ("ge_request_errors_total", labels, 1),
        ],
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_cnn_with_dims_gears_refuses_an_image_it_would_have_to_pad(server, reference, protocol):
    """ge-plugin used to zero-pad a 300x300 image to the 448x448 gear and answer 200 with a [1, 4, 448, 448]
    feature map and the padded image's logits."""
    from tritonclient.utils import InferenceServerException

    with pytest.raises(InferenceServerException) as refused:
        server.infer(protocol, "cnn_dims", {"images": images(5, 300)})
    assert refused.value.status() in ("400", "StatusCode.INVALID_ARGUMENT")
    assert (
        "input 'images' [1, 3, 300, 300]: dims 2, 3 are 300x300, which no gear of the model takes exactly "
        "(its gears take 224x224, 448x448)"
    ) in refused.value.message()
    exact = images(6, 448)
    answer = server.infer(protocol, "cnn_dims", {"images": exact})
    np.testing.assert_allclose(answer["logits"], reference("tiny_cnn", images=exact)["logits"], **TOLERANCE)


def bf16_words(seed: int, rows: int) -> np.ndarray:
    """Finite bf16 words of moderate size, and values whose results land between two bf16 values."""
    words = np.random.default_rng(seed).integers(0x3000, 0x4800, (rows, 8), dtype=np.uint16)
    words[0, :2] = (0x3F80, 0xBF80)  # 1.0 and -1.0
    return words


def as_float32(words: np.ndarray) -> np.ndarray:
    """The float32 tritonclient takes for BF16: the words, widened exactly (tritonclient keeps the top 16 bits)."""
    return (words.astype(np.uint32) << 16).view(np.float32)


def bf16_reference(words: np.ndarray) -> np.ndarray:
    """y = bf16(float32(x) * scale + shift), with ml_dtypes' round to nearest even: the expected words."""
    wide = as_float32(words)
    return (wide * SCALE + SHIFT).astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)


def infer_bf16(server, protocol: str, model: str, x: np.ndarray, datatype: str) -> np.ndarray:
    """One request with tritonclient's own BF16 support (HTTP: binary data, the only form it has for BF16)."""
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    module = httpclient if protocol == "http" else grpcclient
    tensor = module.InferInput("x", list(x.shape), datatype)
    if protocol == "http":
        tensor.set_data_from_numpy(x, binary_data=True)
    else:
        tensor.set_data_from_numpy(x)
    wanted = [module.InferRequestedOutput("y", binary_data=True)] if protocol == "http" else None
    client = server.client(protocol)
    try:
        result = client.infer(model, [tensor], outputs=wanted)
    finally:
        client.close()
    return result.as_numpy("y")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bf16_in_and_out_is_bit_exact_over_tritonclients_bf16(server, protocol):
    words = bf16_words(7, 3)
    expected = bf16_reference(words)
    assert not np.array_equal(
        expected, (as_float32(words) * SCALE + SHIFT).view(np.uint32) >> 16
    )  # ties matter

    answer = infer_bf16(server, protocol, "bf16", as_float32(words), "BF16")

    assert answer.dtype == np.float32 and answer.reshape(3, 8).shape == (3, 8)
    assert np.array_equal((answer.reshape(3, 8).view(np.uint32) >> 16).astype(np.uint16), expected)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bf16_requests_batched_together_are_each_answered_bit_exact(server, protocol):
    requests = [bf16_words(10 + n, 1 + n % 2) for n in range(6)]
    with concurrent.futures.ThreadPoolExecutor(len(requests)) as pool:
        answers = list(
            pool.map(lambda w: infer_bf16(server, protocol, "bf16", as_float32(w), "BF16"), requests)
        )
    for words, answer in zip(requests, answers):
        bits = (answer.reshape(words.shape).view(np.uint32) >> 16).astype(np.uint16)
        assert np.array_equal(bits, bf16_reference(words))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_metadata_says_bf16(server, protocol):
    client = server.client(protocol)
    try:
        metadata = client.get_model_metadata("bf16")
    finally:
        client.close()
    if protocol == "http":
        inputs, outputs = metadata["inputs"], metadata["outputs"]
        assert (inputs[0]["datatype"], outputs[0]["datatype"]) == ("BF16", "BF16")
    else:
        assert (metadata.inputs[0].datatype, metadata.outputs[0].datatype) == ("BF16", "BF16")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_fp32_behind_the_bf16_om_rounds_requests_to_nearest_even(server, protocol):
    """For clients without bf16: FP32 in, rounded to bf16 (nearest even) by ge-plugin, answers widened."""
    x = np.random.default_rng(20).standard_normal((2, 8)).astype(np.float32) * 50
    answer = infer_bf16(server, protocol, "bf16_as_fp32", x, "FP32")
    rounded = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    expected = bf16_reference(rounded).astype(np.uint32) << 16
    assert np.array_equal(answer.view(np.uint32), expected)
