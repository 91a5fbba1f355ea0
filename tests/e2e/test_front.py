"""ge-plugin's HTTP front in front of the real tritonserver 2.51: the clients users bring get their answers,
and each request that aborted tritonserver through the old guard (or hung the client) is answered with 400
while tritonserver serves on. Each hostile case ends by checking that tritonserver is alive and that another
client is answered right."""

from __future__ import annotations

import gzip
import http.client
import json
import shutil
import socket
import subprocess
import zlib

import numpy as np
import pytest

pytestmark = pytest.mark.e2e

MODEL = "identity_e2e"  # INPUT0 fp32 [batch, 16], batch gears 1..8
HUGE = [1, 1099511627776]
CRASH = {"inputs": [{"name": "INPUT0", "shape": HUGE, "datatype": "FP32", "data": [1.0, 2.0]}]}
ROWS = np.arange(32, dtype=np.float32).reshape(2, 16)
GOOD = {"inputs": [{"name": "INPUT0", "shape": [2, 16], "datatype": "FP32", "data": ROWS.ravel().tolist()}]}
INFER = f"/v2/models/{MODEL}/infer".encode()


def address(server) -> tuple[str, int]:
    host, port = server.http_url.rsplit(":", 1)
    return host, int(port)


def exchange(server, raw: bytes, timeout: float = 30.0) -> tuple[int, dict]:
    """One raw request on a new connection; the status and JSON body of the answer (0, {} if none came)."""
    with socket.create_connection(address(server), timeout=timeout) as sock:
        sock.sendall(raw)
        response = http.client.HTTPResponse(sock)
        try:
            response.begin()
        except (http.client.HTTPException, OSError):
            return 0, {}
        return response.status, json.loads(response.read() or b"{}")


def post(target: bytes, body: bytes, *headers: bytes, line: bytes | None = None) -> bytes:
    head = line if line is not None else b"POST " + target + b" HTTP/1.1"
    extra = b"".join(h + b"\r\n" for h in headers)
    return head + b"\r\nHost: x\r\n" + extra + b"Content-Length: %d\r\n\r\n" % len(body) + body


def assert_serves_on(server) -> None:
    """tritonserver alive, and a stock client answered right."""
    assert server.triton.process.poll() is None, server.log_tail()
    assert server.is_ready()
    answer = server.infer("http", MODEL, {"INPUT0": ROWS})["OUTPUT0"]
    assert np.array_equal(answer, ROWS)


# -- the clients users bring ---------------------------------------------------------------------------


@pytest.mark.parametrize("compression", [None, "gzip", "deflate"])
def test_tritonclient_http_with_and_without_compression(server, compression):
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(server.http_url)
    try:
        tensor = httpclient.InferInput("INPUT0", [2, 16], "FP32")
        tensor.set_data_from_numpy(ROWS, binary_data=compression != "deflate")  # JSON data, and binary
        result = client.infer(
            MODEL,
            [tensor],
            request_compression_algorithm=compression,
            response_compression_algorithm=compression,
        )
        assert np.array_equal(result.as_numpy("OUTPUT0"), ROWS)
    finally:
        client.close()


@pytest.mark.parametrize("compression", ["gzip", "deflate"])
def test_tritonclient_compressed_huge_shape_is_refused(server, compression):
    """``request_compression_algorithm``, a stock option, carried the crashing request past the old guard."""
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    client = httpclient.InferenceServerClient(server.http_url)
    try:
        tensor = httpclient.InferInput("INPUT0", [1, 2], "FP32")
        tensor.set_data_from_numpy(np.array([[1.0, 2.0]], dtype=np.float32), binary_data=False)
        tensor.set_shape(HUGE)
        with pytest.raises(InferenceServerException, match="declares 4398046511104 bytes") as caught:
            client.infer(MODEL, [tensor], request_compression_algorithm=compression)
        assert caught.value.status() == "400"
    finally:
        client.close()
    assert_serves_on(server)


def test_curl_with_its_expect_100_continue_on_a_2_mib_body(server, tmp_path):
    """curl sends ``Expect: 100-continue`` for a body over 1 MiB; the old guard handed it the 100 as the
    answer and the real answer never came."""
    curl = shutil.which("curl")
    assert curl, "curl is installed by scripts/system-deps.sh"
    body = json.dumps(GOOD, indent=1).encode()
    body += b" " * ((2 << 20) - len(body))  # pretty-printed, 2 MiB
    path = tmp_path / "request.json"
    path.write_bytes(body)
    done = subprocess.run(
        [
            curl,
            "-sS",
            "-v",
            "--max-time",
            "60",
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            f"@{path}",
            f"http://{server.http_url}/v2/models/{MODEL}/infer",
        ],
        capture_output=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert b"Expect: 100-continue" in done.stderr and b"HTTP/1.1 100 Continue" in done.stderr
    (output,) = json.loads(done.stdout)["outputs"]
    assert output["data"] == ROWS.ravel().tolist()


def test_python_requests(server):
    import requests

    with requests.Session() as session:
        for _ in range(3):  # one keep-alive connection
            answer = session.post(f"http://{server.http_url}/v2/models/{MODEL}/infer", json=GOOD, timeout=60)
            assert answer.status_code == 200, answer.text
            assert answer.json()["outputs"][0]["data"] == ROWS.ravel().tolist()
        assert session.get(f"http://{server.http_url}/v2/health/ready", timeout=60).status_code == 200


# -- hostile requests, raw -----------------------------------------------------------------------------


def _deep(levels: int) -> bytes:
    return b'{"inputs":' + b"[" * levels + b"]" * levels + b"}"


HOSTILE = {
    # the request 2.51 dies of (std::bad_alloc), as it is
    "plain": post(INFER, json.dumps(CRASH).encode()),
    # the same huge-shape request as gzip and as deflate: tritonserver inflates, the old guard did not
    "gzip": post(INFER, gzip.compress(json.dumps(CRASH).encode()), b"Content-Encoding: gzip"),
    "deflate": post(INFER, zlib.compress(json.dumps(CRASH).encode()), b"Content-Encoding: deflate"),
    # the old guard saw no inference path in these request lines; tritonserver does
    "absolute-form": post(
        INFER, json.dumps(CRASH).encode(), line=b"POST http://127.0.0.1" + INFER + b" HTTP/1.1"
    ),
    "double space": post(INFER, json.dumps(CRASH).encode(), line=b"POST  " + INFER + b" HTTP/1.1"),
    # JSON that two parsers read differently: Python keeps the last key, tritonserver's parser the first
    "duplicate keys": post(
        INFER,
        b'{"inputs":[{"name":"INPUT0","shape":[1,1099511627776],"shape":[1,2],"datatype":"FP32","data":[1,2]}]}',
    ),
    "not UTF-8": post(
        INFER,
        b'{"inputs":[{"name":"INPUT0","shape":[1,1099511627776],"datatype":"FP32","data":[1,2],'
        b'"parameters":{"x":"\xff"}}]}',
    ),
    "trailing bytes": post(INFER, json.dumps(CRASH).encode() + b"\x00}"),
    # deep nesting: through gzip it killed tritonserver (SIGSEGV); plain, the old guard's thread died
    "deep, gzip": post(INFER, gzip.compress(_deep(200_000)), b"Content-Encoding: gzip"),
    "deep": post(INFER, _deep(200_000)),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_request_is_refused_and_tritonserver_serves_on(server, case):
    status, body = exchange(server, HOSTILE[case])
    assert status == 400, (status, body)
    assert body.get("error"), body
    assert_serves_on(server)


def test_a_gzip_bomb_is_refused_at_the_body_limit(server):
    bomb = gzip.compress(b" " * (512 << 20) + b"{}")  # 512 MiB of whitespace in 500 KiB; the limit is 256 MiB
    status, body = exchange(server, post(INFER, bomb, b"Content-Encoding: gzip"))
    assert status == 413 and "decodes to more than" in body["error"]
    assert_serves_on(server)


def test_without_the_front_tritonserver_dies_of_that_request(session_models, start_server):
    """Why the front is there: a huge-shape request sent to tritonserver 2.51's own HTTP endpoint (the INT64
    LLaMA input: 8 TiB declared, two values given) ends tritonserver for every client (with glibc's malloc
    it aborts on std::bad_alloc; jemalloc hands out the address space and tritonserver then stalls on it,
    which is worse, so this runs with glibc's)."""
    repo, _ = session_models
    crash = {"inputs": [{"name": "input_ids", "shape": HUGE, "datatype": "INT64", "data": [1, 2]}]}
    with start_server(
        repo, http_guard=False, model_control_mode="explicit", load_models=["llama_e2e"], jemalloc="off"
    ) as alone:
        target = b"/v2/models/llama_e2e/infer"
        assert exchange(alone, post(target, json.dumps(crash).encode())) == (0, {})  # no answer
        status = alone.triton.process.wait(timeout=60)
        assert status != 0, alone.log_tail(200)


# -- the holes a hostile client found (issue 27) -----------------------------------------------------------


def _health(extra: bytes = b"", query: bytes = b"") -> bytes:
    return b"GET /v2/health/ready" + query + b" HTTP/1.1\r\nHost: x\r\n" + extra + b"\r\n"


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (_health(b"X: " + b"y" * 8191 + b"\r\n"), 200),  # the longest value tritonserver 2.51 answers
        (_health(b"X: " + b"y" * 8192 + b"\r\n"), 431),  # it closes on this one: the client saw 502
        (_health(query=b"?" + b"a" * (8189 - 17)), 200),  # the longest target it answers
        (_health(query=b"?" + b"a" * (8190 - 17)), 414),
        (_health(b"X: " + b"y" * 70000 + b"\r\n"), 431),
    ],
    ids=["value at the limit", "value past it", "target at the limit", "target past it", "a 70 KB head"],
)
def test_heads_past_tritonservers_limits_get_the_fronts_answer_never_a_502(server, raw, status):
    assert exchange(server, raw)[0] == status
    assert_serves_on(server)


#: requests with a field or parameter of the wrong type: each answered 500 by tritonserver 2.51 itself
MALFORMED_PARAMETERS = {
    "parameters a list": {"parameters": []},
    "priority a string": {"parameters": {"priority": "high"}},
    "timeout negative": {"parameters": {"timeout": -5}},
    "sequence_id a float": {"parameters": {"sequence_id": 1.5}},
    "sequence_start 1": {"parameters": {"sequence_start": 1}},
    "binary_data_output 1": {"parameters": {"binary_data_output": 1}},
    "binary_data 1": {"outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": 1}}]},
    "classification -1": {"outputs": [{"name": "OUTPUT0", "parameters": {"classification": -1}}]},
    "output name 5": {"outputs": [{"name": 5}]},
    "id 5": {"id": 5},
}


@pytest.mark.parametrize("case", list(MALFORMED_PARAMETERS))
def test_a_malformed_parameter_gets_400_naming_it_not_500(server, case):
    body = dict(GOOD, **MALFORMED_PARAMETERS[case])
    status, answer = exchange(server, post(INFER, json.dumps(body).encode()))
    assert status == 400, (status, answer)
    named = next(iter(MALFORMED_PARAMETERS[case].values()))
    assert any(f"'{key}'" in answer["error"] for key in _keys(named) | set(MALFORMED_PARAMETERS[case])), (
        answer
    )


def _keys(value: object) -> set[str]:
    if isinstance(value, dict):
        return set(value) | set().union(*map(_keys, value.values()))
    if isinstance(value, list):
        return set().union(*map(_keys, value))
    return set()


def test_pipelined_requests_then_a_half_close_are_all_answered_by_tritonserver(server):
    body = json.dumps(GOOD).encode()
    with socket.create_connection(address(server), timeout=30) as sock:
        sock.sendall(post(INFER, body) * 3)
        sock.shutdown(socket.SHUT_WR)
        answers = []
        for _ in range(3):
            response = http.client.HTTPResponse(sock)
            response.begin()
            answers.append((response.status, json.loads(response.read())["outputs"][0]["data"]))
    assert answers == [(200, ROWS.ravel().tolist())] * 3
