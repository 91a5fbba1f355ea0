"""The front under hostile load, against a stand-in tritonserver: fuzzed request heads and JSON bodies each
get one well-formed answer or a clean close, with threads, fds and memory bounded; and accept() meeting
EMFILE does not end the front."""

from __future__ import annotations

import gzip
import json
import os
import random
import socket
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
from pathlib import Path

import httptools
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .test_front import Responses

# -- fuzzing ----------------------------------------------------------------------------------------------

TOKENS = ["GET", "POST", "PUT", "HEAD", "OPTIONS", "CONNECT", "P\x00ST", "get"]
TARGETS = [
    "/v2/models/m/infer",
    "/v2/models/m/versions/1/infer",
    "/v2/repository/models/m/load",
    "/v2/health/ready",
    "http://127.0.0.1/v2/models/m/infer",
    "*",
    "//v2",
    "/v2/models/../infer",
    "/v2/models/m%2f/infer",
    "127.0.0.1:80",
]
HEADER_NAMES = [
    "Content-Length",
    "Transfer-Encoding",
    "Content-Encoding",
    "Inference-Header-Content-Length",
    "Expect",
    "Connection",
    "Accept-Encoding",
    "Host",
    "Upgrade",
    "X-Other",
]
HEADER_VALUES = [
    "0",
    "5",
    "-1",
    "chunked",
    "gzip",
    "deflate",
    "identity",
    "100-continue",
    "close",
    "keep-alive",
    "gzip, chunked",
    "18446744073709551617",
    " ",
    "",
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)
infer_headers = st.fixed_dictionaries(
    {
        "inputs": st.lists(
            st.fixed_dictionaries(
                {
                    "name": st.text(max_size=6),
                    "shape": st.lists(st.integers(-2, 2**41), max_size=3) | json_values,
                    "datatype": st.sampled_from(["FP32", "INT64", "BYTES", "x"]),
                    "data": st.lists(st.integers(0, 9), max_size=6) | json_values,
                }
            ),
            max_size=2,
        )
    }
)


@st.composite
def requests(draw) -> bytes:
    method = draw(st.sampled_from(TOKENS))
    target = draw(st.sampled_from(TARGETS) | st.text(max_size=12))
    version = draw(st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/1.1 ", "http/1.1"]))
    space = draw(st.sampled_from([" ", "  ", "\t"]))
    headers = draw(
        st.lists(st.tuples(st.sampled_from(HEADER_NAMES), st.sampled_from(HEADER_VALUES)), max_size=4)
    )
    body = draw(
        st.one_of(
            infer_headers.map(lambda v: json.dumps(v).encode()),
            json_values.map(lambda v: json.dumps(v).encode()),
            st.binary(max_size=64),
        )
    )
    if draw(st.booleans()):
        body = gzip.compress(body)
        headers.append(("Content-Encoding", "gzip"))
    if draw(st.booleans()):
        headers.append(("Content-Length", str(len(body))))
    head = f"{method}{space}{target}{space}{version}\r\n".encode("utf-8", "surrogatepass")
    head += b"".join(f"{n}: {v}\r\n".encode() for n, v in headers)
    return head + b"\r\n" + body


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=requests())
def test_every_fuzzed_request_gets_one_answer_or_a_clean_close(front, raw):
    with socket.create_connection(front.listen, timeout=10) as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)  # whatever was sent is all there is
        try:
            responses, received = Responses.read(sock, timeout=10)
        except httptools.HttpParserError as exc:
            pytest.fail(f"the front answered what is not HTTP ({exc}): {raw!r}")
    assert responses or not received, f"{received!r} is not a whole response to {raw!r}"
    # one answer per message: a body sent without a length is a second message to llhttp, answered 400
    assert len(responses) <= 2, f"{len(responses)} answers to {raw!r}"
    if len(responses) == 2:
        assert responses[1][0] == 400 and responses[1][1][b"connection"] == b"close"
    for status, headers, body in responses:
        assert 200 <= status < 600
        if status >= 400 and headers.get(b"content-type") == b"application/json" and b"error" in body:
            assert isinstance(json.loads(body)["error"], str)


def sampled_requests(count: int, seed: int = 0) -> list[bytes]:
    """``count`` requests built from the fuzzer's parts with a seeded random (cheap, and the same each run)."""
    rng = random.Random(seed)
    bodies = [
        b"",
        b'{"inputs":[{"name":"x","shape":[1,2],"datatype":"INT64","data":[1,2]}]}',
        b'{"inputs":[{"name":"x","shape":[1,1099511627776],"datatype":"INT64","data":[1,2]}]}',
        b'{"a":1,"a":2}',
        b"[" * 100 + b"]" * 100,
        b"\xff\xfe",
        b'{"a":NaN}',
    ]
    out = []
    for _ in range(count):
        body = rng.choice(bodies)
        headers = [(rng.choice(HEADER_NAMES), rng.choice(HEADER_VALUES)) for _ in range(rng.randrange(4))]
        if rng.random() < 0.3:
            body = gzip.compress(body)
            headers.append(("Content-Encoding", "gzip"))
        if rng.random() < 0.7:
            headers.append(("Content-Length", str(len(body))))
        line = f"{rng.choice(TOKENS)} {rng.choice(TARGETS)} {rng.choice(['HTTP/1.1', 'HTTP/1.0'])}\r\n"
        out.append(line.encode() + b"".join(f"{n}: {v}\r\n".encode() for n, v in headers) + b"\r\n" + body)
    return out


def test_the_fuzzing_leaves_threads_fds_and_memory_where_they_were(front):
    """The same kinds of requests, 400 of them: the front's threads, fds and traced memory stay bounded."""
    samples = sampled_requests(100)

    def run_all() -> None:
        for raw in samples:
            with socket.create_connection(front.listen, timeout=10) as sock:
                sock.sendall(raw)
                sock.shutdown(socket.SHUT_WR)
                sock.settimeout(10)
                while sock.recv(65536):
                    pass

    run_all()  # warm: the pool, the executor's threads, caches
    time.sleep(0.2)
    threads, fds = threading.active_count(), open_fds()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(3):
        run_all()
    time.sleep(0.2)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert threading.active_count() <= threads + 1
    assert open_fds() <= fds + 2
    assert front.run(lambda: len(front.connections)) == 0
    assert grown < 1 << 20, f"{grown} bytes more after 300 requests"


# -- EMFILE ------------------------------------------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import json, os, resource, sys, threading
    from http.server import ThreadingHTTPServer
    sys.path.insert(0, sys.argv[1])
    from conftest import Upstream
    from ge_plugin.serve.front import Front
    from ge_plugin.serve.triton import free_port

    resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    front = Front(("127.0.0.1", free_port()), upstream.server_address)
    print(json.dumps({"port": front.listen[1], "cap": front.max_connections}), flush=True)
    hogged = []
    for line in sys.stdin:
        if line.strip() == "hog":  # every fd but a few, as another part of the process could
            try:
                while True:
                    hogged.append(os.open("/dev/null", os.O_RDONLY))
            except OSError:
                for _ in range(3):
                    os.close(hogged.pop())
        elif line.strip() == "release":
            for fd in hogged:
                os.close(fd)
            hogged.clear()
        try:
            fds = len(os.listdir("/proc/self/fd"))
        except OSError:  # hogged: no fd to list them with
            fds = -1
        stats = {"threads": threading.active_count(), "fds": fds,
                 "connections": front.run(lambda: len(front.connections)), "evicted": front.evicted}
        print(json.dumps(stats), flush=True)
    """
)


def test_the_front_survives_emfile_and_keeps_accepting_once_fds_are_free(tmp_path):
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(Path(__file__).parent)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    socks: list[socket.socket] = []
    try:
        assert child.stdout is not None and child.stdin is not None
        port = json.loads(child.stdout.readline())["port"]

        def ask(command: str) -> dict:
            child.stdin.write(command + "\n")
            child.stdin.flush()
            return json.loads(child.stdout.readline())

        def get() -> int:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                responses, _ = Responses.read(sock, timeout=10)
            return responses[0][0] if responses else 0

        base = ask("stats")
        ask("hog")
        for _ in range(20):  # the kernel queues them; accept() meets EMFILE
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        time.sleep(2.5)  # the loop backs off a second between tries, closing an idle connection each time
        assert child.poll() is None
        assert ask("stats")["evicted"] >= 1  # accept() met EMFILE and an idle connection made room
        ask("release")
        for sock in socks:
            sock.close()
        socks.clear()
        deadline = time.monotonic() + 10
        while get() != 200:
            assert time.monotonic() < deadline, "the front took no connection after fds were free again"
            time.sleep(0.2)
        settled = ask("stats")
        deadline = time.monotonic() + 10
        while settled["connections"] or settled["fds"] > base["fds"] + 2:
            assert time.monotonic() < deadline, f"fds or connections stay open: {settled} (at start {base})"
            time.sleep(0.2)
            settled = ask("stats")
        assert settled["threads"] <= base["threads"] + 3  # the upstream stand-in's, the checks' pool
    finally:
        for sock in socks:
            sock.close()
        child.kill()
        child.wait()
