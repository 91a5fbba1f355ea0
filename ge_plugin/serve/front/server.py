"""The front itself: a listening socket, its event loop on one thread, the upstream pool, the bounds."""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import itertools
import logging
import resource
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ge_plugin.errors import Refused, ServeError
from ge_plugin.gone_clients import GoneClients
from ge_plugin.serve.front.forward import Rules
from ge_plugin.serve.front.transport import ClientConnection
from ge_plugin.serve.front.upstream import UpstreamPool

if TYPE_CHECKING:
    from ge_plugin.serve.front.openai import TextService

log = logging.getLogger("ge_plugin.serve.front")
T = TypeVar("T")

#: client connections at most (also bounded by the open-files limit: see ``connection_cap``)
MAX_CONNECTIONS = 4096
#: how often timed-out half-sent requests and stalled writes are looked for
SWEEP_S = 1.0
#: a client whose answer has not moved out of the front for this long is closed (``--write-timeout``)
WRITE_TIMEOUT_S = 30.0
#: the most the front holds for all its clients together (``--max-buffered-bytes``): request bodies being
#: read or waiting their turn, and answers waiting for slow readers; past it, the slowest readers are closed
MAX_BUFFERED_BYTES = 1 << 30
_ACCEPT_ERRORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def connection_cap(wanted: int = MAX_CONNECTIONS) -> int:
    """``wanted``, or fewer so that every client connection and one upstream connection each fit under the
    open-files limit with room to spare for the rest of the process (tritonserver's client, logs)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    spare = min(64, soft // 4)
    return max(1, min(wanted, (soft - spare) // 2))


class Front:
    """Serves HTTP on ``listen`` from an event loop of its own and forwards to tritonserver at ``upstream``.

    ``refused`` counts the requests it refused (4xx: the policy's and the framing's refusals)."""

    def __init__(
        self,
        listen: tuple[str, int],
        upstream: tuple[str, int],
        *,
        rules: Rules | None = None,
        max_connections: int = MAX_CONNECTIONS,
        metrics_tail: Callable[[], bytes] | None = None,
        text: TextService | None = None,
        write_timeout_s: float = WRITE_TIMEOUT_S,
        max_buffered_bytes: int = MAX_BUFFERED_BYTES,
        gone_clients: GoneClients | None = None,
    ):
        self.listen = listen
        self.upstream = upstream
        self.rules = rules or Rules(upstream_host=f"{upstream[0]}:{upstream[1]}".encode())
        self.max_connections = connection_cap(max_connections)
        #: Prometheus text appended to every ``GET /metrics`` answer (the front on the metrics port)
        self.metrics_tail = metrics_tail
        #: the OpenAI endpoints and text_input, for models with a tokenizer (None: every request forwarded)
        self.text = text
        if max_buffered_bytes < self.rules.max_body_bytes:
            raise ServeError(
                f"the front's buffer budget ({max_buffered_bytes} bytes) is smaller than the largest request "
                f"body it takes ({self.rules.max_body_bytes} bytes)"
            )
        #: where the tickets of inference requests whose client left before the answer go (the backend drops
        #: them before they run); None: no tickets are given
        self.gone_clients = gone_clients
        self.tickets = itertools.count(1)
        self.write_timeout_s = write_timeout_s
        self.max_buffered_bytes = max_buffered_bytes
        self.refused = 0
        self.evicted = 0  #: idle connections closed to make room
        self.held = 0  #: bytes held for clients (ClientConnection.held, summed)
        self.shed = 0  #: connections closed because the budget was spent (the slowest readers first)
        self.write_timeouts = 0  #: connections closed because their answer did not move for write_timeout_s
        self.gone = 0  #: half-closed connections found reset by the client (their request was dropped)
        #: connections with bytes in their write buffer, in the order they filled
        self.writing: dict[ClientConnection, None] = {}
        self._shed_due = False
        self.stopping = False
        self.connections: dict[ClientConnection, None] = {}  #: in order of last activity
        self.pool = UpstreamPool(upstream)
        self.executor = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="ge-plugin-front-check")
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(self._loop_error)
        self._socket = socket.create_server(listen, backlog=1024)
        self._socket.setblocking(False)
        self._server: asyncio.AbstractServer | None = None
        started = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(started,), name="ge-plugin-front", daemon=True
        )
        self._thread.start()
        started.wait()

    # -- the loop's thread ----------------------------------------------------------------------------

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self._server = self.loop.run_until_complete(
                self.loop.create_server(lambda: ClientConnection(self), sock=self._socket)
            )
        finally:
            started.set()
        self.loop.call_later(SWEEP_S, self._sweep)
        try:
            self.loop.run_forever()
        finally:
            for connection in list(self.connections):
                connection.abort()
            self.pool.shutdown()
            self.loop.run_until_complete(asyncio.sleep(0))  # let the transports close their sockets
            self.loop.close()

    def admit(self, connection: ClientConnection) -> None:
        """A new connection: over the cap, the one idle the longest makes room (503 when none is idle)."""
        if self.stopping:
            connection.abort()
            return
        if len(self.connections) >= self.max_connections and not self._evict():
            self.connections[connection] = None
            connection._answer_error(Refused(f"more than {self.max_connections} connections", 503), True)
            return
        self.connections[connection] = None

    def _evict(self) -> bool:
        for candidate in self.connections:
            if candidate.idle:
                self.evicted += 1
                candidate.abort()
                self.connections.pop(candidate, None)
                return True
        return False

    def touch(self, connection: ClientConnection) -> None:
        if connection in self.connections:
            self.connections.pop(connection)
            self.connections[connection] = None

    def forget(self, connection: ClientConnection) -> None:
        self.connections.pop(connection, None)

    def count_refused(self, error: Refused) -> None:
        if error.status < 500:  # not "tritonserver is not reachable", which is no fault of the request
            self.refused += 1

    def hold(self, delta: int) -> None:
        """A connection holds ``delta`` bytes more (or fewer); over the budget, the shedding is due."""
        self.held += delta
        if self.held > self.max_buffered_bytes and not self._shed_due:
            self._shed_due = True
            self.loop.call_soon(self._shed)

    def _shed(self) -> None:
        """Close connections until what is held fits the budget: first those whose answers have waited the
        longest for the client to read them, then the ones holding the most."""
        self._shed_due = False
        for connection in list(self.writing):
            connection.note_writes()
        while self.held > self.max_buffered_bytes:
            holding = [c for c in self.connections if c.held > 0 and not c.closed]
            if not holding:
                break
            victim = min(
                holding,
                key=lambda c: (0, c.progress_at, 0) if c.held_write else (1, 0.0, -c.held),
            )
            self.shed += 1
            log.warning(
                "ge-plugin front: %d bytes held for clients, more than %d: closing a connection that holds %d",
                self.held,
                self.max_buffered_bytes,
                victim.held,
            )
            victim.abort()

    def _sweep(self) -> None:
        now = time.monotonic()
        for connection in [c for c in self.connections if c.timed_out(now)]:
            connection._answer_error(Refused("the request stopped arriving", 408), True)
        for connection in list(self.writing):
            if connection.note_writes() and now - connection.progress_at > self.write_timeout_s:
                self.write_timeouts += 1
                connection.abort()
        for connection in [c for c in self.connections if c.eof and c.busy]:
            connection.check_peer()
        if not self.loop.is_closed():
            self.loop.call_later(SWEEP_S, self._sweep)

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if isinstance(error, OSError) and error.errno in _ACCEPT_ERRORS:
            # the stdlib loop stops accepting for a second and then starts again; make room meanwhile
            log.warning("ge-plugin front: accept failed (%s); closing an idle connection", error)
            self._evict()
            return
        loop.default_exception_handler(context)

    # -- any thread ----------------------------------------------------------------------------------

    def begin_stop(self) -> None:
        """Take no new connection and close the idle ones (which would hold tritonserver's stop for its whole
        exit timeout); requests in flight are answered, and their connections close after the answer."""
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._begin_stop)

    def _begin_stop(self) -> None:
        self.stopping = True
        if self._server is not None:
            self._server.close()
        for connection in list(self.connections):
            if connection.idle:
                connection.close()
        self.pool.close()  # tritonserver's stop waits for every open HTTP connection, pooled ones too

    def close(self) -> None:
        """Stop listening and close every client connection (requests in flight are cut)."""
        if self._thread.is_alive():
            self.begin_stop()
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)
        self.executor.shutdown(wait=False)
        self._socket.close()

    def run(self, function: Callable[..., T], *args: object) -> T:
        """``function(*args)`` on the loop's thread, its result here (tests read the loop's state so)."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def call() -> None:
            try:
                future.set_result(function(*args))
            except BaseException as exc:
                future.set_exception(exc)

        self.loop.call_soon_threadsafe(call)
        return future.result(timeout=10)
