"""The metrics endpoint carries the ``ge`` backend's own families, per model instance, with values that add
up: one request of 3 rows on identity (16 floats a row) runs on gear 4 and moves exactly 4 x 64 bytes each
way."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.e2e

COUNTERS = (
    "ge_h2d_bytes_total",
    "ge_d2h_bytes_total",
    "ge_rows_total",
    "ge_padded_rows_total",
    "ge_padded_elements_total",
    "ge_request_errors_total",
    "ge_device_errors_total",
    "ge_execute_duration_us_bucket",
    "ge_execute_duration_us_sum",
    "ge_execute_duration_us_count",
    "ge_device_busy_seconds_total",
)
GAUGES = (
    "ge_device_memory_bytes",
    "ge_pinned_memory_bytes",
    "ge_device_busy_fraction",
    "ge_device_memory_used_bytes",
    "ge_device_memory_total_bytes",
)
IDENTITY = {"model": "identity_e2e"}


def test_every_model_instance_has_every_ge_family(server, session_models):
    _, names = session_models
    before = server.baseline()
    server.infer("http", "identity_e2e", {"INPUT0": np.zeros((1, 16), np.float32)})
    metrics = server.assert_deltas(before, [("ge_executes_total", {**IDENTITY, "gear": "1"}, 1)])
    for family in COUNTERS:
        assert metrics.types.get(family) == "counter", family
    for family in GAUGES:
        assert metrics.types.get(family) == "gauge", family
    assert metrics.types.get("ge_executes_total") == "counter"
    repo, _ = session_models
    # a generating model publishes generation's own families (docs/generate.md), not the forward pass's
    forward = [m for m in names if '"generate"' not in (repo / m / "config.pbtxt").read_text()]
    assert len(forward) < len(names)  # the session serves generating models too: the filter is not idle
    for model in forward:
        for family in (*COUNTERS, *GAUGES):
            samples = metrics.select(family, model=model)
            assert samples, f"{family} has no sample for {model}"
            for labels, _ in samples:
                assert labels["version"] == "1" and labels["instance"] == "npu0_0", labels
                assert labels["device"] == "0" and labels["physical_id"] == "0", labels  # no container here
    gears = {labels["gear"] for labels, _ in metrics.select("ge_executes_total", **IDENTITY)}
    assert gears <= {"1", "2", "4", "8"} and "1" in gears


def test_one_request_moves_every_counter_by_exactly_what_it_cost(server):
    before = server.baseline()

    server.infer("grpc", "identity_e2e", {"INPUT0": np.ones((3, 16), np.float32)})

    after = server.assert_deltas(
        before,
        [
            ("ge_executes_total", {**IDENTITY, "gear": "4"}, 1),
            ("ge_rows_total", IDENTITY, 3),
            ("ge_padded_rows_total", IDENTITY, 1),
            ("ge_padded_elements_total", IDENTITY, 16),
            ("ge_h2d_bytes_total", IDENTITY, 4 * 16 * 4),
            ("ge_d2h_bytes_total", IDENTITY, 3 * 16 * 4),  # the padded row is not copied back
            ("ge_execute_duration_us_count", IDENTITY, 1),
            ("ge_execute_duration_us_bucket", {**IDENTITY, "le": "+Inf"}, 1),
            ("ge_request_errors_total", IDENTITY, 0),
            ("ge_device_errors_total", IDENTITY, 0),
        ],
    )
    spent = after.total("ge_execute_duration_us_sum", **IDENTITY) - before.total(
        "ge_execute_duration_us_sum", **IDENTITY
    )
    assert 0 < spent < 10e6, f"one identity execute took {spent} µs"


def test_execute_histogram_is_cumulative_and_ends_at_the_count(server):
    before = server.baseline()
    for rows in (1, 2, 5, 8):
        server.infer("http", "identity_e2e", {"INPUT0": np.ones((rows, 16), np.float32)})
    metrics = server.assert_deltas(
        before,
        [
            ("ge_execute_duration_us_count", IDENTITY, 4),
            ("ge_execute_duration_us_bucket", {**IDENTITY, "le": "+Inf"}, 4),
        ],
    )
    buckets = sorted(
        (float(labels["le"]), value)
        for labels, value in metrics.select("ge_execute_duration_us_bucket", **IDENTITY)
    )
    assert len(buckets) == 13 and buckets[-1][0] == float("inf")
    counts = [value for _, value in buckets]
    assert counts == sorted(counts), f"buckets are not cumulative: {buckets}"
    assert counts[-1] == metrics.total("ge_execute_duration_us_count", **IDENTITY)


def test_memory_gauges_show_the_buffers_allocated_once_at_load(server):
    """identity holds at least its gear-8 input and output (512 bytes each); llama at least its gear 8x64
    logits (8 x 64 x 32000 floats). Requests allocate nothing, so the gauges do not move."""
    before = server.baseline()
    for name, floor in (("identity_e2e", 2 * 512), ("llama_e2e", 8 * 64 * 32000 * 4)):
        assert before.total("ge_device_memory_bytes", model=name) >= floor, name
        assert before.total("ge_pinned_memory_bytes", model=name) >= floor, name
    served = before.total("ge_rows_total", model="llama_e2e")

    server.infer("grpc", "llama_e2e", {"input_ids": np.arange(1, 41, dtype=np.int64)[None]})
    server.infer("grpc", "identity_e2e", {"INPUT0": np.ones((8, 16), np.float32)})

    after = server.wait_totals([("ge_rows_total", {"model": "llama_e2e"}, served + 1)])
    for name in ("identity_e2e", "llama_e2e"):
        for gauge in (*GAUGES[:2], "ge_device_memory_used_bytes", "ge_device_memory_total_bytes"):
            assert after.total(gauge, model=name) == before.total(gauge, model=name), (gauge, name)


def test_refused_request_counts_as_a_request_error_and_runs_nothing(server):
    labels = {"model": "llama_e2e"}
    before = server.baseline()
    with pytest.raises(Exception, match="longer than the largest sequence gear"):
        server.infer("http", "llama_e2e", {"input_ids": np.ones((1, 70), np.int64)})
    server.assert_deltas(
        before,
        [
            ("ge_request_errors_total", labels, 1),
            ("ge_executes_total", labels, 0),
            ("ge_rows_total", labels, 0),
            ("ge_h2d_bytes_total", labels, 0),
        ],
    )


def test_npu_busy_time_and_memory_are_published_and_move(server):
    """Per instance and device: the seconds its executes had the NPU, the share of the last interval that
    was, and the NPU's memory as acl.rt.get_mem_info reports it (the simulator answers from its accounting:
    the instance's buffers and its loaded model)."""
    before = server.baseline()
    busy_before = before.total("ge_device_busy_seconds_total", **IDENTITY)

    for _ in range(20):
        server.infer("grpc", "identity_e2e", {"INPUT0": np.ones((8, 16), np.float32)})

    after = server.wait_totals([("ge_device_busy_seconds_total", IDENTITY, busy_before + 1e-6)])
    ((labels, used),) = after.select("ge_device_memory_used_bytes", **IDENTITY)
    ((_, total),) = after.select("ge_device_memory_total_bytes", **IDENTITY)
    ((_, held),) = after.select("ge_device_memory_bytes", **IDENTITY)
    assert labels["device"] == "0"
    assert held <= used < total  # the instance's own buffers are part of what the device has in use
    for _, fraction in after.select("ge_device_busy_fraction"):
        assert 0.0 <= fraction <= 1.0
    assert after.types["ge_device_busy_seconds_total"] == "counter"


def test_in_a_container_the_metrics_name_the_physical_chip(own_server, reload_repo):
    """The device plugin gave this pod chip 4 (ASCEND_VISIBLE_DEVICES, as the Ascend container runtime sets
    it): the instance uses it as device 0, and its series say both, so they join with npu-exporter's ``id``."""
    server = own_server(reload_repo, environment={"ASCEND_VISIBLE_DEVICES": "Ascend910-4"})
    server.wait_until(
        "reload_one's metrics",
        lambda: bool(server.metrics().select("ge_device_memory_bytes", model="reload_one")),
    )
    for family in ("ge_device_memory_bytes", "ge_device_busy_seconds_total", "ge_rows_total"):
        samples = server.metrics().select(family, model="reload_one")
        assert samples, family
        assert {(labels["device"], labels["physical_id"]) for labels, _ in samples} == {("0", "4")}, family
