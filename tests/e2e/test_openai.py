"""The front's OpenAI endpoints on the real tritonserver, with the clients people point at an LLM server: the
official ``openai`` package (sync, async, streaming) and curl; the generating model is the Contract B
stand-in of tests/e2e/standin (its answer to a prompt is "Echo: " and the prompt's text)."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

openai = pytest.importorskip("openai")

pytestmark = pytest.mark.e2e

HELLO = [{"role": "user", "content": "Hi 🙂 there, ça va?"}]
#: what the demo LLaMA-2 chat template makes of HELLO, as the stand-in echoes it (special tokens skipped)
HELLO_ANSWER = "Echo: [INST] Hi 🙂 there, ça va? [/INST]"


def client(server, **kwargs):
    return openai.OpenAI(base_url=f"http://{server.http_url}/v1", api_key="-", max_retries=0, **kwargs)


def events(server, model: str) -> list[list[str]]:
    path = Path(server.triton.options.repository) / model / "events.log"
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


# -- the openai package -----------------------------------------------------------------------------------


def test_openai_chat_whole_answer_with_usage(text_server):
    answer = client(text_server).chat.completions.create(model="standin", messages=HELLO)
    assert answer.choices[0].message.role == "assistant"
    assert answer.choices[0].message.content == HELLO_ANSWER
    assert answer.choices[0].finish_reason == "stop"  # the stand-in's EOS
    usage = answer.usage
    assert usage.prompt_tokens > 5 and usage.completion_tokens > 5
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert answer.object == "chat.completion" and answer.model == "standin"


def test_openai_chat_streams_the_same_text_with_usage_last(text_server):
    stream = client(text_server).chat.completions.create(
        model="standin", messages=HELLO, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == HELLO_ANSWER
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 10  # streamed, not whole
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 5


def test_openai_async_completion_stream_and_max_tokens(text_server):
    async def run() -> tuple[str, str | None]:
        async_client = openai.AsyncOpenAI(base_url=text_server.triton.openai_url, api_key="-", max_retries=0)
        stream = await async_client.completions.create(
            model="standin", prompt="Once upon", max_tokens=4, stream=True
        )
        pieces, finish = [], None
        async for chunk in stream:
            pieces.append(chunk.choices[0].text)
            finish = chunk.choices[0].finish_reason or finish
        await async_client.close()
        return "".join(pieces), finish

    text, finish = asyncio.run(run())  # on the OpenAI port of its own
    assert (text, finish) == ("Echo:", "length")  # four tokens of "Echo: Once upon": E ch o :


def test_openai_seeded_sampling_is_reproducible_and_streams_what_it_answers_whole(text_server):
    """Random ids (invalid UTF-8 among them) decode to the same text streamed as whole."""
    api = client(text_server)
    kwargs = {"model": "standin", "prompt": "x", "max_tokens": 40, "temperature": 1.0, "top_p": 0.9}
    first = api.completions.create(seed=7, **kwargs).choices[0].text
    assert api.completions.create(seed=7, **kwargs).choices[0].text == first
    assert api.completions.create(seed=8, **kwargs).choices[0].text != first
    streamed = "".join(c.choices[0].text for c in api.completions.create(seed=7, stream=True, **kwargs))
    assert streamed == first


def test_openai_stop_string_spanning_tokens_cuts_and_cancels_the_generation(text_server):
    """The stop string is not sent, the finish reason is "stop", and the model saw its request cancelled
    (the echo of this prompt would otherwise run on for seconds on the one-slot, 30 ms-a-token stand-in)."""
    before = len(events(text_server, "busy"))
    prompt = "alpha beta STOP gamma " + "delta " * 60
    answer = client(text_server).completions.create(
        model="busy", prompt=prompt, max_tokens=200, stop=["ST", "OP g"]
    )
    assert answer.choices[0].text == "Echo: alpha beta "
    assert answer.choices[0].finish_reason == "stop"
    text_server.wait_until(
        "the stand-in to log the cancel", lambda: len(events(text_server, "busy")) > before, timeout=10
    )
    _, finish, done = events(text_server, "busy")[before]
    assert finish == "cancelled" and int(done) < 100


def test_openai_errors_take_openai_shape_and_status(text_server):
    api = client(text_server)
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        api.chat.completions.create(model="nope", messages=HELLO)
    with pytest.raises(openai.NotFoundError, match="takes token ids, not text"):
        api.chat.completions.create(model="plain", messages=HELLO)
    with pytest.raises(openai.BadRequestError) as bad:
        api.chat.completions.create(model="standin", messages=HELLO, n=2)
    assert bad.value.body["param"] == "n" and bad.value.status_code == 400
    with pytest.raises(openai.BadRequestError, match=r"temperature 3\.5 is outside"):
        api.chat.completions.create(model="standin", messages=HELLO, temperature=3.5)
    with pytest.raises(openai.BadRequestError, match="Conversation roles must alternate"):
        api.chat.completions.create(model="standin", messages=HELLO + HELLO)
    with pytest.raises(openai.BadRequestError, match="more than the context of 512"):
        api.completions.create(model="standin", prompt="word " * 600)
    with pytest.raises(openai.BadRequestError, match="logprobs"):
        api.completions.create(model="standin", prompt="x", logprobs=2)


def test_openai_queue_full_is_503_while_the_slot_is_busy(text_server):
    before = len(events(text_server, "busy"))
    api = client(text_server)
    holding = api.completions.create(model="busy", prompt="hold " * 20, max_tokens=60, stream=True)
    next(iter(holding))  # the one slot is taken
    with pytest.raises(openai.InternalServerError) as full:
        api.completions.create(model="busy", prompt="x", max_tokens=2)
    assert full.value.status_code == 503 and full.value.response.headers["retry-after"] == "1"
    holding.close()  # the stream closed by the client frees the slot
    text_server.wait_until(
        "the slot to be free", lambda: len(events(text_server, "busy")) > before, timeout=10
    )
    assert events(text_server, "busy")[before][1] == "cancelled"


def test_openai_models_lists_the_models_with_a_tokenizer_on_both_ports(text_server):
    for base in (f"http://{text_server.http_url}/v1", text_server.triton.openai_url):
        api = openai.OpenAI(base_url=base, api_key="-", max_retries=0)
        assert sorted(m.id for m in api.models.list()) == [
            "busy",
            "standin",
        ]  # not plain; small_vocab did not load
        assert api.models.retrieve("standin").owned_by == "ge-plugin"
        with pytest.raises(openai.NotFoundError):
            api.models.retrieve("plain")


def test_model_whose_vocabulary_is_smaller_than_its_tokenizer_fails_its_load(text_server):
    assert not text_server.triton.process.poll()
    client_ = text_server.client("http")
    try:
        assert not client_.is_model_ready("small_vocab")
    finally:
        client_.close()
    assert "512 tokens but model 'small_vocab' has a vocabulary of 500" in text_server.log_path.read_text()


# -- a client that goes away ---------------------------------------------------------------------------------


def test_client_disconnect_mid_stream_cancels_the_generation(text_server):
    before = len(events(text_server, "busy"))
    body = json.dumps({"model": "busy", "messages": HELLO, "stream": True, "max_tokens": 100}).encode()
    host, port = text_server.http_url.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        )
        seen = b""
        while b"data: " not in seen:  # the head may come in a read of its own
            data = sock.recv(4096)
            assert data, "the stream ended before its first event"
            seen += data
    text_server.wait_until(
        "the stand-in to log the cancel", lambda: len(events(text_server, "busy")) > before, timeout=10
    )
    _, finish, done = events(text_server, "busy")[before]
    assert finish == "cancelled" and int(done) < 100


# -- curl --------------------------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_chat_stream_and_text_input_on_triton_generate(text_server):
    url = f"http://{text_server.http_url}"
    body = json.dumps({"model": "standin", "messages": HELLO, "stream": True})
    out = subprocess.run(
        ["curl", "-sN", f"{url}/v1/chat/completions", "-H", "Content-Type: application/json", "-d", body],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    lines = [line[6:] for line in out.split("\n\n") if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    text = "".join(json.loads(line)["choices"][0]["delta"].get("content", "") for line in lines[:-1])
    assert text == HELLO_ANSWER
    whole = subprocess.run(
        ["curl", "-s", f"{url}/v2/models/standin/generate", "-d", json.dumps({"text_input": "Hi é", "max_tokens": 20})],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    answer = json.loads(whole)
    assert answer["text_output"] == "Echo: Hi é" and answer["finish_reason"] == "stop"
    streamed = subprocess.run(
        ["curl", "-sN", f"{url}/v2/models/standin/generate_stream", "-d",
         json.dumps({"text_input": "Hi é", "max_tokens": 20, "stream": True})],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    events_ = [json.loads(block[6:]) for block in streamed.split("\n\n") if block.startswith("data: ")]
    assert "".join(e["text_output"] for e in events_) == "Echo: Hi é"
    assert events_[-1]["finish_reason"] == "stop"
