"""The gRPC front as a process of its own beside ``ge-plugin serve``: its own interpreter and GIL.

The front's work per call is Python (grpc.aio's and the gate's); in ``ge-plugin serve``'s process it would
take turns on one GIL with the HTTP front's event loop. As a child process it runs beside it, on the other
core when there is one, and whatever happens to it happens to gRPC only. It gets its settings (keys
included) pickled on its stdin, never on its command line, says ``ready PORT`` on its stdout once it
listens, stops on SIGTERM, SIGINT or SIGHUP (no new call; calls in flight get ``grace_s``), and dies with its
parent, as tritonserver does (``serve.orphans``).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import IO

import attrs

from ge_plugin.errors import ServeError
from ge_plugin.serve.grpc_front.gate import GrpcRules
from ge_plugin.serve.grpc_front.server import MAX_MESSAGE_BYTES, MAX_METADATA_BYTES
from ge_plugin.serve.orphans import dying_with_this_process

READY_TIMEOUT_S = 60.0


@attrs.frozen
class FrontSettings:
    """What the front's process is started with."""

    listen: tuple[str, int]
    #: tritonserver's gRPC endpoint (``unix:PATH`` in ``ge-plugin serve``)
    upstream: str
    rules: GrpcRules = attrs.Factory(GrpcRules)
    max_message_bytes: int = MAX_MESSAGE_BYTES
    max_metadata_bytes: int = MAX_METADATA_BYTES
    #: how long calls in flight may go on once a stop began
    grace_s: float = 30.0
    #: a file of 8 bytes where the front keeps its count of refused requests ("": none)
    counter: str = ""


class FrontProcess:
    """Starts ``python -m ge_plugin.serve.grpc_front`` with ``settings``; ``wait_ready`` for its port."""

    def __init__(
        self,
        settings: FrontSettings,
        *,
        stderr: IO[bytes] | None = None,
        env: Mapping[str, str] | None = None,
    ):
        self.settings = settings
        self.port = 0
        self.process = subprocess.Popen(
            dying_with_this_process([sys.executable, "-m", "ge_plugin.serve.grpc_front"]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
        )
        assert self.process.stdin is not None
        with self.process.stdin:
            self.process.stdin.write(pickle.dumps(settings))

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> int:
        """The port it listens on, once it does; ServeError if it exits first or the time runs out."""
        stdout = self.process.stdout
        assert stdout is not None
        deadline = time.monotonic() + timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([stdout], [], [], left)[0]:
                raise ServeError(f"the gRPC front did not start within {timeout:.0f} s")
            chunk = os.read(stdout.fileno(), 64)
            if not chunk:
                status = self.process.wait()
                raise ServeError(
                    f"the gRPC front exited with status {status} before it listened on "
                    f"{self.settings.listen[0]}:{self.settings.listen[1]} (its reason is in the server log)"
                )
            line += chunk
        word, _, port = line.decode().strip().partition(" ")
        if word != "ready" or not port.isdigit():
            raise ServeError(f"the gRPC front said {line[:80]!r} instead of ready")
        self.port = int(port)
        return self.port

    def begin_stop(self) -> None:
        """No new call; calls in flight get the grace time. Returns at once."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)

    def stop(self, timeout: float | None = None) -> int:
        """``begin_stop``, and wait for the exit (SIGKILL after ``timeout``, by default the grace time and 5 s)."""
        self.begin_stop()
        try:
            self.process.wait(self.settings.grace_s + 5.0 if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.process.returncode
