"""A lane whose rebuild fails, on the real server (issue 9 item 3): the second execute fails on the device
and so does the load that rebuilds its lane. The unfixed backend gave every later request INTERNAL "the
instance is unusable" for good while the model still reported ready; now requests meanwhile are told to
retry (UNAVAILABLE, 503) and the instance serves again once a retried rebuild succeeds."""

from __future__ import annotations

import time

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

pytestmark = pytest.mark.e2e

MODEL = "identity_unrebuildable"
RECOVERY_TIMEOUT_S = 30.0


@pytest.fixture
def unrebuildable(control_server):
    with control_server.loaded(MODEL):
        yield control_server


def test_instance_whose_rebuild_failed_recovers_and_says_retry_meanwhile(unrebuildable):
    protocol = "grpc"
    rows = np.arange(16, dtype=np.float32)[None]
    assert np.array_equal(unrebuildable.infer(protocol, MODEL, {"INPUT0": rows})["OUTPUT0"], rows)
    with pytest.raises(InferenceServerException) as caught:
        unrebuildable.infer(protocol, MODEL, {"INPUT0": rows})
    assert caught.value.status() == "StatusCode.INTERNAL", caught.value.message()
    assert "ACL_ERROR_RT_MODEL_EXECUTE" in caught.value.message()

    client = unrebuildable.client("http")
    try:
        refusals = []
        deadline = time.monotonic() + RECOVERY_TIMEOUT_S
        while True:
            assert client.is_model_ready(MODEL)
            try:
                answer = unrebuildable.infer(protocol, MODEL, {"INPUT0": rows + len(refusals)})
                break
            except InferenceServerException as exc:
                refusals.append((exc.status(), exc.message()))
            assert time.monotonic() < deadline, f"never served again: {refusals[-3:]}"
            time.sleep(0.05)
    finally:
        client.close()
    np.testing.assert_array_equal(answer["OUTPUT0"], rows + len(refusals))
    for status, message in refusals:  # while the lane was down: retry later, never a lasting failure
        assert status == "StatusCode.UNAVAILABLE", message
    unrebuildable.wait_totals(
        [
            ("ge_lane_rebuild_failures_total", {"model": MODEL}, 1),
            ("ge_lane_rebuilds_total", {"model": MODEL}, 1),
        ]
    )
