"""A device fault fails the requests of the execute it hit, and only those; the instance serves on.

identity_faulty's simulator fails its third ``acl.mdl.execute_async`` with ACL_ERROR_RT_MODEL_EXECUTE
(warm-up is off, so the count starts with the first request). Execute 1: one request of 4 rows. Executes 2
and 3: eight one-row requests sent together, which Triton batches four by four. Execute 4: 4 rows again.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

pytestmark = pytest.mark.e2e

MODEL = "identity_faulty"
FAILED = {"http": "500", "grpc": "StatusCode.INTERNAL"}


@pytest.fixture
def faulty(control_server):
    """identity_faulty freshly loaded (a new stub process, so the fault counts from its first execute)."""
    client = control_server.client("http")
    client.load_model(MODEL)
    try:
        yield control_server
    finally:
        client.unload_model(MODEL)
        # unload returns while the instance still finalizes; the next load must start from a clean slate
        # (its metrics are new series once the old instance has deleted its own: docs/serving.md)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(
            entry["name"] == MODEL and entry.get("state") in ("READY", "UNLOADING")
            for entry in client.get_model_repository_index()
        ):
            time.sleep(0.1)
        client.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_device_fault_fails_only_the_requests_of_its_execute(faulty, protocol):
    labels = {"model": MODEL}
    four = np.arange(64, dtype=np.float32).reshape(4, 16)
    rows = [np.full((1, 16), i, dtype=np.float32) for i in range(8)]
    before = faulty.baseline()

    assert np.array_equal(faulty.infer(protocol, MODEL, {"INPUT0": four})["OUTPUT0"], four)
    answers = faulty.infer_many(protocol, MODEL, [{"INPUT0": row} for row in rows])
    after_fault = faulty.infer(protocol, MODEL, {"INPUT0": four + 1})

    failed = [answer for answer in answers if isinstance(answer, Exception)]
    assert len(failed) == 4, f"{len(failed)} of 8 requests failed; expected the 4 of one execute"
    for error in failed:
        assert isinstance(error, InferenceServerException)
        assert error.status() == FAILED[protocol], error.message()
        assert "ACL_ERROR_RT_MODEL_EXECUTE" in error.message() or "507011" in error.message()
    for row, answer in zip(rows, answers):
        if not isinstance(answer, Exception):
            assert np.array_equal(answer["OUTPUT0"], row)
    assert np.array_equal(after_fault["OUTPUT0"], four + 1)
    faulty.assert_deltas(
        before,
        [
            ("nv_inference_exec_count", labels, 4),
            ("ge_device_errors_total", labels, 4),
            ("ge_request_errors_total", labels, 0),
        ],
    )
    assert faulty.is_ready()
