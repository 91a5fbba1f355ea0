"""One request's fault is its own: out-of-vocabulary ids among good requests, a request that fails on the
device among good ones, and refused requests that must not keep Triton's shared memory alive."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

pytestmark = pytest.mark.e2e

INVALID = {"http": "400", "grpc": "StatusCode.INVALID_ARGUMENT"}
INTERNAL = {"http": "500", "grpc": "StatusCode.INTERNAL"}
GOOD = np.array([[5, 6, 7]], dtype=np.int64)
BAD = np.array([[32000, 1]], dtype=np.int64)
#: ten good requests and two with an id past the 32000-token vocabulary, sent together
KINDS = ["good"] * 3 + ["bad"] + ["good"] * 5 + ["bad"] + ["good"] * 2


def requests() -> list[dict[str, np.ndarray]]:
    return [{"input_ids": GOOD if kind == "good" else BAD} for kind in KINDS]


def assert_good(answer) -> None:
    assert not isinstance(answer, Exception), answer
    np.testing.assert_array_equal(answer["logits"].argmax(-1), GOOD + 1)  # the LLaMA counts


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_out_of_vocabulary_ids_are_invalid_and_fail_alone(server, protocol):
    labels = {"model": "llama_e2e"}
    before = server.baseline()

    answers = server.infer_many(protocol, "llama_e2e", requests())

    for kind, answer in zip(KINDS, answers):
        if kind == "good":
            assert_good(answer)
        else:
            assert isinstance(answer, InferenceServerException)
            assert answer.status() == INVALID[protocol], answer.message()
            assert "input 'input_ids': value 32000 at [0, 0] is outside the accepted range [0, 31999]" in (
                answer.message()
            )
    server.assert_deltas(
        before,
        [
            ("ge_request_errors_total", labels, 2),
            ("ge_device_errors_total", labels, 0),
            ("ge_isolation_executes_total", labels, 0),
            ("ge_rows_total", labels, 10),
        ],
    )
    assert server.is_ready()


@pytest.fixture
def unchecked(control_server):
    """llama_unchecked: no declared range, so out-of-vocabulary ids reach the device."""
    with control_server.loaded("llama_unchecked"):
        yield control_server


def test_request_that_fails_on_the_device_fails_alone(unchecked):
    labels = {"model": "llama_unchecked"}
    before = unchecked.baseline()

    answers = unchecked.infer_many("grpc", "llama_unchecked", requests())

    for kind, answer in zip(KINDS, answers):
        if kind == "good":
            assert_good(answer)
        else:
            assert isinstance(answer, InferenceServerException)
            assert answer.status() == INTERNAL["grpc"], answer.message()
            assert "ACL_ERROR_RT_MODEL_EXECUTE" in answer.message()
            assert "Gather" in answer.message()
    after = unchecked.assert_deltas(before, [("ge_device_errors_total", labels, 2)])
    searched = after.total("ge_isolation_executes_total", **labels) - before.total(
        "ge_isolation_executes_total", **labels
    )
    assert 0 < searched <= 2 * 2 * 4  # per bad request at most 2*ceil(log2 8), the largest batch
    assert unchecked.is_ready()
    # the instance serves on: the lanes the failures broke were rebuilt
    assert_good(unchecked.infer("grpc", "llama_unchecked", {"input_ids": GOOD}))


def stub_of(server, model: str) -> tuple[int, Path]:
    """The stub process serving ``model`` and its shared-memory region (argv: model.py path, region name)."""
    for pid in server.stub_pids():
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if f"/{model}/".encode() in argv[1]:
            return pid, Path("/dev/shm") / argv[2].decode()
    raise AssertionError(f"no stub of {model} among {server.stub_pids()}")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def test_refused_large_requests_leave_no_memory_behind(server):
    """200 requests of 16 MiB, refused as longer than every gear: the stub's RSS and its shared-memory region
    stay where the first few left them. An error that kept its traceback kept each request's arrays (views
    of the region) alive, and the region grew by hundreds of MiB."""
    pid, region = stub_of(server, "llama_e2e")
    huge = {"input_ids": np.ones((1, 2 * 1024 * 1024), dtype=np.int64)}  # 16 MiB

    def send(count: int) -> None:
        answers = server.infer_many("grpc", "llama_e2e", [huge] * count)
        for answer in answers:
            assert isinstance(answer, InferenceServerException), answer
            assert answer.status() == INVALID["grpc"]
            assert "longer than the largest sequence gear 64" in answer.message()

    # One request at a time, so that what the region must hold is one request (other tests may have grown it
    # further already: it never shrinks). It settles within a few requests; then neither it nor the stub's
    # memory may grow over 200 more. (Before the fix both grew by gigabytes within the warm-up.)
    sizes = []
    while len(sizes) < 5 or sizes[-1] != sizes[-5]:
        assert len(sizes) < 20, f"the region kept growing while warming up: {sizes}"
        send(1)
        sizes.append(os.path.getsize(region))
    rss, shm = rss_bytes(pid), os.path.getsize(region)
    for _ in range(200):
        send(1)
    assert os.path.getsize(region) <= shm * 1.05, (shm, os.path.getsize(region))
    assert rss_bytes(pid) <= rss * 1.05, (rss, rss_bytes(pid))
    assert server.is_ready()


@pytest.fixture
def ids32(control_server):
    with control_server.loaded("ids32"):
        yield control_server


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_an_int64_an_int32_model_cannot_hold_is_that_requests_400(ids32, protocol):
    labels = {"model": "ids32"}
    good = [np.arange(4, dtype=np.int64)[None] + 10 * i for i in range(7)]
    big = np.array([[1, 2, 2**31, 4]], dtype=np.int64)
    before = ids32.baseline()

    answers = ids32.infer_many(protocol, "ids32", [{"ids": a} for a in (*good[:3], big, *good[3:])])

    refused = answers.pop(3)
    assert isinstance(refused, InferenceServerException)
    assert refused.status() == INVALID[protocol], refused.message()
    assert "input 'ids': value 2147483648 at [0, 2] is outside the accepted range" in refused.message()
    for ids, answer in zip(good, answers):
        assert not isinstance(answer, Exception), answer
        np.testing.assert_array_equal(answer["twice"], 2 * ids)
    ids32.assert_deltas(
        before,
        [
            ("ge_request_errors_total", labels, 1),
            ("ge_device_errors_total", labels, 0),
            ("ge_lane_rebuilds_total", labels, 0),
        ],
    )
