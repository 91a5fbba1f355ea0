"""The HTTP guard: its check of an inference request's JSON header, and the relay in front of tritonserver."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from ge_plugin.serve.http_guard import MAX_INPUT_BYTES, HttpGuard, Refused, check_infer_header
from ge_plugin.serve.triton import free_port


def one(**item) -> dict:
    return {"inputs": [{"name": "input_ids", "datatype": "INT64", **item}]}


def test_guard_refuses_a_shape_its_data_does_not_fill():
    # the request that aborts tritonserver 2.51 in its HTTP front end (std::bad_alloc)
    with pytest.raises(Refused) as caught:
        check_infer_header(one(shape=[1, 1099511627776], data=[1, 2]))
    assert str(caught.value).startswith(
        "input 'input_ids': shape [1, 1099511627776] declares 8796093022208 bytes"
    )


def test_guard_refuses_data_of_another_size():
    with pytest.raises(
        Refused, match=r"input 'input_ids': shape \[1, 3\] holds 3 elements but its data has 2"
    ):
        check_infer_header(one(shape=[1, 3], data=[1, 2]))


def test_guard_counts_nested_data():
    check_infer_header(one(shape=[2, 2], data=[[1, 2], [3, 4]]))
    with pytest.raises(Refused, match="holds 4 elements but its data has 3"):
        check_infer_header(one(shape=[2, 2], data=[[1, 2], [3]]))


def test_guard_refuses_a_negative_dim():
    with pytest.raises(Refused, match=r"shape \[1, -4\] has a negative dim"):
        check_infer_header(one(shape=[1, -4], data=[]))


def test_guard_refuses_more_than_the_limit_even_with_binary_data():
    header = one(shape=[1, MAX_INPUT_BYTES // 8 + 1], parameters={"binary_data_size": 16})
    with pytest.raises(Refused, match="more than the 4294967296 an input may have"):
        check_infer_header(header)
    check_infer_header(one(shape=[1, 16], parameters={"binary_data_size": 128}), max_input_bytes=128)


def test_guard_leaves_what_triton_refuses_itself_to_triton():
    for header in ({}, {"inputs": "x"}, {"inputs": [1]}, one(shape="1,2"), one(shape=[1.5], data=[1])):
        check_infer_header(header)


# -- the relay, against a stand-in for tritonserver's HTTP endpoint ---------------------------------------


class Upstream(BaseHTTPRequestHandler):
    """Answers every request with what it received: method, path, headers it was framed with, body size."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Upstream.seen.append((self.path, dict(self.headers), body))
        self._answer({"path": self.path, "bytes": len(body)})

    def do_GET(self):
        self._answer({"path": self.path})

    def _answer(self, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def guard():
    Upstream.seen = []
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    thread = threading.Thread(target=upstream.serve_forever, daemon=True)
    thread.start()
    front = HttpGuard(("127.0.0.1", free_port()), upstream.server_address, max_input_bytes=1 << 20)
    try:
        yield front
    finally:
        front.close()
        upstream.shutdown()


def connect(front: HttpGuard) -> http.client.HTTPConnection:
    return http.client.HTTPConnection(*front.listen, timeout=30)


def test_guard_relays_requests_and_answers_on_one_connection(guard):
    connection = connect(guard)
    binary = json.dumps(
        {
            "inputs": [
                {"name": "x", "shape": [1, 4], "datatype": "FP32", "parameters": {"binary_data_size": 16}}
            ]
        }
    ).encode()
    connection.request(
        "POST",
        "/v2/models/m/infer",
        binary + b"\0" * 16,
        {"Inference-Header-Content-Length": str(len(binary))},
    )
    first = connection.getresponse()
    assert (first.status, json.loads(first.read())) == (
        200,
        {"path": "/v2/models/m/infer", "bytes": len(binary) + 16},
    )
    connection.request("GET", "/v2/health/ready")
    second = connection.getresponse()
    assert (second.status, json.loads(second.read())) == (200, {"path": "/v2/health/ready"})
    connection.close()
    assert guard.refused == 0


def test_guard_refuses_without_bothering_tritonserver_and_keeps_the_connection(guard):
    connection = connect(guard)
    bad = json.dumps({"inputs": [{"name": "x", "shape": [1, 1 << 40], "datatype": "INT64", "data": [1]}]})
    connection.request("POST", "/v2/models/m/versions/2/infer", bad)
    refused = connection.getresponse()
    assert refused.status == 400
    assert json.loads(refused.read())["error"].startswith("input 'x': shape [1, 1099511627776] declares")
    connection.request(
        "POST",
        "/v2/models/m/infer",
        json.dumps({"inputs": [{"name": "x", "shape": [2], "datatype": "INT64", "data": [1, 2]}]}),
    )
    assert connection.getresponse().status == 200
    connection.close()
    assert guard.refused == 1
    assert [path for path, _, _ in Upstream.seen] == ["/v2/models/m/infer"]


def test_guard_sends_a_chunked_request_on_with_its_length(guard):
    body = json.dumps(
        {"inputs": [{"name": "x", "shape": [3], "datatype": "INT64", "data": [1, 2, 3]}]}
    ).encode()
    with socket.create_connection(guard.listen, timeout=30) as sock:
        chunks = (
            b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:10], body[10:])) + b"0\r\n\r\n"
        )
        sock.sendall(
            b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks
        )
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200")
    ((_, headers, received),) = Upstream.seen
    assert received == body
    assert headers["Content-Length"] == str(len(body)) and "Transfer-Encoding" not in headers


def test_guard_says_503_when_tritonserver_is_not_listening():
    front = HttpGuard(("127.0.0.1", free_port()), ("127.0.0.1", free_port()))
    try:
        connection = connect(front)
        connection.request("GET", "/v2/health/ready")
        answer = connection.getresponse()
        assert answer.status == 503
        assert "tritonserver is not reachable" in json.loads(answer.read())["error"]
    finally:
        front.close()


def test_guard_closes_an_idle_connection_when_the_stop_begins(guard):
    connection = connect(guard)
    connection.request("GET", "/v2/health/ready")
    connection.getresponse().read()
    guard.begin_stop()
    with socket.socket() as probe:  # no new connection is taken
        probe.settimeout(5)
        with pytest.raises(OSError):
            probe.connect(guard.listen)
            probe.sendall(b"GET / HTTP/1.1\r\n\r\n")
            if not probe.recv(1):
                raise ConnectionResetError
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        connection.request("GET", "/v2/health/ready")
        connection.getresponse()
