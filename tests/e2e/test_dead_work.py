"""Dead work is not done: a request whose client left before its turn is not executed. The front ends the
upstream connection of a client that is gone (a reset in answer to the interim 100 it writes after a
half-close), tritonserver cancels that request, and the backend drops cancelled requests before a batch
runs. Counted with the backend's own rows counter, no clock."""

from __future__ import annotations

import concurrent.futures
import json
import socket
import time

import numpy as np
import pytest

pytestmark = pytest.mark.e2e

MODEL = "identity_slow"  # every execute keeps its device 1 s: later requests queue behind the first
DEAD = 8


def address(server) -> tuple[str, int]:
    host, port = server.http_url.rsplit(":", 1)
    return host, int(port)


def send_and_leave(server, value: float) -> None:
    body = json.dumps(
        {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [value] * 16}]}
    ).encode()
    with socket.create_connection(address(server), timeout=30) as sock:
        sock.sendall(
            b"POST /v2/models/%s/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
            % (MODEL.encode(), len(body), body)
        )


def test_requests_of_clients_gone_before_their_turn_are_not_executed(control_server):
    """One request keeps the device 1 s; meanwhile DEAD clients send theirs and leave, and one more client
    sends and waits. The backend's rows counter must show the two waited-for requests only."""
    server = control_server
    rows = {"model": MODEL}
    with server.loaded(MODEL):
        front = server.triton.guard
        assert front is not None
        before, gone_before = server.baseline(), front.gone
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            first = pool.submit(server.infer, "http", MODEL, {"INPUT0": np.zeros((1, 16), np.float32)})
            server.wait_until(
                "the first request to reach tritonserver",
                lambda: front.run(lambda: any(c.in_flight is not None for c in front.connections)),
                timeout=30,
            )
            time.sleep(0.2)  # the instance is free: tritonserver starts it at once
            for k in range(DEAD):
                send_and_leave(server, float(k + 1))
            last = pool.submit(server.infer, "http", MODEL, {"INPUT0": np.ones((1, 16), np.float32)})
            assert np.array_equal(first.result(timeout=60)["OUTPUT0"], np.zeros((1, 16), np.float32))
            assert np.array_equal(last.result(timeout=60)["OUTPUT0"], np.ones((1, 16), np.float32))
        after = server.baseline()  # settled: every execute's rows are counted
    executed = after.total("ge_rows_total", **rows) - before.total("ge_rows_total", **rows)
    assert front.gone - gone_before == DEAD
    assert executed == 2, f"{executed:.0f} rows executed: the {DEAD} requests whose clients left ran too"
