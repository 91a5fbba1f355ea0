"""A model with one instance and one stream, whose executes take a device's time, answers requests sent one
after the other as fast as its device allows.

Triton 2.51's dynamic batcher waits for a free instance on a condition it polls every 500 ms: a request
that arrives while Triton still counts the only instance busy (the previous response is already with the
client, the ``execute`` that made it has not returned yet) waits for that poll. On a quiet host that window
is too short to hit; on a busy one (here: two processes spinning per core) perf_analyzer, which
sends its next request the moment an answer arrives, met it about one request in ten against the bench's
LLaMA on the seed's device time. The ``ge`` backend therefore answers a one-lane model's slow executes from its
completion thread, as it does with two streams, so that ``execute`` has returned before the client sees the
answer (docs/serving.md, "One instance, one stream")."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from benchmarks.proof.repository import FLOOR, PY_IDENTITY, REPLICA_1X1, build_repository
from ge_plugin.measure.perf import SERVER_APIS, _run, binary

pytestmark = pytest.mark.e2e

MODEL = REPLICA_1X1  # the tiny LLaMA, 78 ms of device time at batch 1 (timing-only), 1 instance x 1 stream
REQUESTS = 40
POLL_US = 500_000  # the batcher's wait when it finds no free instance


@contextlib.contextmanager
def busy_host() -> Iterator[None]:
    """Every core kept busy by two processes that spin, as on a host serving other work too."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2 * (os.cpu_count() or 1))
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


@pytest.fixture(scope="module")
def bench_repository(tmp_path_factory):
    return build_repository(tmp_path_factory.mktemp("one-lane") / "work", seq=16)


def _queued_us(server, model: str, input_data, shape: str) -> float:
    """Send REQUESTS requests one after the other on a busy host; the µs they waited in Triton's queue in all."""
    labels = {"model": model}
    before = server.baseline()
    command = [
        str(binary()), "-i", "grpc", "-u", server.triton.grpc_url, "-m", model, "--concurrency-range=1:1",
        f"--input-data={input_data}", f"--shape={shape}",
        f"--request-count={REQUESTS}", "--measurement-mode=count_windows",
        f"--measurement-request-count={REQUESTS}", "--stability-percentage=999", "--max-trials=1",
    ]  # fmt: skip
    with busy_host():
        out = _run(command, timeout=300)
    assert out.returncode == 0, f"perf_analyzer failed on {model}:\n{out.stdout}{out.stderr}"
    sent = before.total("nv_inference_count", **labels) + REQUESTS
    after = server.wait_totals([("nv_inference_count", labels, sent)])
    return after.total("nv_inference_queue_duration_us", **labels) - before.total(
        "nv_inference_queue_duration_us", **labels
    )


def test_back_to_back_requests_never_wait_for_the_batchers_poll(bench_repository, own_server):
    server = own_server(
        bench_repository.root, model_control_mode="explicit", load_models=[MODEL], open_apis=SERVER_APIS
    )
    queued_us = _queued_us(server, MODEL, bench_repository.inputs[MODEL], "input_ids:16")
    # one request in flight at a time: each finds the instance free, so none waits long in the queue
    assert queued_us < POLL_US / 2, (
        f"{REQUESTS} requests sent one after the other waited {queued_us / 1000:.0f} ms in Triton's "
        f"queue in all: some met the dynamic batcher's {POLL_US // 1000} ms poll"
    )


#: the floors the bench reads at c=1 against a one-instance ge model: the paced floor and the naive model are
#: rendered from the two-instance layout, so at c=1 they always have an instance free
C1_FLOORS = {FLOOR: "input_ids:16", PY_IDENTITY: "INPUT0:16"}


@pytest.mark.parametrize("floor", C1_FLOORS)
def test_a_floor_answers_back_to_back_requests_without_the_batchers_poll(bench_repository, own_server, floor):
    """The bench reads ge against these floors: a floor that meets the poll on a busy host measures the host's
    load, not Triton's cost (py_logits at c=1 once gave a p50 of 502,808 µs)."""
    server = own_server(
        bench_repository.root, model_control_mode="explicit", load_models=[floor], open_apis=SERVER_APIS
    )
    queued_us = _queued_us(server, floor, bench_repository.inputs[floor], C1_FLOORS[floor])
    assert queued_us < POLL_US / 2, (
        f"{floor}: {REQUESTS} requests sent one after the other waited {queued_us / 1000:.0f} ms in Triton's "
        f"queue in all: some met the dynamic batcher's {POLL_US // 1000} ms poll"
    )
