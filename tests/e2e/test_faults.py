"""A device fault fails only the requests that fail on their own; the instance serves on.

identity_faulty's simulator fails its 3rd and 7th ``acl.mdl.execute_async`` with ACL_ERROR_RT_MODEL_EXECUTE
(warm-up is off, so the count starts with the first request). Execute 1: one request of 4 rows. Executes 2
and 3: eight one-row requests sent together, which Triton batches four by four; execute 3 fails, and its 4
requests run again as two halves (executes 4 and 5), which pass. Execute 6: 4 rows. Execute 7: one request
alone, which fails. Execute 8: the next request.
"""

from __future__ import annotations

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

pytestmark = pytest.mark.e2e

MODEL = "identity_faulty"
FAILED = {"http": "500", "grpc": "StatusCode.INTERNAL"}


@pytest.fixture
def faulty(control_server):
    """identity_faulty freshly loaded (a new stub process, so the faults count from its first execute)."""
    with control_server.loaded(MODEL):
        yield control_server


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_device_fault_fails_only_the_request_that_fails_again(faulty, protocol):
    labels = {"model": MODEL}
    four = np.arange(64, dtype=np.float32).reshape(4, 16)
    rows = [np.full((1, 16), i, dtype=np.float32) for i in range(8)]
    before = faulty.baseline()

    assert np.array_equal(faulty.infer(protocol, MODEL, {"INPUT0": four})["OUTPUT0"], four)
    answers = faulty.infer_many(protocol, MODEL, [{"INPUT0": row} for row in rows])
    assert np.array_equal(faulty.infer(protocol, MODEL, {"INPUT0": four + 1})["OUTPUT0"], four + 1)
    with pytest.raises(InferenceServerException) as caught:
        faulty.infer(protocol, MODEL, {"INPUT0": four + 2})
    after_fault = faulty.infer(protocol, MODEL, {"INPUT0": four + 3})

    # the fault in the batch of four did not come back when its requests ran again: all eight answered
    for row, answer in zip(rows, answers):
        assert not isinstance(answer, Exception), answer
        assert np.array_equal(answer["OUTPUT0"], row)
    error = caught.value
    assert error.status() == FAILED[protocol], error.message()
    assert "ACL_ERROR_RT_MODEL_EXECUTE" in error.message() or "507011" in error.message()
    assert np.array_equal(after_fault["OUTPUT0"], four + 3)
    faulty.assert_deltas(
        before,
        [
            ("nv_inference_exec_count", labels, 6),
            ("ge_device_errors_total", labels, 1),
            ("ge_request_errors_total", labels, 0),
            ("ge_isolation_executes_total", labels, 2),
            ("ge_lane_rebuilds_total", labels, 2),
            ("ge_lanes_down", labels, 0),
        ],
    )
    assert faulty.is_ready()
