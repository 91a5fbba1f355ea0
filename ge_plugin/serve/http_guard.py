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

It also owns the client connections, so a stop can close idle keep-alive ones at once instead of waiting out
tritonserver's exit timeout for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
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
    """Serves ``listen`` in a thread of its own and forwards to tritonserver's HTTP endpoint at ``upstream``."""

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
        self._stopping = False
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._clients: set[asyncio.StreamWriter] = set()
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="ge-plugin-http-guard", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._connection, *self.listen, reuse_address=True)
            )
        except OSError as exc:
            self._error = exc
            self._started.set()
            return
        self._started.set()
        self._loop.run_forever()
        self._loop.close()

    def close(self) -> None:
        """Stop listening and close every client connection (requests in flight are cut)."""
        server = self._server
        if server is None or self._loop.is_closed():
            return

        async def shut() -> None:
            server.close()
            for writer in list(self._clients):
                writer.close()
            await server.wait_closed()

        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def begin_stop(self) -> None:
        """Take no new connection and close the idle ones (a client waiting between requests), which would
        otherwise hold tritonserver's stop for its whole exit timeout; requests in flight are answered, and
        their connections close after the answer."""
        server = self._server
        if server is None or self._loop.is_closed():
            return

        def stop_accepting() -> None:
            self._stopping = True
            server.close()
            for writer in list(self._clients):
                if getattr(writer, "ge_idle", False):
                    writer.close()

        self._loop.call_soon_threadsafe(stop_accepting)

    # -- one client connection ---------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Requests of one client, in turn: each checked if it is an inference request, then relayed to
        tritonserver, and the answer relayed back; bodies stream through in pieces, not held whole, except
        the JSON part the check reads."""
        self._clients.add(writer)
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                writer.ge_idle = True  # type: ignore[attr-defined]
                head = await _read_head(reader)
                writer.ge_idle = False  # type: ignore[attr-defined]
                if head is None:
                    return
                head, length, whole = await _framed(reader, head)
                checked = b""
                json_length = self._json_length(head, length)
                if json_length:
                    checked = (
                        whole[:json_length] if whole is not None else await reader.readexactly(json_length)
                    )
                    problem = self._problem(checked)
                    if problem is not None:
                        if whole is None:
                            await _discard(reader, length - json_length)
                        self.refused += 1
                        await _answer(writer, b"400 Bad Request", problem)
                        continue
                if upstream is None:
                    try:
                        upstream = await asyncio.open_connection(*self.upstream)
                    except OSError as exc:  # tritonserver not listening (yet, or any more)
                        await _answer(
                            writer, b"503 Service Unavailable", f"tritonserver is not reachable: {exc}"
                        )
                        return
                upstream[1].write(head + checked)
                if whole is not None:
                    upstream[1].write(whole[len(checked) :])
                else:
                    await _relay(reader, upstream[1], length - len(checked))
                response = await _read_head(upstream[0])
                if response is None:
                    return
                await self._relay_response(response, upstream[0], writer)
                if _closes(head) or _closes(response) or self._stopping:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, _BadMessage):
            return
        finally:
            self._clients.discard(writer)
            writer.close()
            if upstream is not None:
                upstream[1].close()

    @staticmethod
    async def _relay_response(
        head: bytes, source: asyncio.StreamReader, client: asyncio.StreamWriter
    ) -> None:
        client.write(head)
        headers = _headers(head)
        if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            await _relay_chunks(source, client)
            return
        length = headers.get(b"content-length")
        if length is not None:
            if not length.isdigit():
                raise _BadMessage
            await _relay(source, client, int(length))
            return
        status = head.split(b" ", 2)[1] if b" " in head else b""
        if not (status in (b"204", b"304") or status.startswith(b"1")):
            client.write(await source.read())  # a response framed by closing the connection
        await client.drain()

    @staticmethod
    def _json_length(head: bytes, length: int) -> int:
        """How many leading body bytes are the JSON the check reads: the whole body of a JSON inference
        request, the Inference-Header-Content-Length of a binary one, 0 for any other request."""
        line = head.split(b"\r\n", 1)[0].split(b" ")
        if len(line) < 2 or line[0] != b"POST" or not _INFER.match(line[1]) or not length:
            return 0
        headers = _headers(head)
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


#: how much of a body is held at once while it streams through
_PIECE = 1 << 20


async def _read_head(reader: asyncio.StreamReader) -> bytes | None:
    """The start line and headers of the next message (with the blank line); None at a clean end."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise _BadMessage from None
        return None
    except asyncio.LimitOverrunError:
        raise _BadMessage from None
    if len(head) > MAX_HEAD_BYTES:
        raise _BadMessage
    return head


async def _framed(reader: asyncio.StreamReader, head: bytes) -> tuple[bytes, int, bytes | None]:
    """A request's head, body length, and the body itself when it came chunked (no Triton client sends
    one): that one is read whole and sent on with Content-Length, so tritonserver sees one framing."""
    headers = _headers(head)
    if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
        body = await _read_chunked(reader)
        return _reframe(head, len(body)), len(body), body
    length = headers.get(b"content-length", b"0")
    if not length.isdigit():
        raise _BadMessage
    return head, int(length), None


async def _relay(source: asyncio.StreamReader, sink: asyncio.StreamWriter, length: int) -> None:
    while length > 0:
        piece = await source.read(min(length, _PIECE))
        if not piece:
            raise asyncio.IncompleteReadError(b"", length)
        sink.write(piece)
        await sink.drain()
        length -= len(piece)
    await sink.drain()


async def _relay_chunks(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """A chunked body, verbatim, through its last (empty) chunk and trailer."""
    while True:
        size_line = await source.readuntil(b"\r\n")
        sink.write(size_line)
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            sink.write(await source.readuntil(b"\r\n"))
            await sink.drain()
            return
        await _relay(source, sink, size + 2)


async def _discard(reader: asyncio.StreamReader, length: int) -> None:
    while length > 0:
        piece = await reader.read(min(length, _PIECE))
        if not piece:
            raise asyncio.IncompleteReadError(b"", length)
        length -= len(piece)


class _BadMessage(Exception):
    pass


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            await reader.readuntil(b"\r\n")  # the (empty) trailer
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


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


def _closes(head: bytes) -> bool:
    return _headers(head).get(b"connection", b"").lower() == b"close" or head.startswith(b"HTTP/1.0")


async def _answer(writer: asyncio.StreamWriter, status: bytes, message: str) -> None:
    """An answer of the guard's own, in Triton's error body: ``{"error": message}``."""
    body = json.dumps({"error": message}).encode()
    writer.write(
        b"HTTP/1.1 "
        + status
        + b"\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )
    await writer.drain()
