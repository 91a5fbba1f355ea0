"""``batching.max_queue_delay_us`` is "how long Triton may hold a request to fill a larger batch"
(docs/spec.md). A request that arrives while an earlier one is still held must join its batch."""

from __future__ import annotations

import concurrent.futures
import time

import numpy as np
import pytest

pytestmark = pytest.mark.e2e

MODEL = "identity_held"  # gears 1, 2, 4, 8 and a one-second queue delay, rendered as it is


def test_queue_delay_holds_a_lone_request_for_a_batch_mate(server):
    """Triton 2.51 sends a pending batch at once when its size is a preferred batch size, so this holds only
    because the renderer prefers the largest gear alone (listing gear 1 would answer the first at once)."""
    labels = {"model": MODEL}
    first = np.full((1, 16), 1.0, dtype=np.float32)
    second = np.full((1, 16), 2.0, dtype=np.float32)
    before = server.baseline()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        held = pool.submit(server.infer, "http", MODEL, {"INPUT0": first})
        deadline = time.monotonic() + 10
        while not held.done() and server.metrics().total("nv_inference_pending_request_count", **labels) < 1:
            assert time.monotonic() < deadline, "the first request was neither held nor answered"
            time.sleep(0.01)
        answered_alone = held.done()
        joined = server.infer("http", MODEL, {"INPUT0": second})
        assert np.array_equal(held.result()["OUTPUT0"], first)
    assert np.array_equal(joined["OUTPUT0"], second)

    after = server.wait_totals(
        [("nv_inference_count", labels, before.total("nv_inference_count", **labels) + 2)]
    )
    executes = after.total("nv_inference_exec_count", **labels) - before.total(
        "nv_inference_exec_count", **labels
    )
    assert not answered_alone and executes == 1, (
        f"the first request was {'answered alone' if answered_alone else 'held'}; "
        f"two requests ran in {executes:.0f} executes, expected one batch of two"
    )
