"""``batching.max_queue_delay_us`` is "how long Triton may hold a request to fill a larger batch"
(docs/spec.md). A request that arrives while an earlier one is still held must join its batch.

No clock decides the outcome: the model's delay is two minutes, so the first request is still held however
slow this machine is when the others arrive, and they fill the largest gear, which Triton sends at once."""

from __future__ import annotations

import concurrent.futures
import time

import numpy as np
import pytest

pytestmark = pytest.mark.e2e

MODEL = "identity_held"  # gears 1, 2, 4, 8 and a two-minute queue delay, rendered as it is
GEAR = 8  # the largest gear: the renderer's one preferred batch size


def test_queue_delay_holds_a_lone_request_for_a_batch_mate(server):
    """Triton 2.51 sends a pending batch at once when its size is a preferred batch size, so this holds only
    because the renderer prefers the largest gear alone (listing gear 1 would answer the first at once)."""
    labels = {"model": MODEL}
    inputs = [np.full((1, 16), float(k), dtype=np.float32) for k in range(GEAR)]
    before = server.baseline()

    with concurrent.futures.ThreadPoolExecutor(GEAR) as pool:
        held = pool.submit(server.infer, "http", MODEL, {"INPUT0": inputs[0]})
        deadline = time.monotonic() + 60  # liveness only: the delay it waits for is Triton's, two minutes
        while not held.done() and server.metrics().total("nv_inference_pending_request_count", **labels) < 1:
            assert time.monotonic() < deadline, "the first request was neither held nor answered"
            time.sleep(0.01)
        answered_alone = held.done()
        mates = [pool.submit(server.infer, "http", MODEL, {"INPUT0": x}) for x in inputs[1:]]
        outputs = [future.result(timeout=60)["OUTPUT0"] for future in [held, *mates]]
    assert not answered_alone, "the first request was answered before its batch-mates arrived"
    for got, sent in zip(outputs, inputs):
        assert np.array_equal(got, sent)

    after = server.wait_totals(
        [("nv_inference_count", labels, before.total("nv_inference_count", **labels) + GEAR)]
    )
    executes = after.total("nv_inference_exec_count", **labels) - before.total(
        "nv_inference_exec_count", **labels
    )
    assert executes == 1, f"{GEAR} requests ran in {executes:.0f} executes, expected one batch of {GEAR}"
