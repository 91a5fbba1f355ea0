"""One JSON request with a huge declared shape aborts tritonserver 2.51 (std::bad_alloc in its HTTP front
end). ge-plugin's guard in front of the HTTP port answers it with 400, and every other request goes through
unchanged, on the same keep-alive connection."""

from __future__ import annotations

import http.client
import json

import pytest

pytestmark = pytest.mark.e2e

CRASH = {"inputs": [{"name": "input_ids", "shape": [1, 1099511627776], "datatype": "INT64", "data": [1, 2]}]}
GOOD = {"inputs": [{"name": "input_ids", "shape": [1, 3], "datatype": "INT64", "data": [5, 6, 7]}]}


def post(connection: http.client.HTTPConnection, model: str, body: dict) -> tuple[int, dict]:
    connection.request(
        "POST", f"/v2/models/{model}/infer", json.dumps(body), {"Content-Type": "application/json"}
    )
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def test_guard_answers_the_request_that_crashes_tritonserver_and_the_server_serves_on(server):
    host, port = server.http_url.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        status, body = post(connection, "llama_e2e", CRASH)
        assert status == 400
        assert body["error"].startswith("input 'input_ids': shape [1, 1099511627776] declares")
        status, body = post(connection, "llama_e2e", GOOD)  # the same connection, still open
        assert status == 200, body
        (logits,) = body["outputs"]
        assert logits["shape"] == [1, 3, 32000]
    finally:
        connection.close()
    assert server.triton.process.poll() is None
    assert server.is_ready()


def test_without_the_guard_tritonserver_dies_of_that_request(session_models, start_server):
    """Why the guard is there: the same request sent to tritonserver 2.51's own HTTP endpoint."""
    repo, _ = session_models
    with start_server(
        repo, http_guard=False, model_control_mode="explicit", load_models=["llama_e2e"]
    ) as alone:
        host, port = alone.http_url.rsplit(":", 1)
        connection = http.client.HTTPConnection(host, int(port), timeout=60)
        with pytest.raises((ConnectionError, http.client.HTTPException)):
            post(connection, "llama_e2e", CRASH)
        connection.close()
        status = alone.triton.process.wait(timeout=60)
        assert status != 0
        assert "bad_alloc" in alone.log_tail(200)
