"""Large response bodies moved from tritonserver's socket to the client's inside the kernel (``splice``).

Carried through Python, a 2 MiB answer costs two copies and a dozen event-loop turns (about 2 ms here);
spliced through a pipe it costs the kernel's page moves. The front parses the response head with llhttp,
and when the rest of a ``Content-Length`` body is large, a worker thread splices exactly that many bytes
(the sockets stay non-blocking; the thread polls them) while the event loop serves everyone else.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import threading

#: a body at least this large (past what arrived with its head) is spliced
SPLICE_MIN = 128 << 10
#: the pipe's size, as large as the system allows up to this
PIPE_BYTES = 1 << 20
#: no progress for this long ends the relay (a client that stopped reading)
STALL_S = 60.0
_FLAGS = getattr(os, "SPLICE_F_MOVE", 1) | getattr(os, "SPLICE_F_NONBLOCK", 2)
_pipes = threading.local()


class _Pipe:
    def __init__(self) -> None:
        self.read_end, self.write_end = os.pipe()
        self.size = 65536
        with contextlib.suppress(OSError):
            self.size = fcntl.fcntl(self.write_end, fcntl.F_SETPIPE_SZ, PIPE_BYTES)

    def close(self) -> None:
        os.close(self.read_end)
        os.close(self.write_end)


def splice_body(source: int, target: int, count: int) -> None:
    """Move ``count`` bytes from socket ``source`` to socket ``target``; OSError (or ConnectionError when
    ``source`` ends early) if they cannot all go. Runs on a worker thread, one pipe per thread."""
    pipe: _Pipe | None = getattr(_pipes, "pipe", None)
    if pipe is None:
        pipe = _pipes.pipe = _Pipe()
    in_pipe = 0
    poller = select.poll()
    try:
        while count or in_pipe:
            moved = False
            if count and in_pipe < pipe.size:
                try:
                    n = os.splice(source, pipe.write_end, min(count, pipe.size - in_pipe), flags=_FLAGS)
                except BlockingIOError:
                    n = -1
                if n == 0:
                    raise ConnectionError("tritonserver closed the connection in the middle of a body")
                if n > 0:
                    count -= n
                    in_pipe += n
                    moved = True
            if in_pipe:
                try:
                    n = os.splice(pipe.read_end, target, in_pipe, flags=_FLAGS)
                except BlockingIOError:
                    n = -1
                if n > 0:
                    in_pipe -= n
                    moved = True
            if not moved:
                _wait(poller, source if count and in_pipe < pipe.size else -1, target if in_pipe else -1)
    except BaseException:
        _pipes.pipe = None  # bytes may be left in it: never reused
        pipe.close()
        raise


def _wait(poller: select.poll, readable: int, writable: int) -> None:
    for fd, events in ((readable, select.POLLIN), (writable, select.POLLOUT)):
        if fd >= 0:
            poller.register(fd, events)
    try:
        ready = poller.poll(STALL_S * 1000)
    finally:
        for fd in (readable, writable):
            if fd >= 0:
                poller.unregister(fd)
    if not ready:
        raise TimeoutError(f"a response body made no progress for {STALL_S:.0f} s")
    for _, events in ready:
        if events & (select.POLLERR | select.POLLNVAL):
            raise ConnectionError("a socket failed in the middle of a response body")
