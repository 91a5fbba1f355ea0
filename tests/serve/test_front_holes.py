"""The front's holes found by a hostile client (issue 27), each closed, against a stand-in tritonserver:
pipelined requests before a half-close, slow readers (a write timeout and a budget for what the front holds),
head limits enforced while reading, HTTP/1.0 with chunked, trailers, HTTP/0.9, ``Host``, and a client gone
before its answer."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from ge_plugin.errors import ServeError

from .conftest import BIG, SLOW_S, Upstream
from .test_front import Responses, infer_body

#: tritonserver 2.51's own limits, measured against its HTTP endpoint: the longest header name or value and
#: request target it answers (past them it closes the connection)
MAX_FIELD_BYTES = 8191
MAX_TARGET_BYTES = 8189


def post(path: bytes, body: bytes, *extra: bytes, version: bytes = b"1.1") -> bytes:
    head = b"POST " + path + b" HTTP/" + version + b"\r\nHost: x\r\n" + b"".join(h + b"\r\n" for h in extra)
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


def chunked(body: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:7], body[7:]) if part)


def closed_by_front(sock: socket.socket, timeout: float) -> bool:
    """Whether the front closes ``sock`` within ``timeout`` (reading and dropping what it sent)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(1 << 20):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


# -- pipelining and half-close ---------------------------------------------------------------------------


def test_every_pipelined_request_is_answered_before_a_half_close_is_honoured(front):
    with socket.create_connection(front.listen, timeout=30) as sock:
        sock.sendall(b"".join(post(b"/v2/models/m%d/infer" % i, infer_body()) for i in range(3)))
        sock.shutdown(socket.SHUT_WR)
        responses, _ = Responses.read(sock)  # to the close
    assert [json.loads(body)["path"] for _, _, body in responses] == [
        f"/v2/models/m{i}/infer" for i in range(3)
    ]
    assert responses[-1][1][b"connection"] == b"close"


def test_a_client_gone_before_its_answer_loses_its_upstream_connection_and_a_half_closed_one_is_answered(
    front,
):
    """A client that closes right after sending looks like one that half-closed, until something is written
    to it: the front writes an interim 100, and the reset that comes back ends the connection (and, in front
    of tritonserver, the request). A client that only half-closed skips the 100 and gets its answer."""
    gone = socket.create_connection(front.listen, timeout=30)
    gone.sendall(b"GET /v2/slow HTTP/1.1\r\nHost: x\r\n\r\n")
    gone.close()
    with socket.create_connection(front.listen, timeout=30) as alive:
        alive.sendall(b"GET /v2/slow HTTP/1.1\r\nHost: x\r\n\r\n")
        alive.shutdown(socket.SHUT_WR)
        time.sleep(SLOW_S / 2)
        assert front.gone == 1  # seen long before tritonserver's answer
        assert front.run(lambda: len(front.connections)) == 1
        responses, raw = Responses.read(alive)
    assert raw.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert [(status, json.loads(body)) for status, _, body in responses] == [(200, {"path": "/v2/slow"})]


# -- slow readers ------------------------------------------------------------------------------------------


def slow_reader(front) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(front.listen)
    return sock


def test_a_reader_that_stops_reading_is_closed_after_the_write_timeout(make_front):
    front = make_front(write_timeout_s=1.0)
    sock = slow_reader(front)
    try:
        sock.sendall(b"GET /v2/big HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(3.5)  # the timeout, and the sweep that finds it
        assert front.write_timeouts == 1
        assert front.run(lambda: (len(front.connections), front.held)) == (0, 0)
    finally:
        sock.close()
    connection = socket.create_connection(front.listen, timeout=30)
    with connection:
        connection.sendall(b"GET /v2/big HTTP/1.1\r\nHost: x\r\n\r\n")
        ((status, _, body),), _ = Responses.read(connection, 1)
    assert status == 200 and body == BIG


def test_slow_readers_are_closed_slowest_first_to_keep_what_the_front_holds_in_its_budget(make_front):
    """Clients that pipeline large requests and never read: their queued bodies and unread answers are what
    the front holds; past the budget the one whose answer waited longest goes first, and what is held stays
    within the budget however many such clients come. A client that reads is served all along."""
    budget = 1 << 20
    front = make_front(max_buffered_bytes=budget)
    payload = json.dumps({"pad": "x" * (200 << 10)}).encode()
    slow = []
    try:
        for _ in range(8):
            sock = slow_reader(front)
            sock.sendall(b"".join(post(b"/v2/big", payload) for _ in range(4)))
            slow.append(sock)
            time.sleep(0.2)
            assert front.run(lambda: front.held) <= budget
        assert front.shed >= 1
        assert closed_by_front(slow[0], timeout=5)  # the first to stall was the first closed
        good = socket.create_connection(front.listen, timeout=30)
        with good:
            good.sendall(b"".join(post(b"/v2/big", payload) for _ in range(2)))
            responses, _ = Responses.read(good, 2)
        assert [(status, body == BIG) for status, _, body in responses] == [(200, True), (200, True)]
    finally:
        for sock in slow:
            sock.close()
    time.sleep(0.3)
    assert front.run(lambda: front.held) == 0


def test_a_budget_smaller_than_the_largest_body_is_refused_at_start(make_front):
    with pytest.raises(ServeError, match="smaller than the largest request body"):
        make_front(max_buffered_bytes=(1 << 20) - 1)  # the fixture's body limit is 1 MiB


# -- heads -------------------------------------------------------------------------------------------------


def test_a_64_mib_header_value_is_refused_while_it_arrives(front):
    """httptools builds a header up by appending each piece it reads and the old check ran at the header's
    end: a 64 MiB value cost seconds of the front's CPU and the memory. Now the head is cut off at its limit:
    the client is answered 431 while it is still sending, and its send fails."""
    sent = threading.Event()
    failure: list[BaseException] = []
    sock = socket.create_connection(front.listen, timeout=30)

    def send() -> None:
        try:
            sock.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nX-Big: " + b"y" * (64 << 20))
            sent.set()
        except OSError as exc:
            failure.append(exc)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        responses, _ = Responses.read(sock, 1, timeout=30)
        sender.join(timeout=30)
    finally:
        sock.close()
    assert [status for status, _, _ in responses] == [431]
    assert not sent.is_set() and failure, "the front read the whole 64 MiB before refusing it"
    assert Upstream.seen == []


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nX: " + b"y" * MAX_FIELD_BYTES + b"\r\n\r\n", 200),
        (
            b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nX: " + b"y" * (MAX_FIELD_BYTES + 1) + b"\r\n\r\n",
            431,
        ),
        (
            b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n" + b"X" * (MAX_FIELD_BYTES + 1) + b": y\r\n\r\n",
            431,
        ),
        (b"GET /v2/h?" + b"a" * (MAX_TARGET_BYTES - 6) + b" HTTP/1.1\r\nHost: x\r\n\r\n", 200),
        (b"GET /v2/h?" + b"a" * (MAX_TARGET_BYTES - 5) + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    ],
    ids=["value at the limit", "value past it", "name past it", "target at the limit", "target past it"],
)
def test_head_limits_are_tritonservers_own(front, request_bytes, status):
    with socket.create_connection(front.listen, timeout=30) as sock:
        sock.sendall(request_bytes)
        ((answered, _, _),), _ = Responses.read(sock, 1)
    assert answered == status


# -- framing -----------------------------------------------------------------------------------------------


def test_http_1_0_with_chunked_closes_after_the_answer_even_with_keep_alive(front):
    body = infer_body()
    with socket.create_connection(front.listen, timeout=30) as sock:
        sock.sendall(
            b"POST /v2/models/m/infer HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
            + chunked(body)
            + b"0\r\n\r\n"
        )
        responses, _ = Responses.read(sock)  # to the close
    ((status, headers, _),) = responses
    assert status == 200 and headers[b"connection"] == b"close"


def test_trailer_fields_change_neither_framing_nor_encoding(front):
    """A trailer ``Content-Encoding: gzip`` made the front inflate a body that was never compressed, and a
    trailer ``Inference-Header-Content-Length`` moved the JSON's end: trailers are dropped."""
    body = infer_body()
    with socket.create_connection(front.listen, timeout=30) as sock:
        sock.sendall(
            b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            + chunked(body)
            + b"0\r\nContent-Encoding: gzip\r\nInference-Header-Content-Length: 3\r\n\r\n"
        )
        ((status, _, answer),), _ = Responses.read(sock, 1)
    assert (status, json.loads(answer)["path"]) == (200, "/v2/models/m/infer")
    ((_, headers, received),) = Upstream.seen
    assert json.loads(received) == json.loads(body) and "Inference-Header-Content-Length" not in headers


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [(b"GET /v2/health/ready\r\n\r\n", 400), (b"GET /v2/health/ready HTTP/2.0\r\nHost: x\r\n\r\n", 505)],
    ids=["HTTP/0.9", "HTTP/2.0 on an HTTP/1 connection"],
)
def test_request_lines_of_other_http_versions_are_refused_and_the_connection_closed(
    front, request_bytes, status
):
    with socket.create_connection(front.listen, timeout=30) as sock:
        sock.sendall(request_bytes)
        responses, raw = Responses.read(sock)
    assert [s for s, _, _ in responses] == [status] and raw.startswith(b"HTTP/1.1 ")
    assert Upstream.seen == []


@pytest.mark.parametrize(
    ("host", "version", "status"),
    [
        (None, b"1.1", 400),
        (b"Host: a\r\nHost: a\r\n", b"1.1", 400),
        (b"Host: a b\r\n", b"1.1", 400),
        (b"Host: a/b\r\n", b"1.1", 400),
        (b"Host: a:b\r\n", b"1.1", 400),
        (b"Host: \xff\r\n", b"1.1", 400),
        (b"Host: a\r\nhost: b\r\n", b"1.0", 400),
        (None, b"1.0", 200),
        (b"Host: example.com:8000\r\n", b"1.1", 200),
        (b"Host: [::1]:8000\r\n", b"1.1", 200),
        (b"Host: 10.0.0.1\r\n", b"1.1", 200),
        (b"Host:\r\n", b"1.1", 200),
    ],
)
def test_host_is_validated_and_a_bad_one_costs_only_its_request(front, host, version, status):
    bad = (
        b"GET /v2/health/ready HTTP/" + version + b"\r\n" + (host or b"") + b"Connection: keep-alive\r\n\r\n"
    )
    with socket.create_connection(front.listen, timeout=30) as sock:
        sock.sendall(bad + b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n")
        responses, _ = Responses.read(sock, 2)
    assert [s for s, _, _ in responses] == [status, 200]
    if status == 400:
        assert "Host" in json.loads(responses[0][2])["error"]
