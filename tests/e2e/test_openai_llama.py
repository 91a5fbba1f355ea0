"""The demo LLaMA speaks text on the real tritonserver (the session server: its generating models name the demo
tokenizer): the ``openai`` package against the front's OpenAI endpoints, sync, async and streaming, chat and
completions, and Triton's generate with text_input. The demo LLaMA copies the token 12 back, so its answer is
deterministic text made from the prompt: each test asserts it exactly, as the tokenizer decodes the greedy ids
of the full-recompute reference (onnxruntime running the cache-free model over the whole sequence)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.request
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from ge_plugin.models import llama_kv
from ge_plugin.text.tokenizer import Tokenizer

openai = pytest.importorskip("openai")

pytestmark = pytest.mark.e2e

CHAT = [{"role": "user", "content": "Tell me a story about a small robot."}]
PROMPT = "Once upon a time there was a small robot who wanted to learn"


@pytest.fixture(scope="module")
def tokenizer(models_dir) -> Tokenizer:
    return Tokenizer.from_files(models_dir / "tokenizer.json", models_dir / "tokenizer_config.json")


@pytest.fixture(scope="module")
def answer(reference, tokenizer) -> Callable[[Sequence[int], int], str]:
    """``answer(prompt_ids, n)``: the text of the reference's ``n`` greedy tokens (up to EOS)."""

    def run(prompt_ids: Sequence[int], count: int) -> str:
        ids, generated = list(prompt_ids), []
        while len(generated) < count:
            logits = reference("tiny_llama_gen", input_ids=np.array([ids], np.int64))["logits"]
            token = int(logits[0, -1].argmax())
            generated.append(token)
            ids.append(token)
            if token == llama_kv.EOS_ID:
                break
        return tokenizer.decode(generated)

    return run


def client(server):
    return openai.OpenAI(base_url=f"http://{server.http_url}/v1", api_key="-", max_retries=0)


def test_openai_chat_streams_the_demo_llamas_answer(server, tokenizer, answer):
    """The issue's done-when: ``chat.completions.create(..., stream=True)`` streams the demo LLaMA's answer."""
    prompt = tokenizer.encode_chat(CHAT)
    stream = client(server).chat.completions.create(
        model="gen_stacked",
        messages=CHAT,
        max_tokens=16,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert "".join(pieces) == answer(prompt, 16) == "tory about a small robot. [/INST]tory a"
    assert len(pieces) > 4  # streamed as the tokens came (gen_stacked answers every 2 tokens), not whole
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == [
        "length"
    ]
    usage = chunks[-1].usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (
        len(prompt),
        16,
        len(prompt) + 16,
    )


def test_openai_chat_whole_answer_from_the_per_layer_form(server, tokenizer, answer):
    system = [{"role": "system", "content": "You are a helpful assistant."}]
    messages = [*system, {"role": "user", "content": "What is the capital of France?"}]
    prompt = tokenizer.encode_chat(messages)
    reply = client(server).chat.completions.create(model="gen_layers", messages=messages, max_tokens=12)
    assert reply.choices[0].message.content == answer(prompt, 12)
    assert reply.choices[0].finish_reason == "length" and reply.model == "gen_layers"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (len(prompt), 12)


def test_openai_async_completion_streams_and_a_stop_string_cuts_it(server, tokenizer, answer):
    expected = answer(tokenizer.encode_prompt(PROMPT), 20)

    async def run() -> tuple[str, str | None]:
        async_client = openai.AsyncOpenAI(base_url=f"http://{server.http_url}/v1", api_key="-", max_retries=0)
        try:
            stream = await async_client.completions.create(
                model="gen_layers", prompt=PROMPT, max_tokens=20, stream=True
            )
            pieces, finish = [], None
            async for chunk in stream:
                pieces.append(chunk.choices[0].text)
                finish = chunk.choices[0].finish_reason or finish
            return "".join(pieces), finish
        finally:
            await async_client.close()

    assert asyncio.run(run()) == (expected, "length")
    cut = client(server).completions.create(model="gen_layers", prompt=PROMPT, max_tokens=20, stop=["robot"])
    assert expected.count("robot") and cut.choices[0].text == expected[: expected.index("robot")]
    assert cut.choices[0].finish_reason == "stop"


def _post(server, path: str, body: dict) -> bytes:
    request = urllib.request.Request(
        f"http://{server.http_url}{path}", data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read()


def test_text_input_on_triton_generate_answers_text_output(server, tokenizer, answer):
    expected = answer(tokenizer.encode_prompt(PROMPT), 10)
    whole = json.loads(
        _post(server, "/v2/models/gen_layers/generate", {"text_input": PROMPT, "max_tokens": 10})
    )
    assert whole["text_output"] == expected
    raw = _post(
        server,
        "/v2/models/gen_stacked/generate_stream",
        {"text_input": PROMPT, "max_tokens": 10, "stream": True},
    )
    events = [json.loads(line[6:]) for line in raw.splitlines() if line.startswith(b"data: ")]
    assert "".join(event["text_output"] for event in events) == expected and len(events) > 2
    assert events[-1]["finish_reason"] == "length"


def test_a_client_that_disconnects_mid_stream_cancels_its_generation_and_frees_the_slot(server):
    """gen_stacked takes 30 ms an execute: 200 tokens would take 6 s, so a generation that stopped early
    was cancelled."""

    def value(name: str) -> float:
        samples = server.metrics().samples
        return sum(v for n, labels, v in samples if n == name and labels.get("model") == "gen_stacked")

    server.wait_until("earlier gen_stacked requests to end", lambda: value("ge_generate_active_slots") == 0)
    time.sleep(0.3)  # two metric flushes: earlier tokens are counted
    before = value("ge_generate_tokens_total")
    body = json.dumps({"model": "gen_stacked", "messages": CHAT, "stream": True, "max_tokens": 200}).encode()
    host, port = server.http_url.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body
        )
        seen = b""
        while b'"content"' not in seen:  # a token has been generated
            data = sock.recv(4096)
            assert data, "the stream ended before its first token"
            seen += data
    server.wait_until(
        "the cancelled sequence to leave its slot", lambda: value("ge_generate_active_slots") == 0, timeout=10
    )
    time.sleep(0.3)
    assert 1 <= value("ge_generate_tokens_total") - before < 100
