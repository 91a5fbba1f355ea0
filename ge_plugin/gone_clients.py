"""Which HTTP requests lost their client: tickets the front writes and the ``ge`` backend reads.

tritonserver 2.51 cancels a request only when a gRPC client (or the C API) asks; an HTTP client that leaves,
or the front closing its upstream connection, cancels nothing, and the request is computed for nobody
(measured: ``is_cancelled()`` stays false). So ``ge-plugin serve``'s front gives each inference request it
forwards a ticket (the request parameter ``ge_front_ticket``, set by the front, whatever a client sent) and,
when that request's client is gone before its answer started, writes the ticket here: a small ring in
/dev/shm, one writer (the front's loop thread), read by every stub of the server before a batch runs.

A ticket in the ring only ever names a request whose client left: a client that sends a ticket of its own
(direct to tritonserver) can at most have its own request dropped.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterable
from pathlib import Path

import numpy as np

#: the environment variable that tells the stubs where the ring is
ENV = "GE_PLUGIN_GONE_CLIENTS"
#: the request parameter that carries a request's ticket
PARAMETER = "ge_front_ticket"
#: tickets kept: the most recent gone requests (far more than could wait in any model's queue)
SLOTS = 4096
_HEADER = struct.Struct("<Q")  # tickets written so far
SIZE = _HEADER.size + SLOTS * 8


class GoneClients:
    """The ring, mapped: ``add`` on the front's side, ``contains`` on the backend's."""

    def __init__(self, path: Path, *, create: bool = False):
        self.path = path
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, SIZE)
            self._map = mmap.mmap(fd, SIZE)
        finally:
            os.close(fd)
        self._tickets = np.frombuffer(self._map, dtype=np.uint64, count=SLOTS, offset=_HEADER.size)

    @classmethod
    def create(cls, directory: Path = Path("/dev/shm")) -> GoneClients:
        return cls(directory / f"ge_plugin_gone_{os.getpid()}_{os.urandom(4).hex()}", create=True)

    @classmethod
    def from_environment(cls) -> GoneClients | None:
        path = os.environ.get(ENV)
        if not path:
            return None
        try:
            return cls(Path(path))
        except OSError:
            return None  # the server that named it is gone: nothing to read

    def add(self, ticket: int) -> None:
        (written,) = _HEADER.unpack_from(self._map)
        self._tickets[written % SLOTS] = ticket
        _HEADER.pack_into(self._map, 0, written + 1)

    def contains(self, tickets: Iterable[int]) -> list[bool]:
        """For each ticket (0: none), whether its client is gone."""
        wanted = np.fromiter(tickets, dtype=np.uint64)
        found = np.isin(wanted, self._tickets)
        return [bool(hit) and ticket != 0 for hit, ticket in zip(found, wanted)]

    def close(self, unlink: bool = False) -> None:
        del self._tickets
        self._map.close()
        if unlink:
            self.path.unlink(missing_ok=True)
