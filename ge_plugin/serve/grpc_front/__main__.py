"""``python -m ge_plugin.serve.grpc_front``: the front's own process (``process.FrontProcess`` starts it)."""

from __future__ import annotations

import logging
import pickle
import signal
import sys
import threading

from ge_plugin.errors import ServeError
from ge_plugin.serve.grpc_front.process import FrontSettings
from ge_plugin.serve.grpc_front.server import GrpcFront


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="ge-plugin grpc front: %(message)s")
    settings = pickle.load(sys.stdin.buffer)
    if not isinstance(settings, FrontSettings):
        print("ge-plugin grpc front: expected its settings on stdin", file=sys.stderr)
        return 2
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stopping.set())
    try:
        front = GrpcFront(
            settings.listen,
            settings.upstream,
            settings.rules,
            max_message_bytes=settings.max_message_bytes,
            max_metadata_bytes=settings.max_metadata_bytes,
            counter=settings.counter,
        )
    except ServeError as exc:
        print(f"ge-plugin grpc front: {exc}", file=sys.stderr, flush=True)
        return 1
    print(f"ready {front.port}", flush=True)
    while not stopping.wait(3600):
        pass
    front.begin_stop(settings.grace_s)
    front.wait_stopped(settings.grace_s + 1.0)
    front.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
