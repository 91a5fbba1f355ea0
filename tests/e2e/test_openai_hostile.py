"""The text endpoints under hostile input, on the real tritonserver: every request below is answered with a
clear error in the endpoint's own shape (OpenAI's on /v1, Triton's on /v2), never reaches the model in a form
it would choke on, and the server serves the next client right."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import zlib

import pytest

pytestmark = pytest.mark.e2e

CHAT = {"model": "standin", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


def address(server) -> tuple[str, int]:
    host, port = server.http_url.rsplit(":", 1)
    return host, int(port)


def send(server, raw: bytes, timeout: float = 20.0) -> tuple[int, dict, bytes]:
    """One raw request on a new connection: status, headers, body."""
    with socket.create_connection(address(server), timeout=timeout) as sock:
        sock.sendall(raw)
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


def post(path: str, body: bytes, *headers: bytes, version: bytes = b"1.1") -> bytes:
    extra = b"".join(h + b"\r\n" for h in headers)
    return (
        b"POST " + path.encode() + b" HTTP/" + version + b"\r\nHost: x\r\n" + extra
        + b"Content-Length: %d\r\n\r\n" % len(body) + body
    )  # fmt: skip


def openai_error(server, raw: bytes, status: int) -> dict:
    got, headers, body = send(server, raw)
    assert got == status, body
    assert headers["content-type"] == "application/json"
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


def assert_serves_on(server) -> None:
    assert server.triton.process.poll() is None, server.log_tail()
    status, _, body = send(server, post("/v1/chat/completions", json.dumps(CHAT).encode()))
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "Echo:"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"model":"standin","model":"busy","messages":[]}', "more than once"),
        (
            b'{"model":"standin","messages":[{"role":"user","content":"x"}],"temperature":NaN}',
            "not a JSON number",
        ),
        (b"[" * 100_000 + b"]" * 100_000, "nests deeper than"),
        (b'{"model":"standin","messages":"\xff\xfe"}', "not UTF-8"),
        (b'{"model":"standin","messages":[{"role":"user","content":"\\ud800"}]}', "lone surrogate"),
        (b'{"model":"standin"', "does not parse"),
        (b"", "no JSON body"),
        (b"[1]", "JSON object"),
        (
            b'{"model":"standin","messages":[{"role":"user","content":"x"}],"max_tokens":1e400}',
            "must be an integer",
        ),
        (
            b'{"model":"standin","messages":[{"role":"user","content":"x"}],"seed":' + b"9" * 5000 + b"}",
            "parse",
        ),
    ],
)
def test_hostile_json_is_refused_in_openai_shape(text_server, body, words):
    error = openai_error(text_server, post("/v1/chat/completions", body), 400)
    assert words in error["message"]


def test_hostile_values_name_their_parameter_and_the_server_serves_on(text_server):
    cases = [
        ({**CHAT, "n": 3}, "n"),
        ({**CHAT, "max_tokens": -1}, "max_tokens"),
        ({**CHAT, "messages": [{"role": "user", "content": {"$gt": ""}}]}, "messages[0].content"),
        ({**CHAT, "best_of": 5}, "best_of"),
        ({**CHAT, "stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ]
    for body, param in cases:
        assert (
            openai_error(text_server, post("/v1/chat/completions", json.dumps(body).encode()), 400)["param"]
            == param
        )
    ids = {"model": "standin", "prompt": [1, 99999]}
    error = openai_error(text_server, post("/v1/completions", json.dumps(ids).encode()), 400)
    assert "99999 is outside the vocabulary [0, 512)" in error["message"]
    assert_serves_on(text_server)


def test_hostile_paths_methods_and_model_names(text_server):
    get = b"GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n"
    assert openai_error(text_server, get, 405)["message"] == "this endpoint takes POST, not GET"
    assert openai_error(text_server, post("/v1/models", b"{}"), 405)
    assert openai_error(text_server, b"GET /v1/embeddings HTTP/1.1\r\nHost: x\r\n\r\n", 404)
    for name in ("../standin", "standin/../../etc", "a" * 300, "", ".hidden", "%2e%2e"):
        body = json.dumps({**CHAT, "model": name}).encode()
        assert openai_error(text_server, post("/v1/chat/completions", body), 400 if not name else 404)
    # a dot segment in the path itself is refused before any route
    status, _, _ = send(text_server, b"GET /v1/models/../../v2 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status in (400, 404)
    assert_serves_on(text_server)


def test_hostile_compressed_bodies(text_server):
    body = gzip.compress(json.dumps(CHAT).encode())
    status, _, answer = send(text_server, post("/v1/chat/completions", body, b"Content-Encoding: gzip"))
    assert status == 200 and json.loads(answer)["choices"][0]["message"]["content"] == "Echo:"
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # gzip: 300 MiB of spaces in ~300 KiB
    bomb = (
        packer.compress(b"{")
        + b"".join(packer.compress(b" " * (1 << 20)) for _ in range(300))
        + packer.flush()
    )
    status, _, answer = send(text_server, post("/v1/chat/completions", bomb, b"Content-Encoding: gzip"))
    assert status == 413, answer
    status, _, _ = send(text_server, post("/v1/chat/completions", body, b"Content-Encoding: br"))
    assert status == 415
    assert_serves_on(text_server)


def test_hostile_text_input_on_generate_gets_triton_shaped_errors(text_server):
    for body, words in [
        ({"text_input": 3}, "text_input must be a string"),
        ({"text_input": "x", "input_ids": [1]}, "not both"),
    ]:
        status, _, answer = send(text_server, post("/v2/models/standin/generate", json.dumps(body).encode()))
        assert status == 400 and words in json.loads(answer)["error"]
    status, _, answer = send(text_server, post("/v2/models/standin/generate", b"[]"))
    assert status == 400 and "must be an object" in json.loads(answer)["error"]
    # a model whose config names no tokenizer: the request goes to tritonserver as it is
    status, _, answer = send(
        text_server, post("/v2/models/plain/generate", json.dumps({"text_input": "x"}).encode())
    )
    assert status == 400 and "missing required input(s) ['input_ids']" in json.loads(answer)["error"]
    assert_serves_on(text_server)


def test_pipelined_requests_and_http_1_0_streams_are_answered_in_order(text_server):
    stream = json.dumps({**CHAT, "stream": True}).encode()
    with socket.create_connection(address(text_server), timeout=20) as sock:
        sock.sendall(post("/v1/chat/completions", stream) + b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        first = http.client.HTTPResponse(sock)
        first.begin()
        assert first.status == 200 and first.getheader("content-type").startswith("text/event-stream")
        assert first.read().rstrip().endswith(b"data: [DONE]")
        second = http.client.HTTPResponse(sock)
        second.begin()
        assert [m["id"] for m in json.loads(second.read())["data"]] == ["busy", "standin"]
    status, headers, body = send(text_server, post("/v1/chat/completions", stream, version=b"1.0"))
    assert status == 200 and "transfer-encoding" not in headers and body.rstrip().endswith(b"data: [DONE]")
