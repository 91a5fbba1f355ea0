"""A stand-in for tritonserver's HTTP endpoint, and a front in front of it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from ge_plugin.serve.front import Front, Rules
from ge_plugin.serve.triton import free_port

#: how long ``/slow`` takes to answer
SLOW_S = 1.5
#: a large answer (3 MiB of a pattern): the front splices what follows its head
BIG = bytes(range(251)) * (3 * (1 << 20) // 251)


class Upstream(BaseHTTPRequestHandler):
    """Answers with what it received (path, headers, body size); ``/chunked`` answers in chunks,
    ``/interim`` sends a ``100 Continue`` of its own before the answer, ``/big`` answers BIG and ``/slow``
    answers after SLOW_S."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Upstream.seen.append((self.path, dict(self.headers), body))
        self._answer({"path": self.path, "bytes": len(body)})

    def do_GET(self):
        Upstream.seen.append((self.path, dict(self.headers), b""))
        self._answer({"path": self.path})

    def _answer(self, payload: dict) -> None:
        data = json.dumps(payload).encode()
        if self.path.endswith("/slow"):
            time.sleep(SLOW_S)
        if self.path.endswith("/big"):
            data = BIG
        if self.path.endswith("/interim"):
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if self.path.endswith("/chunked"):
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (data[:5], data[5:]):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def upstream() -> Iterator[ThreadingHTTPServer]:
    Upstream.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)  # a quick shutdown
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def make_front(upstream):
    fronts = []

    def make(**kwargs) -> Front:
        rules = kwargs.pop("rules", Rules(max_body_bytes=1 << 20))
        front = Front(("127.0.0.1", free_port()), upstream.server_address, rules=rules, **kwargs)
        fronts.append(front)
        return front

    yield make
    for front in fronts:
        front.close()


@pytest.fixture
def front(make_front) -> Front:
    return make_front()
