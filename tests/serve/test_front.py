"""The front's HTTP side against a stand-in tritonserver: framing by llhttp, answers in order, 100-continue,
HTTP/1.0, chunked both ways, the pool, the connection cap, the stop."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import threading
import time

import httptools
import pytest

from ge_plugin.serve.front import Front
from ge_plugin.serve.triton import free_port

from .conftest import BIG, Upstream


def connect(front: Front) -> http.client.HTTPConnection:
    return http.client.HTTPConnection(*front.listen, timeout=30)


class Responses:
    """Final responses read off a raw socket with llhttp (interim 1xx ones skipped, as clients do), until
    the peer closes or ``count`` are complete."""

    def __init__(self):
        self.done: list[tuple[int, dict, bytes]] = []
        self.parser = httptools.HttpResponseParser(self)
        self.headers: dict = {}
        self.body = b""

    def on_header(self, name, value):
        self.headers[name.lower()] = value

    def on_body(self, body):
        self.body += body

    def on_message_complete(self):
        if self.parser.get_status_code() >= 200:
            self.done.append((self.parser.get_status_code(), self.headers, self.body))
        self.headers, self.body = {}, b""

    @classmethod
    def read(cls, sock: socket.socket, count: int | None = None, timeout: float = 10.0) -> tuple[list, bytes]:
        """(complete responses, every byte received)."""
        reader = cls()
        received = b""
        sock.settimeout(timeout)
        while count is None or len(reader.done) < count:
            data = sock.recv(65536)
            if not data:
                break
            received += data
            reader.parser.feed_data(data)
        return reader.done, received


def infer_body(values=(1, 2, 3)) -> bytes:
    return json.dumps(
        {"inputs": [{"name": "x", "shape": [len(values)], "datatype": "INT64", "data": list(values)}]}
    ).encode()


def test_front_relays_requests_and_answers_on_one_connection_over_one_pooled_upstream(front):
    for _ in range(3):  # three clients in turn share one upstream connection
        connection = connect(front)
        header = json.dumps(
            {
                "inputs": [
                    {"name": "x", "shape": [1, 4], "datatype": "FP32", "parameters": {"binary_data_size": 16}}
                ]
            }
        ).encode()
        connection.request(
            "POST",
            "/v2/models/m/infer",
            header + b"\0" * 16,
            {"Inference-Header-Content-Length": str(len(header))},
        )
        first = connection.getresponse()
        compact = len(json.dumps(json.loads(header), separators=(",", ":")))  # re-encoded by the front
        assert (first.status, json.loads(first.read())) == (
            200,
            {"path": "/v2/models/m/infer", "bytes": compact + 16},
        )
        connection.request("GET", "/v2/health/ready")
        second = connection.getresponse()
        assert (second.status, json.loads(second.read())) == (200, {"path": "/v2/health/ready"})
        connection.close()
    assert front.refused == 0
    assert front.run(lambda: front.pool.opened) == 1


def test_front_refuses_without_bothering_tritonserver_and_keeps_the_connection(front):
    connection = connect(front)
    bad = json.dumps({"inputs": [{"name": "x", "shape": [1, 1 << 40], "datatype": "INT64", "data": [1]}]})
    connection.request("POST", "/v2/models/m/versions/2/infer", bad)
    refused = connection.getresponse()
    assert refused.status == 400
    assert json.loads(refused.read())["error"].startswith("input 'x': shape [1, 1099511627776] declares")
    connection.request("POST", "/v2/models/m/infer", infer_body((1, 2)))
    assert connection.getresponse().status == 200
    connection.close()
    assert front.refused == 1
    assert [path for path, _, _ in Upstream.seen] == ["/v2/models/m/infer"]


def test_front_inflates_and_checks_compressed_bodies(front):
    bad = json.dumps({"inputs": [{"name": "x", "shape": [1, 1 << 40], "datatype": "INT64", "data": [1]}]})
    connection = connect(front)
    connection.request(
        "POST", "/v2/models/m/infer", gzip.compress(bad.encode()), {"Content-Encoding": "gzip"}
    )
    answer = connection.getresponse()
    assert answer.status == 400 and "declares 8796093022208 bytes" in json.loads(answer.read())["error"]
    body = infer_body()
    connection.request("POST", "/v2/models/m/infer", gzip.compress(body), {"Content-Encoding": "gzip"})
    assert connection.getresponse().read()
    ((_, headers, received),) = Upstream.seen
    assert json.loads(received) == json.loads(body) and "Content-Encoding" not in headers


def test_front_sends_a_chunked_request_on_with_its_length(front):
    body = infer_body()
    with socket.create_connection(front.listen, timeout=30) as sock:
        chunks = (
            b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:10], body[10:])) + b"0\r\n\r\n"
        )
        sock.sendall(
            b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks
        )
        ((status, _, _),), _ = Responses.read(sock, 1)
    assert status == 200
    ((_, headers, received),) = Upstream.seen
    assert json.loads(received) == json.loads(body)
    assert headers["Content-Length"] == str(len(received)) and "Transfer-Encoding" not in headers


def test_front_answers_expect_100_continue_before_the_body_and_the_answer_after(front):
    body = infer_body()
    with socket.create_connection(front.listen, timeout=30) as sock:
        sock.sendall(
            b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)
        )
        sock.settimeout(5)
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        ((status, _, answer),), _ = Responses.read(sock, 1)
    assert (status, json.loads(answer)["path"]) == (200, "/v2/models/m/infer")
    assert "Expect" not in Upstream.seen[0][1]


def test_front_takes_a_1xx_from_tritonserver_for_what_it_is(front):
    with socket.create_connection(front.listen, timeout=30) as sock:
        sock.sendall(
            b"GET /v2/interim HTTP/1.1\r\nHost: x\r\n\r\nGET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        responses, raw = Responses.read(sock, 2)
    assert [(status, json.loads(body)["path"]) for status, _, body in responses] == [
        (200, "/v2/interim"),
        (200, "/v2/health/ready"),
    ]
    assert b"100 Continue" not in raw


def test_front_answers_pipelined_requests_in_order(front):
    requests = b"".join(
        b"POST /v2/models/m%d/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
        % (i, len(infer_body()), infer_body())
        for i in range(20)
    )
    with socket.create_connection(front.listen, timeout=30) as sock:
        sock.sendall(requests)
        responses, _ = Responses.read(sock, 20)
    assert [json.loads(body)["path"] for _, _, body in responses] == [
        f"/v2/models/m{i}/infer" for i in range(20)
    ]


def test_front_speaks_http_1_0_and_rechunks_for_http_1_1(front):
    with socket.create_connection(front.listen, timeout=30) as sock:
        sock.sendall(b"GET /v2/chunked HTTP/1.0\r\n\r\n")
        responses, raw = Responses.read(sock)  # to the close: 1.0 without keep-alive
    ((status, headers, body),) = responses
    assert status == 200 and headers[b"content-length"] == str(len(body)).encode()
    assert json.loads(body) == {"path": "/v2/chunked"} and b"transfer-encoding" not in raw.lower()
    with socket.create_connection(front.listen, timeout=30) as sock:
        sock.sendall(b"GET /v2/chunked HTTP/1.1\r\nHost: x\r\n\r\n")
        ((status, headers, body),), _ = Responses.read(sock, 1)
    assert headers[b"transfer-encoding"] == b"chunked" and json.loads(body) == {"path": "/v2/chunked"}


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"POST /v2/models/m/infer HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400),
        (
            b"POST /v2/models/m/infer HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}",
            400,
        ),
        (b"POST /v2/models/m/infer HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 400),
        (b"POST /v2/models/m/infer HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", 413),
        (
            b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\n{}",
            417,
        ),
        (b"DELETE /v2/models/m HTTP/1.1\r\n\r\n", 405),
        (b"GET /v2 HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n", 400),
        (b"GET /v2 HTTP/1.1\r\n" + b"X: y\r\n" * 101 + b"\r\n", 431),
        (b"GET /v2 HTTP/1.1\r\nX: " + b"y" * 70000 + b"\r\n\r\n", 431),
        (b"GET /v2 HTTP/1.1\r\nHost: a\rb\r\n\r\n", 400),
        (b"GET\t/v2\tHTTP/1.1\r\n\r\n", 400),
        (b"\x16\x03\x01\x00\xa5\x01\x00\x00", 400),  # a TLS hello
    ],
)
def test_front_refuses_what_it_cannot_frame_one_way_and_closes(front, request_bytes, status):
    with socket.create_connection(front.listen, timeout=30) as sock:
        sock.sendall(request_bytes)
        responses, _ = Responses.read(sock)
    assert [s for s, _, _ in responses] == [status]
    assert "error" in json.loads(responses[0][2])
    assert Upstream.seen == []


def test_front_sends_tritonserver_a_request_line_of_its_own(front):
    """Odd whitespace and absolute form, read by llhttp, reach tritonserver as the front writes them."""
    body = infer_body()
    with socket.create_connection(front.listen, timeout=30) as sock:
        for line in (
            b"POST  /v2/models/m/infer  HTTP/1.1",
            b"POST http://127.0.0.1:1/v2/models/m/infer HTTP/1.1",
        ):
            sock.sendall(line + b"\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            ((status, _, answer),), _ = Responses.read(sock, 1)
            assert (status, json.loads(answer)["path"]) == (200, "/v2/models/m/infer")
    assert [path for path, _, _ in Upstream.seen] == ["/v2/models/m/infer"] * 2


def test_front_says_503_when_tritonserver_is_not_listening():
    front = Front(("127.0.0.1", free_port()), ("127.0.0.1", free_port()))
    try:
        connection = connect(front)
        connection.request("GET", "/v2/health/ready")
        answer = connection.getresponse()
        assert answer.status == 503
        assert "tritonserver is not reachable" in json.loads(answer.read())["error"]
    finally:
        front.close()


def test_front_closes_an_idle_connection_when_the_stop_begins(front):
    connection = connect(front)
    connection.request("GET", "/v2/health/ready")
    connection.getresponse().read()
    front.begin_stop()
    time.sleep(0.2)
    with socket.socket() as probe:  # no new connection is taken
        probe.settimeout(5)
        with pytest.raises(OSError):
            probe.connect(front.listen)
            probe.sendall(b"GET / HTTP/1.1\r\n\r\n")
            if not probe.recv(1):
                raise ConnectionResetError
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        connection.request("GET", "/v2/health/ready")
        connection.getresponse()


def test_idle_connections_cost_no_thread_and_the_cap_closes_the_oldest_idle(make_front):
    front = make_front(max_connections=50)
    threads = threading.active_count()
    socks = [socket.create_connection(front.listen, timeout=10) for _ in range(60)]
    try:
        time.sleep(0.5)
        assert threading.active_count() == threads
        assert front.run(lambda: len(front.connections)) == 50
        for sock in socks[:10]:  # the oldest were closed to make room
            assert sock.recv(1) == b""
        socks[-1].sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
        ((status, _, _),), _ = Responses.read(socks[-1], 1)
        assert status == 200 and front.evicted == 10
    finally:
        for sock in socks:
            sock.close()


def test_front_relays_a_large_answer_whole_and_the_connection_goes_on(front):
    """Past its head a large body is spliced socket to socket; every byte arrives, and the connection (and
    the pooled upstream one) serves the next request."""
    connection = connect(front)
    for _ in range(3):
        connection.request("GET", "/v2/big")
        answer = connection.getresponse()
        assert answer.status == 200 and answer.read() == BIG
        connection.request("GET", "/v2/health/ready")
        assert json.loads(connection.getresponse().read()) == {"path": "/v2/health/ready"}
    connection.close()
    assert front.run(lambda: front.pool.opened) == 1
    with socket.create_connection(front.listen, timeout=30) as sock:  # HTTP/1.0: read whole, then closed
        sock.sendall(b"GET /v2/big HTTP/1.0\r\n\r\n")
        ((status, headers, body),), _ = Responses.read(sock)
    assert status == 200 and body == BIG and headers[b"content-length"] == str(len(BIG)).encode()


def test_front_survives_a_client_that_leaves_in_the_middle_of_a_large_answer(front):
    for _ in range(5):
        with socket.create_connection(front.listen, timeout=30) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(b"GET /v2/big HTTP/1.1\r\nHost: x\r\n\r\n")
            sock.recv(1000)
    connection = connect(front)
    connection.request("GET", "/v2/big")
    assert connection.getresponse().read() == BIG
    connection.close()
