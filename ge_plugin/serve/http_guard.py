"""An HTTP/1.1 front for tritonserver's HTTP endpoint that refuses the inference requests Triton 2.51 dies of.

Tritonserver 2.51 sizes a JSON request's input buffer from its declared ``shape`` before it looks at the
``data``: ``{"inputs":[{"name":"input_ids","shape":[1,1099511627776],"datatype":"INT64","data":[1,2]}]}`` ends
in ``std::bad_alloc`` and the whole server aborts, for every client. 2.51 has no setting that stops it (the
size checks came with server PRs #8174 and #8676, in 2025-26), and the request never reaches a backend. So
``ge-plugin serve`` puts this guard on the HTTP port and tritonserver's own HTTP endpoint on a loopback port
behind it. The guard reads each inference request's JSON header and refuses, with Triton's own 400 body
``{"error": ...}``, an input whose shape does not match the data it brings or would need more than
``max_input_bytes``; everything else, bytes unchanged, goes to tritonserver on one upstream connection per
client connection. gRPC does not need it (gRPC and binary HTTP requests were already refused with 400).

Bodies are not carried through Python: past the head (and the JSON part the check reads), bytes move from
one socket to the other with ``os.splice`` through a pipe, inside the kernel, so a 2 MiB response costs the
relay about as much as a small one. One thread per client connection, as Triton's HTTP clients keep few.

It also owns the client connections, so a stop can close idle keep-alive ones at once instead of waiting out
tritonserver's exit timeout for them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
import socket
import threading
from collections.abc import Mapping

#: bytes per element of each KServe datatype; BYTES elements have no fixed size
ITEMSIZE = {
    "BOOL": 1,
    "UINT8": 1,
    "UINT16": 2,
    "UINT32": 4,
    "UINT64": 8,
    "INT8": 1,
    "INT16": 2,
    "INT32": 4,
    "INT64": 8,
    "FP16": 2,
    "FP32": 4,
    "FP64": 8,
    "BF16": 2,
}
#: the most an input may declare by default: far above any gear of a served model, far below bad_alloc
MAX_INPUT_BYTES = 4 << 30
#: request line and headers; Triton's own limit is larger, but no client sends more
MAX_HEAD_BYTES = 64 << 10
_INFER = re.compile(rb"^/v2/models/[^/?]+(?:/versions/[^/?]+)?/infer(?:\?.*)?$")


class Refused(ValueError):
    """A request the guard answers itself with 400."""


def check_infer_header(header: Mapping, max_input_bytes: int = MAX_INPUT_BYTES) -> None:
    """Refused naming the input, for an input whose shape cannot be what Triton is about to allocate."""
    inputs = header.get("inputs")
    if not isinstance(inputs, list):
        return  # Triton answers malformed requests itself, with 400
    for item in inputs:
        if not isinstance(item, Mapping):
            continue
        name = item.get("name", "?")
        shape = item.get("shape")
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) for d in shape
        ):
            continue
        if any(d < 0 for d in shape):
            raise Refused(f"input '{name}': shape {shape} has a negative dim")
        elements = math.prod(shape)
        itemsize = ITEMSIZE.get(str(item.get("datatype", "")).upper(), 1)
        if elements * itemsize > max_input_bytes:
            raise Refused(
                f"input '{name}': shape {shape} declares {elements * itemsize} bytes, more than the "
                f"{max_input_bytes} an input may have (ge-plugin serve --max-input-bytes)"
            )
        if "data" in item:
            given = _count(item["data"])
            if given != elements:
                raise Refused(
                    f"input '{name}': shape {shape} holds {elements} elements but its data has {given}"
                )


def _count(data: object) -> int:
    """Elements in a JSON ``data`` value, flat or nested as the protocol allows."""
    if isinstance(data, list):
        return sum(_count(item) for item in data)
    return 1


class HttpGuard:
    """Serves ``listen`` from threads of its own and forwards to tritonserver's HTTP endpoint at ``upstream``."""

    def __init__(
        self,
        listen: tuple[str, int],
        upstream: tuple[str, int],
        *,
        max_input_bytes: int = MAX_INPUT_BYTES,
    ):
        self.listen = listen
        self.upstream = upstream
        self.max_input_bytes = max_input_bytes
        self.refused = 0  #: requests the guard answered itself
        self._lock = threading.Lock()
        self._stopping = False
        #: open client connections -> whether each waits for its next request (idle)
        self._clients: dict[socket.socket, bool] = {}
        self._server = socket.create_server(listen, reuse_port=False, backlog=128)
        self._thread = threading.Thread(target=self._accept, name="ge-plugin-http-guard", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:  # the listening socket was closed: the stop began
                return
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._stopping:
                    client.close()
                    continue
                self._clients[client] = True
            threading.Thread(
                target=self._connection, args=(client,), name="ge-plugin-http-guard", daemon=True
            ).start()

    def begin_stop(self) -> None:
        """Take no new connection and close the idle ones (a client waiting between requests), which would
        otherwise hold tritonserver's stop for its whole exit timeout; requests in flight are answered, and
        their connections close after the answer."""
        with self._lock:
            self._stopping = True
            idle = [client for client, waiting in self._clients.items() if waiting]
        _shut(self._server)
        self._server.close()
        for client in idle:
            _shut(client)

    def close(self) -> None:
        """Stop listening and close every client connection (requests in flight are cut)."""
        self.begin_stop()
        with self._lock:
            clients = list(self._clients)
        for client in clients:
            _shut(client)
        self._thread.join(timeout=10)

    # -- one client connection ---------------------------------------------------------------------

    def _connection(self, client: socket.socket) -> None:
        """Requests of one client, in turn: each checked if it is an inference request, then relayed to
        tritonserver, and the answer relayed back."""
        upstream: socket.socket | None = None
        incoming = _Stream(client)
        pipe = _Pipe()
        try:
            while True:
                head = incoming.head()
                if head is None:
                    return
                with self._lock:
                    self._clients[client] = False
                headers = _headers(head)
                head, length, whole = _framed(incoming, head, headers)
                checked = b""
                json_length = self._json_length(head, headers, length)
                if json_length:
                    checked = whole[:json_length] if whole is not None else incoming.exactly(json_length)
                    problem = self._problem(checked)
                    if problem is not None:
                        if whole is None:
                            incoming.discard(length - json_length)
                        with self._lock:
                            self.refused += 1
                        _answer(client, b"400 Bad Request", problem)
                        self._idle(client)
                        continue
                if upstream is None:
                    try:
                        upstream = socket.create_connection(self.upstream)
                    except OSError as exc:  # tritonserver not listening (yet, or any more)
                        _answer(client, b"503 Service Unavailable", f"tritonserver is not reachable: {exc}")
                        return
                    upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    outgoing = _Stream(upstream)
                upstream.sendall(head + checked)
                if whole is not None:
                    upstream.sendall(whole[len(checked) :])
                else:
                    incoming.relay(upstream, length - len(checked), pipe)
                response = outgoing.head()
                if response is None:
                    return
                response_headers = _headers(response)
                _relay_response(response, response_headers, outgoing, client, pipe)
                if _closes(head, headers) or _closes(response, response_headers) or self._stopping:
                    return
                self._idle(client)
        except (OSError, _BadMessage):
            return
        finally:
            with self._lock:
                self._clients.pop(client, None)
            client.close()
            if upstream is not None:
                upstream.close()
            pipe.close()

    def _idle(self, client: socket.socket) -> None:
        with self._lock:
            self._clients[client] = True
            stopping = self._stopping
        if stopping:
            _shut(client)

    @staticmethod
    def _json_length(head: bytes, headers: Mapping[bytes, bytes], length: int) -> int:
        """How many leading body bytes are the JSON the check reads: the whole body of a JSON inference
        request, the Inference-Header-Content-Length of a binary one, 0 for any other request."""
        line = head.split(b"\r\n", 1)[0].split(b" ")
        if len(line) < 2 or line[0] != b"POST" or not _INFER.match(line[1]) or not length:
            return 0
        if headers.get(b"content-encoding", b"identity") not in (b"identity", b""):
            return 0  # compressed: Triton inflates it itself
        given = headers.get(b"inference-header-content-length")
        if given is None:
            return length
        return min(int(given), length) if given.isdigit() else 0

    def _problem(self, text: bytes) -> str | None:
        try:
            header = json.loads(text)
        except (ValueError, UnicodeDecodeError):
            return None  # Triton answers it with its own 400
        if not isinstance(header, dict):
            return None
        try:
            check_infer_header(header, self.max_input_bytes)
        except Refused as exc:
            return str(exc)
        return None


class _BadMessage(Exception):
    pass


class _Pipe:
    """A pipe, as large as the system allows, that ``os.splice`` moves bytes through between two sockets."""

    def __init__(self) -> None:
        self.read_end, self.write_end = os.pipe()
        with contextlib.suppress(OSError):
            fcntl.fcntl(self.write_end, fcntl.F_SETPIPE_SZ, _PIECE)

    def close(self) -> None:
        os.close(self.read_end)
        os.close(self.write_end)


#: how much moves at once between the sockets
_PIECE = 1 << 20


class _Stream:
    """A socket read in two ways: heads and short parts into Python, bodies spliced on untouched. Bytes read
    past what was asked for are kept and handed on first."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buffer = bytearray()

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        if not data:
            return False
        self.buffer += data
        return True

    def head(self) -> bytes | None:
        """The start line and headers of the next message (with the blank line); None at a clean end."""
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end >= 0:
                head = bytes(self.buffer[: end + 4])
                del self.buffer[: end + 4]
                return head
            if len(self.buffer) > MAX_HEAD_BYTES:
                raise _BadMessage
            if not self._fill():
                if self.buffer:
                    raise _BadMessage
                return None

    def line(self) -> bytes:
        while (end := self.buffer.find(b"\r\n")) < 0:
            if not self._fill():
                raise _BadMessage
        data = bytes(self.buffer[: end + 2])
        del self.buffer[: end + 2]
        return data

    def exactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            if not self._fill():
                raise _BadMessage
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        return data

    def relay(self, sink: socket.socket, n: int, pipe: _Pipe) -> None:
        """``n`` bytes to ``sink``: what is buffered, then the rest spliced socket to socket."""
        first = bytes(self.buffer[:n])
        del self.buffer[: len(first)]
        if first:
            sink.sendall(first)
        n -= len(first)
        source = self.sock.fileno()
        target = sink.fileno()
        while n > 0:
            moved = os.splice(source, pipe.write_end, min(n, _PIECE))
            if moved == 0:
                raise _BadMessage
            left = moved
            while left:
                left -= os.splice(pipe.read_end, target, left)
            n -= moved

    def discard(self, n: int) -> None:
        while n > 0:
            if not self.buffer and not self._fill():
                raise _BadMessage
            taken = min(n, len(self.buffer))
            del self.buffer[:taken]
            n -= taken

    def rest(self) -> bytes:
        """Everything until the peer closes (a response framed by closing the connection)."""
        while self._fill():
            pass
        data = bytes(self.buffer)
        self.buffer.clear()
        return data


def _framed(stream: _Stream, head: bytes, headers: Mapping[bytes, bytes]) -> tuple[bytes, int, bytes | None]:
    """A request's head, body length, and the body itself when it came chunked (no Triton client sends
    one): that one is read whole and sent on with Content-Length, so tritonserver sees one framing (the
    new head differs from ``headers`` only in the framing headers)."""
    if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
        body = _read_chunked(stream)
        return _reframe(head, len(body)), len(body), body
    length = headers.get(b"content-length", b"0")
    if not length.isdigit():
        raise _BadMessage
    return head, int(length), None


def _relay_response(
    head: bytes, headers: Mapping[bytes, bytes], source: _Stream, client: socket.socket, pipe: _Pipe
) -> None:
    client.sendall(head)
    if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
        while True:  # verbatim, through the last (empty) chunk and the trailer
            size_line = source.line()
            client.sendall(size_line)
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                client.sendall(source.line())
                return
            source.relay(client, size + 2, pipe)
    length = headers.get(b"content-length")
    if length is not None:
        if not length.isdigit():
            raise _BadMessage
        source.relay(client, int(length), pipe)
        return
    status = head.split(b" ", 2)[1] if b" " in head else b""
    if not (status in (b"204", b"304") or status.startswith(b"1")):
        client.sendall(source.rest())


def _read_chunked(stream: _Stream) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int(stream.line().split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            stream.line()  # the (empty) trailer
            return b"".join(parts)
        parts.append(stream.exactly(size))
        stream.exactly(2)


def _reframe(head: bytes, length: int) -> bytes:
    lines = [
        line
        for line in head[:-4].split(b"\r\n")
        if not line.lower().startswith((b"transfer-encoding:", b"content-length:"))
    ]
    lines.append(b"Content-Length: " + str(length).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _headers(head: bytes) -> dict[bytes, bytes]:
    headers = {}
    for line in head.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return headers


def _closes(head: bytes, headers: Mapping[bytes, bytes]) -> bool:
    return headers.get(b"connection", b"").lower() == b"close" or head.startswith(b"HTTP/1.0")


def _answer(client: socket.socket, status: bytes, message: str) -> None:
    """An answer of the guard's own, in Triton's error body: ``{"error": message}``."""
    body = json.dumps({"error": message}).encode()
    client.sendall(
        b"HTTP/1.1 "
        + status
        + b"\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


def _shut(sock: socket.socket) -> None:
    """End a socket's traffic both ways, waking whoever waits on it."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
