"""Connections from the front to tritonserver's own HTTP endpoint: a pool of keep-alive connections, one
request at a time on each, responses framed by llhttp and handed to the client side as they arrive."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Protocol

import httptools

from ge_plugin.errors import Refused
from ge_plugin.serve.front.forward import Outgoing

#: idle connections kept for the next request; more are opened while more requests are in flight
POOL_IDLE = 64
#: each connection's receive buffer
RECEIVE_BYTES = 256 << 10


class Sink(Protocol):
    """Where a response goes (the client connection that asked)."""

    def response_head(
        self, status: int, reason: bytes, headers: list[tuple[bytes, bytes]], length: int | None
    ) -> None: ...

    def response_body(self, data: bytes | memoryview) -> bool:
        """Whether some of ``data`` waits in the client's write buffer (it was not all sent at once)."""
        ...

    def response_end(self) -> None: ...


class UpstreamLost(Exception):
    """tritonserver closed the connection, or sent what is not HTTP, before the response was complete."""

    def __init__(self, message: str, started: bool):
        super().__init__(message)
        self.started = started  #: whether part of the response already went to the client


class _Connection(asyncio.BufferedProtocol):
    """One connection to tritonserver. Heads are framed by llhttp; the body of a ``Content-Length`` answer,
    once its head is parsed, goes from this connection's receive buffer to the client as it is (a
    memoryview: no copy in Python, no parser turn), so a 2 MiB answer costs a few reads and writes."""

    def __init__(self, pool: UpstreamPool):
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.buffer = memoryview(bytearray(RECEIVE_BYTES))
        self.parser = httptools.HttpResponseParser(self)
        self.sink: Sink | None = None
        self.done: asyncio.Future[bool] | None = None
        self.started = False
        self.interim = False
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.remaining = 0  #: body bytes still to come, relayed without the parser when ``raw``
        self.raw = False
        self.keep_alive = True

    # -- asyncio ----------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        data = self.buffer[:nbytes]
        if self.raw:
            taken = min(nbytes, self.remaining)
            self.remaining -= taken
            if self.sink is not None and self.sink.response_body(data[:taken]):
                # the client's transport keeps what it could not send; from Python 3.12 on it may keep
                # this very view, so the next read goes to a new buffer
                self.buffer = memoryview(bytearray(RECEIVE_BYTES))
            if self.remaining:
                return
            self.raw = False
            self.parser = httptools.HttpResponseParser(self)  # the body never went through the old one
            self._complete(self.keep_alive)
            data = data[taken:]
            if not data:
                return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(f"tritonserver's response does not parse: {exc}")
            self.close()
            return
        if self.remaining > 0 and self.sink is not None:
            self.raw = True

    def connection_lost(self, exc: Exception | None) -> None:
        self.pool.forget(self)
        self._fail("tritonserver closed the connection before its response was complete")

    # -- llhttp -----------------------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self.reason = b""
        self.headers = []

    def on_status(self, status: bytes) -> None:
        self.reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        self.interim = 100 <= status < 200
        if self.interim or self.sink is None:
            return  # a 1xx is never the answer: the final response follows
        length = None
        for name, value in self.headers:
            if name == b"content-length":
                length = int(value)
        self.started = True
        self.keep_alive = self.parser.should_keep_alive()
        self.sink.response_head(status, self.reason, self.headers, length)
        # the rest of this read goes through llhttp; what the body still lacks after it goes round it
        self.remaining = length or 0

    def on_body(self, body: bytes) -> None:
        if self.sink is not None and not self.interim:
            if self.remaining > 0:  # a Content-Length body (chunked ones keep 0)
                self.remaining -= len(body)
            self.sink.response_body(body)

    def on_message_complete(self) -> None:
        if self.interim:
            self.interim = False
            return
        self.remaining = 0
        self._complete(self.parser.should_keep_alive())

    def _complete(self, keep_alive: bool) -> None:
        if self.sink is not None:
            self.sink.response_end()
        done, self.done, self.sink = self.done, None, None
        if done is not None and not done.done():
            done.set_result(keep_alive)

    # -- the pool's side -------------------------------------------------------------------------------

    def send(self, request: Outgoing, sink: Sink) -> asyncio.Future[bool]:
        assert self.transport is not None
        self.sink = sink
        self.started = False
        self.done = asyncio.get_running_loop().create_future()
        if len(request.json) + len(request.tail) < 65536:
            self.transport.write(request.head + request.json + request.tail)
        else:
            self.transport.write(request.head + request.json)
            if request.tail:
                self.transport.write(request.tail)
        return self.done

    def _fail(self, message: str) -> None:
        done, self.done, self.sink = self.done, None, None
        if done is not None and not done.done():
            done.set_exception(UpstreamLost(message, self.started))

    def pause(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class UpstreamPool:
    """Keep-alive connections to one tritonserver HTTP endpoint, shared by every client connection."""

    def __init__(self, address: tuple[str, int]):
        self.address = address
        self.idle: list[_Connection] = []
        self.opened = 0  #: connections opened so far (a test reads it to see reuse)
        #: after close() no connection is kept: tritonserver's stop waits for every open HTTP connection
        self.closed = False

    async def exchange(
        self,
        request: Outgoing,
        sink: Sink,
        on_connection: Callable[[_Connection], None] | None = None,
    ) -> None:
        """Send ``request`` and hand its response to ``sink``; Refused (503) when tritonserver cannot be
        reached, UpstreamLost when it went away mid-answer. ``on_connection`` learns the connection (for
        flow control) before the request goes out."""
        connection = None
        while self.idle:
            candidate = self.idle.pop()
            if candidate.transport is not None and not candidate.transport.is_closing():
                connection = candidate
                break
        if connection is None:
            loop = asyncio.get_running_loop()
            try:
                _, connection = await loop.create_connection(lambda: _Connection(self), *self.address)
            except OSError as exc:
                raise Refused(f"tritonserver is not reachable: {exc}", 503) from None
            self.opened += 1
        if on_connection is not None:
            on_connection(connection)
        try:
            keep = await connection.send(request, sink)
        except BaseException:
            connection.close()
            raise
        if keep and not self.closed and len(self.idle) < POOL_IDLE:
            connection.resume()
            self.idle.append(connection)
        else:
            connection.close()

    def forget(self, connection: _Connection) -> None:
        with contextlib.suppress(ValueError):
            self.idle.remove(connection)

    def shutdown(self) -> None:
        self.close()

    def close(self) -> None:
        self.closed = True
        for connection in self.idle:
            connection.close()
        self.idle.clear()
