"""``TritonServer.wait_ready`` returns only once a client can use every port ge-plugin answers on.

tritonserver starts its metrics endpoint after its HTTP one; ge-plugin's metrics front forwards to it, and a
scrape in that gap was answered 503 ("tritonserver is not reachable"): a test that read the metrics right
after the server was ready failed so in CI. Here tritonserver is stood in for (a process that stays up, a
client that says ready), and its metrics endpoint starts late.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import tritonclient.http

from ge_plugin.serve.triton import ServerOptions, TritonServer, free_port

LATE_S = 0.6


class _Ready:
    """tritonclient.http.InferenceServerClient as a started tritonserver answers it: ready."""

    def __init__(self, *_args: Any, **_kwargs: Any):
        pass

    def is_server_ready(self) -> bool:
        return True

    def is_model_ready(self, _name: str) -> bool:
        return True

    def close(self) -> None:
        pass


class _Running:
    returncode = None

    def poll(self) -> None:
        return None


def _server(tmp_path: Any, metrics_port: int) -> TritonServer:
    server = object.__new__(TritonServer)  # its parts, without a tritonserver behind them
    server.options = ServerOptions(
        repository=tmp_path, internal_http_port=free_port(), internal_metrics_port=metrics_port
    )
    server.process = _Running()  # type: ignore[assignment]
    server.grpc_front = None
    server.metrics_front = object()  # type: ignore[assignment]
    return server


def test_ready_waits_for_tritonservers_metrics_endpoint_behind_the_front(tmp_path, monkeypatch):
    monkeypatch.setattr(tritonclient.http, "InferenceServerClient", _Ready)
    port = free_port()
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def start_late() -> None:
        time.sleep(LATE_S)
        listener.bind(("127.0.0.1", port))
        listener.listen()

    late = threading.Thread(target=start_late)
    started = time.monotonic()
    late.start()
    try:
        _server(tmp_path, port).wait_ready(timeout=10)
        assert time.monotonic() - started >= LATE_S
    finally:
        late.join()
        listener.close()
