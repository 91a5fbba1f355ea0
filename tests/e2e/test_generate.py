"""Contract B on a real tritonserver 2.51 (the session server, through ge-plugin's HTTP front): generate and
generate_stream over HTTP, ModelStreamInfer over gRPC, both OM forms, the finish reasons, a prompt longer than
the context, cancellation freeing the slot, and the generation metrics."""

from __future__ import annotations

import json
import queue
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from ge_plugin.models import llama_kv

pytestmark = pytest.mark.e2e

MODELS = ["gen_stacked", "gen_layers"]
CONTEXT = 64


def _prompt(n: int, seed: int = 0) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(3, llama_kv.VOCAB, n)]


def _expected(prompt: list[int], count: int) -> list[int]:
    """What the copying LLaMA generates greedily: the tokens COPY_DISTANCE back, again and again."""
    ids = list(prompt)
    for _ in range(count):
        ids.append(ids[-1 - llama_kv.COPY_DISTANCE])
    return ids[len(prompt) :]


def _list(value) -> list:
    """Triton's generate endpoints write a one-element output as a scalar."""
    return value if isinstance(value, list) else [value]


def _post(server, path: str, body: dict, timeout: float = 60.0) -> tuple[int, bytes]:
    request = urllib.request.Request(
        f"http://{server.http_url}{path}", data=json.dumps(body).encode(), method="POST"
    )
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.parametrize("model", MODELS)
def test_generate_answers_every_token_in_one_response(server, model):
    prompt = _prompt(20, 1)
    status, body = _post(server, f"/v2/models/{model}/generate", {"input_ids": prompt, "max_tokens": 10})
    assert status == 200, body
    answer = json.loads(body)
    assert _list(answer["output_ids"]) == _expected(prompt, 10)
    assert answer["finish_reason"] in (["length"], "length")
    assert answer["prompt_tokens"] in ([20], 20) and answer["completion_tokens"] in ([10], 10)


@pytest.mark.parametrize("model", MODELS)
def test_generate_stream_sends_tokens_per_response_then_the_finish(server, model):
    prompt = _prompt(30, 2)
    body = {"input_ids": prompt, "max_tokens": 5, "stream": True}
    status, raw = _post(server, f"/v2/models/{model}/generate_stream", body)
    assert status == 200, raw
    events = [json.loads(line[len(b"data: ") :]) for line in raw.splitlines() if line.startswith(b"data: ")]
    ids = [t for event in events for t in _list(event["output_ids"])]
    assert ids == _expected(prompt, 5)
    sizes = [len(_list(event["output_ids"])) for event in events]
    assert sizes == [2, 2, 1]  # tokens_per_response 2: the last response carries what is left and the finish
    assert [str(e["finish_reason"]).strip("[]'\"") for e in events] == ["", "", "length"]


def test_the_specs_acl_json_reaches_the_generating_model(server):
    """gen_stacked's acl_json makes each execute hold the simulated device 30 ms: 4 tokens from a prompt of
    8 are 4 executes (a prefill, 3 decode steps), so never under 120 ms; without the acl.json they take a
    few ms."""
    t0 = time.perf_counter()
    status, _ = _post(server, "/v2/models/gen_stacked/generate", {"input_ids": _prompt(8), "max_tokens": 4})
    assert status == 200 and time.perf_counter() - t0 >= 0.12


def test_a_prompt_longer_than_the_context_is_400_naming_the_limit(server):
    status, body = _post(server, "/v2/models/gen_layers/generate", {"input_ids": _prompt(CONTEXT + 1)})
    assert status == 400
    assert "longer than the model's context of 64 tokens" in body.decode()
    status, body = _post(server, "/v2/models/gen_stacked/generate", {"input_ids": _prompt(4), "top_p": 2.0})
    assert status == 400 and "top_p must be in (0, 1]" in body.decode()
    # the model still serves
    status, body = _post(
        server, "/v2/models/gen_stacked/generate", {"input_ids": _prompt(4), "max_tokens": 1}
    )
    assert status == 200


def test_model_stream_infer_over_grpc_streams_8_concurrent_sequences(server):
    import tritonclient.grpc as grpcclient

    results: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    prompts = {f"r{n}": _prompt(13 + 5 * n, 10 + n) for n in range(8)}
    try:
        for request_id, prompt in prompts.items():
            ids = grpcclient.InferInput("input_ids", [len(prompt)], "INT64")
            ids.set_data_from_numpy(np.array(prompt, np.int64))
            stream = grpcclient.InferInput("stream", [1], "BOOL")
            stream.set_data_from_numpy(np.array([True]))
            count = grpcclient.InferInput("max_tokens", [1], "INT32")
            count.set_data_from_numpy(np.array([6], np.int32))
            client.async_stream_infer("gen_layers", [ids, stream, count], request_id=request_id)
        got: dict[str, list[int]] = {r: [] for r in prompts}
        finished: dict[str, str] = {}
        deadline = time.monotonic() + 60
        while len(finished) < len(prompts) and time.monotonic() < deadline:
            result, error = results.get(timeout=60)
            assert error is None, error
            request_id = result.get_response().id
            got[request_id].extend(result.as_numpy("output_ids").tolist())
            reason = result.as_numpy("finish_reason")[0].decode()
            if reason:
                finished[request_id] = reason
    finally:
        client.stop_stream()
        client.close()
    assert finished == dict.fromkeys(prompts, "length")
    assert got == {r: _expected(p, 6) for r, p in prompts.items()}


def test_a_cancelled_stream_frees_its_slot(server):
    import tritonclient.grpc as grpcclient

    def value(name: str) -> float:
        samples = server.metrics().samples
        return sum(v for n, labels, v in samples if n == name and labels.get("model") == "gen_stacked")

    server.wait_until(
        "earlier gen_stacked requests to settle", lambda: value("ge_generate_active_slots") == 0
    )
    time.sleep(0.3)  # two metric flushes: the earlier tests' tokens are counted
    before = value("ge_generate_tokens_total")
    results: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    ids = grpcclient.InferInput("input_ids", [8], "INT64")
    ids.set_data_from_numpy(np.array(_prompt(8, 5), np.int64))
    stream = grpcclient.InferInput("stream", [1], "BOOL")
    stream.set_data_from_numpy(np.array([True]))
    count = grpcclient.InferInput("max_tokens", [1], "INT32")
    count.set_data_from_numpy(np.array([240], np.int32))  # 240 steps if nobody stops it (context 256)
    client.async_stream_infer("gen_stacked", [ids, stream, count], request_id="long")
    results.get(timeout=60)  # it is generating
    client.stop_stream(cancel_requests=True)
    client.close()
    server.wait_until(
        "the cancelled sequence to leave its slot", lambda: value("ge_generate_active_slots") == 0
    )
    time.sleep(0.3)  # two metric flushes: the token count is final
    generated = value("ge_generate_tokens_total") - before
    assert 1 <= generated < 200  # it stopped well before its 240 tokens


def test_generation_metrics_are_published(server):
    _post(server, "/v2/models/gen_layers/generate", {"input_ids": _prompt(6, 9), "max_tokens": 3})

    def value(name: str) -> float:
        return sum(
            v
            for n, labels, v in server.metrics().samples
            if n == name and labels.get("model") == "gen_layers"
        )

    server.wait_until("generation metrics", lambda: value("ge_generate_tokens_total") >= 3, timeout=15)
    assert value("ge_generate_prefill_executes_total") >= 1
    assert value("ge_generate_decode_executes_total") >= 2
    assert value("ge_generate_time_to_first_token_seconds_count") >= 1
    assert value("ge_generate_inter_token_latency_seconds_count") >= 2
    names = {n for n, labels, _ in server.metrics().samples if labels.get("model") == "gen_layers"}
    assert {"ge_generate_kv_cache_occupancy", "ge_generate_active_slots"} <= names


def test_bad_requests_among_good_ones_fail_alone_naming_the_input(server):
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    def tensor(name, value, dtype):
        item = grpcclient.InferInput(name, list(value.shape), dtype)
        item.set_data_from_numpy(value)
        return item

    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        bad = [
            (
                [
                    tensor("input_ids", np.array(_prompt(13), np.int64), "INT64"),
                    tensor("max_tokens", np.array([2, 3], np.int32), "INT32"),
                ],
                "unexpected shape for input 'max_tokens'",
            ),
            (
                [
                    tensor("input_ids", np.array(_prompt(13), np.int64), "INT64"),
                    tensor("stop_ids", np.arange(2000, dtype=np.int64), "INT64"),
                ],
                "at most 1024",
            ),
            ([tensor("input_ids", np.array([5, 600], np.int64), "INT64")], "token ids in [0, 511]"),
            (
                [
                    tensor("input_ids", np.array(_prompt(13), np.int64), "INT64"),
                    tensor("max_tokens", np.array([0], np.int32), "INT32"),
                ],
                "max_tokens must be at least 1",
            ),
        ]
        for inputs, message in bad:
            results: queue.Queue = queue.Queue()
            client.start_stream(callback=lambda result, error, box=results: box.put((result, error)))
            client.async_stream_infer("gen_layers", inputs)
            _, error = results.get(timeout=30)
            client.stop_stream()
            assert isinstance(error, InferenceServerException) and message in str(error), error
    finally:
        client.close()
    prompt = _prompt(20, 3)
    status, body = _post(server, "/v2/models/gen_layers/generate", {"input_ids": prompt, "max_tokens": 4})
    assert status == 200 and _list(json.loads(body)["output_ids"]) == _expected(prompt, 4)
