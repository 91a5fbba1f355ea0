"""The front's client side: HTTP/1.1 connections framed by llhttp (httptools), on one asyncio event loop.

An idle connection costs a socket and a small object, no thread: the loop thread reads every connection,
and a request's check runs on a worker thread only when its body is large (``forward.LARGE_BODY``). The
connections are bounded: at the cap (and when accept() meets EMFILE) the connection idle the longest is
closed to make room, and the stdlib loop backs off and keeps accepting once fds are free again.

Each connection answers its requests in order (pipelining), one at a time: a request is parsed whole, then
checked and rewritten (``forward.prepare``), then sent on a pooled connection to tritonserver, whose
response is relayed as it arrives. ``Expect: 100-continue`` is answered here (the body is wanted once every
earlier response is out); tritonserver never sees it, so no 1xx of its own can be taken for an answer.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import re
import socket
import time
from typing import TYPE_CHECKING

import httptools

from ge_plugin.errors import Refused
from ge_plugin.serve.front.forward import LARGE_BODY, Incoming, Outgoing, prepare
from ge_plugin.serve.front.upstream import UpstreamLost

if TYPE_CHECKING:
    from ge_plugin.serve.front.server import Front
    from ge_plugin.serve.front.upstream import _Connection

log = logging.getLogger("ge_plugin.serve.front")

#: a request line and its headers may not be larger, nor have more headers (Triton's clients send a few)
MAX_HEAD_BYTES = 64 << 10
MAX_HEADERS = 100
#: tritonserver 2.51's own limits (measured: it closes the connection past them, which a client behind the
#: front would see as a 502): a request target of 8189 bytes, a header name or value of 8191
MAX_TARGET_BYTES = 8189
MAX_FIELD_BYTES = 8191
#: bytes fed to llhttp at a time while a head (or a chunked body's framing and trailers) is being read:
#: httptools builds a header by appending each piece, so a head is cut off at MAX_HEAD_BYTES + HEAD_STEP
#: raw bytes, whatever a single header would grow to
HEAD_STEP = 16 << 10
#: complete requests a client may have waiting behind the one being served before reading pauses
PIPELINE_DEPTH = 16
#: a request that stops arriving half-way is answered 408 and its connection closed after this long
MESSAGE_TIMEOUT_S = 30.0
#: response headers the front frames itself, never copied from tritonserver's response
_HOP = frozenset(
    {b"connection", b"keep-alive", b"transfer-encoding", b"content-length", b"te", b"trailer", b"upgrade"}
)
_REASONS = {
    400: b"Bad Request",
    405: b"Method Not Allowed",
    408: b"Request Timeout",
    413: b"Payload Too Large",
    414: b"URI Too Long",
    415: b"Unsupported Media Type",
    417: b"Expectation Failed",
    431: b"Request Header Fields Too Large",
    502: b"Bad Gateway",
    503: b"Service Unavailable",
    505: b"HTTP Version Not Supported",
}
#: ``Host``: uri-host [":" port] (RFC 9110 4.2.3, RFC 3986 3.2.2), empty allowed
_HOST = re.compile(rb"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~!$&'()*+,;=%-]*)(?::[0-9]*)?")
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class _Refusal:
    """A request answered by the front itself; ``close`` when the connection cannot go on after it."""

    __slots__ = ("close", "error")

    def __init__(self, error: Refused, close: bool):
        self.error = error
        self.close = close


class _Request:
    __slots__ = ("incoming", "keep_alive", "size", "version")

    def __init__(self, incoming: Incoming, version: str, keep_alive: bool, size: int):
        self.incoming = incoming
        self.version = version
        self.keep_alive = keep_alive
        self.size = size  #: body bytes held for it (the front's buffer budget)


#: tcpi_state of a socket whose peer answered with a reset (Linux's TCP_CLOSE)
_TCP_CLOSE = 7
#: after a half-close with an answer still to come, how soon the peer is looked at (then at every sweep)
PEER_CHECK_S = 0.05


class ClientConnection(asyncio.Protocol):
    """One client's connection (the protocol object asyncio drives)."""

    def __init__(self, front: Front):
        self.front = front
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.queue: collections.deque[_Request | _Refusal] = collections.deque()
        self.busy = False  #: a request is being answered
        self.in_flight: _Request | None = None
        self.reading = True
        self.closed = False
        #: the client half-closed: what it sent is answered, then the connection closes
        self.eof = False
        self.last_activity = time.monotonic()
        # the message being parsed
        self.in_message = False
        self.headers_done = False
        self.head_size = 0
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.body_size = 0
        self.body_left = 0  #: of a Content-Length body, bytes still to come (fed to llhttp at once)
        self.chunked_request = False
        self.unframed = (
            0  #: raw bytes since the message began or its body last moved (head, framing, trailers)
        )
        self.piece_body = 0  #: body bytes in the piece being fed
        self.refusal: _Refusal | None = None
        self.continue_due = False
        # the response being relayed
        self.upstream: _Connection | None = None
        self.version = "1.1"
        self.keep_alive = True
        self.chunked = False
        self.responding = False
        self.buffered: list[bytes] | None = None
        self.pending_head = b""
        self.appended = b""  #: metrics of ge-plugin serve's own, after tritonserver's
        self.write_paused = False
        # what this connection holds in memory (the front's budget), and how its writes move
        self.held = 0
        self.held_write = 0  #: the transport's write buffer when last looked at
        self.held_body = 0  #: body bytes of the message being parsed
        self.progress_at = 0.0  #: when the write buffer last shrank (or filled from empty)

    # -- asyncio ----------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.front.admit(self)

    def data_received(self, data: bytes) -> None:
        self.last_activity = time.monotonic()
        self.front.touch(self)
        if self.refusal is not None and self.refusal.close:
            return  # everything after a request that ends the connection is dropped
        try:
            self._feed(data)
        except Refused as exc:
            self._refuse_here(exc, close=True)
        except httptools.HttpParserUpgrade:
            self._refuse_here(Refused("protocol upgrades are not served"), close=True)
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            error = cause if isinstance(cause, Refused) else Refused("the request cannot be read")
            self._refuse_here(error, close=True)
        except httptools.HttpParserError as exc:
            self._refuse_here(Refused(f"malformed HTTP request: {exc}"), close=True)
        if len(self.queue) >= PIPELINE_DEPTH or (self.refusal is not None and self.refusal.close):
            self._pause_reading()

    def _feed(self, data: bytes) -> None:
        """``data`` to llhttp: a Content-Length body at once, anything else HEAD_STEP bytes at a time, so
        that a head (or a chunked body's framing and trailers) is refused once it is past MAX_HEAD_BYTES,
        however large the header being sent is, before httptools has built it up."""
        view = memoryview(data)
        offset = 0
        while offset < len(view):
            piece = view[offset : offset + (self.body_left or HEAD_STEP)]
            offset += len(piece)
            self.piece_body = 0
            self.parser.feed_data(piece)
            if self.refusal is not None and self.refusal.close:
                return
            if self.in_message:
                self.unframed += len(piece) - self.piece_body
                if self.unframed > MAX_HEAD_BYTES + HEAD_STEP:
                    what = "trailer fields" if self.headers_done else "request line and headers"
                    raise Refused(f"{what} are larger than {MAX_HEAD_BYTES} bytes", 431)

    def eof_received(self) -> bool:
        # a client that half-closes after its requests still gets every answer; the connection closes after
        # them. A client that closed for good looks the same until something is written to it, so when
        # nothing is being written a probe (an interim 100, which every HTTP/1.1 client skips) goes out,
        # and a reset in return ends the connection and its upstream one: tritonserver then cancels the
        # request instead of computing an answer for nobody
        self.eof = True
        if not self.busy and not self.queue:
            self.close()
        elif not self.responding and self._answering_version() == "1.1":
            self._write(CONTINUE)
            self.front.loop.call_later(PEER_CHECK_S, self.check_peer)
        return True

    def _answering_version(self) -> str:
        """The HTTP version of the request answered next (a 1.0 client gets no interim response)."""
        if self.in_flight is not None:
            return self.in_flight.version
        first = self.queue[0] if self.queue else None
        return first.version if isinstance(first, _Request) else "1.0"

    def check_peer(self) -> None:
        """After a half-close: end the connection if the client is gone (its side answered with a reset)."""
        if self.closed or self.transport is None:
            return
        sock = self.transport.get_extra_info("socket")
        try:
            state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
        except (OSError, AttributeError):
            return
        if state == _TCP_CLOSE:
            self.front.gone += 1
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        request = self.in_flight
        if request is not None and request.incoming.ticket and self.front.gone_clients is not None:
            self.front.gone_clients.add(request.incoming.ticket)  # no answer started: the backend drops it
        self._release()
        self.front.forget(self)
        if self.upstream is not None:
            self.upstream.close()  # the answer has nobody to go to

    def pause_writing(self) -> None:
        self.write_paused = True
        if self.upstream is not None:
            self.upstream.pause()

    def resume_writing(self) -> None:
        self.write_paused = False
        self.note_writes()
        if self.upstream is not None:
            self.upstream.resume()

    # -- llhttp callbacks (one message at a time) ------------------------------------------------------

    def on_message_begin(self) -> None:
        self.in_message = True
        self.headers_done = False
        self.head_size = 0
        self.url = b""
        self.headers = []
        self.body = []
        self.body_size = 0
        self.body_left = 0
        self.chunked_request = False
        self.unframed = 0
        self.refusal = None

    def on_url(self, url: bytes) -> None:
        self.url += url
        self._count_head(len(url))
        if len(self.url) > MAX_TARGET_BYTES:
            raise Refused(f"request target is longer than {MAX_TARGET_BYTES} bytes", 414)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value))
        if len(name) > MAX_FIELD_BYTES or len(value) > MAX_FIELD_BYTES:
            raise Refused(
                f"header {name[:40].decode('latin-1')!r} has a name or value longer than {MAX_FIELD_BYTES} bytes",
                431,
            )
        if self.headers_done:
            return  # a trailer field: it changes neither framing nor encoding (RFC 9110 6.5.1), so it is dropped
        self.headers.append((name.lower(), value))
        if len(self.headers) > MAX_HEADERS:
            raise Refused(f"more than {MAX_HEADERS} headers", 431)

    def _count_head(self, size: int) -> None:
        self.head_size += size
        if self.head_size > MAX_HEAD_BYTES:
            raise Refused(f"request line and headers are larger than {MAX_HEAD_BYTES} bytes", 431)

    def on_headers_complete(self) -> None:
        self.headers_done = True
        method = self.parser.get_method().decode("latin-1")
        version = self.parser.get_http_version()
        length = None
        expect = None
        hosts = []
        for name, value in self.headers:
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                self.chunked_request = True
                if value.strip().lower() != b"chunked":
                    self.refusal = _Refusal(Refused(f"Transfer-Encoding {value!r} is not served"), True)
            elif name == b"expect":
                expect = value.strip().lower()
            elif name == b"host":
                hosts.append(value.strip())
        limit = self.front.rules.max_body_bytes
        if version not in ("1.0", "1.1"):
            status = 505 if version >= "2" else 400
            self.refusal = _Refusal(Refused(f"HTTP/{version} requests are not served", status), True)
        elif self.refusal is not None:
            pass
        elif self.parser.should_upgrade():
            self.refusal = _Refusal(Refused("protocol upgrades are not served"), True)
        elif method not in ("GET", "POST"):
            self.refusal = _Refusal(Refused(f"method {method} is not served", 405), True)
        elif length is not None and length > limit:
            self.refusal = _Refusal(
                Refused(f"request body of {length} bytes is larger than {limit}", 413), True
            )
        elif (host_error := _host_error(hosts, version)) is not None:
            self.refusal = _Refusal(Refused(host_error), False)
        elif expect is not None and expect != b"100-continue":
            self.refusal = _Refusal(Refused(f"expectation {expect!r} cannot be met", 417), True)
        elif expect is not None and length != 0 and version == "1.1":
            if self.busy or self.queue:
                self.continue_due = True  # after the earlier answers, or it would read as theirs
            else:
                self._write(CONTINUE)
        if self.refusal is not None:
            self._enqueue(self.refusal)
        elif length is not None and not self.chunked_request:
            self.body_left = length

    def on_body(self, body: bytes) -> None:
        self.unframed = 0
        self.piece_body += len(body)
        if self.body_left:
            self.body_left -= len(body)
        if self.refusal is not None:
            return
        self.body_size += len(body)
        if self.body_size > self.front.rules.max_body_bytes:
            limit = self.front.rules.max_body_bytes
            self.refusal = _Refusal(Refused(f"request body is larger than {limit} bytes", 413), True)
            self._enqueue(self.refusal)
            self.body = []
            self._hold(-self.held_body)
            self.held_body = 0
            return
        self.body.append(body)
        self.held_body += len(body)
        self._hold(len(body))

    def on_message_complete(self) -> None:
        self.in_message = False
        self.continue_due = False
        self.body_left = 0
        size, self.held_body = self.held_body, 0
        if self.refusal is not None:
            self._hold(-size)
            return  # already queued
        body = self.body[0] if len(self.body) == 1 else b"".join(self.body)
        self.body = []
        version = self.parser.get_http_version()
        # HTTP/1.0 has no chunked coding: a 1.0 request framed with it closes after its answer (RFC 9112 6.1)
        keep_alive = self.parser.should_keep_alive() and not (version == "1.0" and self.chunked_request)
        incoming = Incoming(self.parser.get_method().decode("latin-1"), self.url, self.headers, body)
        self._enqueue(_Request(incoming, version, keep_alive, size))

    # -- answering, in order ---------------------------------------------------------------------------

    def _refuse_here(self, error: Refused, close: bool) -> None:
        if self.refusal is None or not self.refusal.close:
            self.refusal = _Refusal(error, close)
            self._enqueue(self.refusal)

    def _enqueue(self, item: _Request | _Refusal) -> None:
        self.queue.append(item)
        if not self.busy:
            self.busy = True
            self.front.loop.create_task(self._serve())

    async def _serve(self) -> None:
        try:
            while self.queue and not self.closed:
                item = self.queue.popleft()
                if isinstance(item, _Refusal):
                    self._answer_error(item.error, close=item.close or (self.eof and not self.queue))
                    if item.close:
                        break
                elif not await self._forward(item):
                    break
        except Exception:  # a bug must cost this connection, never the loop
            log.exception("ge-plugin front: connection failed")
            self.close()
        self.busy = False
        for item in self.queue:  # never to be answered (the connection is closing): let their bodies go
            if isinstance(item, _Request):
                self._let_go(item)
        if self.closed:
            return
        if self.front.stopping or not self.keep_alive or self.eof:
            self.close()
            return
        self.front.touch(self)
        if self.continue_due and self.in_message:
            self.continue_due = False
            self._write(CONTINUE)
        if not self.reading and self.transport is not None:
            self.reading = True
            self.transport.resume_reading()

    async def _forward(self, request: _Request) -> bool:
        """Answer one request; False when the connection is done."""
        self.in_flight = request
        if self.front.gone_clients is not None:
            request.incoming.ticket = next(self.front.tickets)
        self.version = request.version
        self.keep_alive = self.keep_alive and request.keep_alive
        try:
            if self.front.text is not None and self.front.text.wants(request.incoming):
                return await self.front.text.answer(
                    self, request.incoming
                )  # text in, text out (front/openai.py)
            if len(request.incoming.body) > LARGE_BODY:
                outgoing = await self.front.loop.run_in_executor(
                    self.front.executor, prepare, request.incoming, self.front.rules
                )
            else:
                outgoing = prepare(request.incoming, self.front.rules)
            self.appended = b""
            if self.front.metrics_tail is not None and outgoing.head.startswith(
                (b"GET /metrics ", b"GET /metrics?")
            ):
                self.appended = self.front.metrics_tail()
            await self._exchange(outgoing)
        except Refused as exc:
            self._answer_error(exc, close=not self.keep_alive or (self.eof and not self.queue))
            return self.keep_alive
        except UpstreamLost as exc:
            if exc.started:  # part of an answer went out: the client must see it was cut
                self.close()
                return False
            self._answer_error(Refused(str(exc), 502), close=not self.keep_alive)
        finally:
            self.upstream = None
            self.in_flight = None
            self.responding = False
            self._let_go(request)
        return self.keep_alive and not self.closed

    async def _exchange(self, outgoing: Outgoing) -> None:
        def attach(connection: _Connection) -> None:
            self.upstream = connection
            if self.write_paused:
                connection.pause()

        await self.front.pool.exchange(outgoing, self, attach)

    # the Sink interface, for the upstream connection
    def response_head(
        self, status: int, reason: bytes, headers: list[tuple[bytes, bytes]], length: int | None
    ) -> None:
        self.responding = True
        if self.in_flight is not None:
            self.in_flight.incoming.ticket = 0  # computed: nothing left to drop
        lines = [b"HTTP/1.1 %d " % status + reason]
        lines += [name + b": " + value for name, value in headers if name not in _HOP]
        if status != 200 or any(name == b"content-encoding" for name, _ in headers):
            self.appended = b""
        if length is not None:
            length += len(self.appended)
        self.chunked = False
        self.buffered = None
        if status in (204, 304):
            pass  # no body, and no framing header says otherwise
        elif length is not None:
            lines.append(b"Content-Length: %d" % length)
        elif self.version == "1.1":
            self.chunked = True
            lines.append(b"Transfer-Encoding: chunked")
        else:
            self.buffered = []  # an HTTP/1.0 client reads no chunks: the length once it is known
        if not self.keep_alive or self.front.stopping or (self.eof and not self.queue):
            self.keep_alive = False
            lines.append(b"Connection: close")
        elif self.version == "1.0":
            lines.append(b"Connection: keep-alive")
        self.pending_head = b"\r\n".join(lines)
        if self.buffered is None:
            self.pending_head += b"\r\n\r\n"

    def response_body(self, data: bytes | memoryview) -> bool:
        """Part of the body: bytes, or a view of the upstream connection's buffer. True when some of it
        waits in the transport's write buffer (the view's buffer must not be reused then)."""
        if self.buffered is not None:
            self.buffered.append(bytes(data))
            self._hold(len(data))
            return False
        if self.chunked:
            data = b"%x\r\n" % len(data) + data + b"\r\n"
        if self.pending_head:
            head, self.pending_head = self.pending_head, b""
            if len(data) < 65536:
                self._write(head + data)
                return False
            self._write(head)
        self._write(data)
        return self.held_write > 0

    def response_end(self) -> None:
        if self.appended:
            appended, self.appended = self.appended, b""
            self.response_body(appended)
        if self.buffered is not None:
            body = b"".join(self.buffered)
            self.buffered = None
            self._hold(-len(body))
            self.pending_head += b"\r\nContent-Length: %d\r\n\r\n" % len(body)
            self.response_body(body)
        elif self.chunked:
            self.response_body(b"")  # the last chunk, 0 bytes
        elif self.pending_head:
            head, self.pending_head = self.pending_head, b""
            self._write(head)
        self.responding = False

    def _answer_error(self, error: Refused, close: bool) -> None:
        """Triton's error answer: ``{"error": message}`` with the status the front chose."""
        self.front.count_refused(error)
        body = json.dumps({"error": str(error)}).encode()
        head = b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n" % (
            error.status,
            _REASONS.get(error.status, b"Error"),
            len(body),
        )
        if close or self.front.stopping:
            head += b"Connection: close\r\n"
        self._write(head + b"\r\n" + body)
        if close or self.front.stopping:
            self.keep_alive = False
            self.close()

    # -- what it holds ---------------------------------------------------------------------------------

    def _let_go(self, request: _Request) -> None:
        self._hold(-request.size)
        request.size = 0

    def _hold(self, delta: int) -> None:
        if delta:
            self.held += delta
            self.front.hold(delta)

    def note_writes(self) -> int:
        """Look at the transport's write buffer: count it in what is held, and note progress (it shrank,
        or filled from empty). Returns its size."""
        size = self.transport.get_write_buffer_size() if self.transport is not None and not self.closed else 0
        if size < self.held_write or (size and not self.held_write):
            self.progress_at = time.monotonic()
        if size and not self.held_write:
            self.front.writing[self] = None
        elif not size:
            self.front.writing.pop(self, None)
        self._hold(size - self.held_write)
        self.held_write = size
        return size

    def _release(self) -> None:
        """Everything this connection held, let go (it is closed: buffers and queued bodies go with it)."""
        self._hold(-self.held)
        self.held_write = self.held_body = 0
        self.front.writing.pop(self, None)
        for item in (*self.queue, self.in_flight):
            if isinstance(item, _Request):
                item.size = 0  # counted in self.held, let go above

    # -- housekeeping ----------------------------------------------------------------------------------

    def _write(self, data: bytes | memoryview) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(data)
            self.note_writes()

    def _pause_reading(self) -> None:
        if self.reading and self.transport is not None and not self.closed:
            self.reading = False
            self.transport.pause_reading()

    @property
    def idle(self) -> bool:
        """Nothing to answer: closing it loses no request (a half-sent one is the client's to send again)."""
        return not self.busy and not self.queue

    def timed_out(self, now: float) -> bool:
        return self.in_message and not self.busy and now - self.last_activity > MESSAGE_TIMEOUT_S

    def close(self) -> None:
        """Close after what is written has gone out."""
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.close()

    def abort(self) -> None:
        """Close now, dropping what is not written yet."""
        if self.transport is not None:
            self.closed = True
            self.transport.abort()
            self._release()


def _host_error(hosts: list[bytes], version: str) -> str | None:
    """What is wrong with a request's ``Host`` fields (RFC 9112 3.2: answered 400), or None."""
    if len(hosts) > 1:
        return f"Host appears {len(hosts)} times"
    if not hosts:
        return "an HTTP/1.1 request needs a Host header" if version == "1.1" else None
    if not _HOST.fullmatch(hosts[0]):
        return f"Host {hosts[0][:80].decode('latin-1')!r} is not a host[:port]"
    return None
