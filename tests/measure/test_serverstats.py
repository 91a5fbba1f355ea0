"""Server counters around one perf_analyzer run: statistics and metrics by model, per-execute means."""

from __future__ import annotations

import pytest

from ge_plugin.errors import BenchError
from ge_plugin.measure import serverstats
from ge_plugin.measure.records import Counters, Window
from ge_plugin.promtext import Metrics
from ge_plugin.serve import free_port

METRICS = """\
# HELP ge_execute_duration_us_sum Total execute time (µs)
# TYPE ge_execute_duration_us_sum counter
ge_execute_duration_us_sum{instance="npu0_0",model="ge_llama",version="1"} 3000
ge_execute_duration_us_sum{instance="npu0_1",model="ge_llama",version="1"} 1000.5
ge_execute_duration_us_sum{instance="npu0_0",model="ge_identity",version="1"} 77
ge_execute_duration_us_count{instance="npu0_0",model="ge_llama",version="1"} 4
ge_executes_total{gear="8x16",instance="npu0_0",model="ge_llama",version="1"} 3
ge_executes_total{gear="8x16",instance="npu0_1",model="ge_llama",version="1"} 2
ge_executes_total{gear="1x16",instance="npu0_0",model="ge_llama",version="1"} 1
nv_inference_count{model="ge_llama",version="1"} 123
"""


#: Triton's statistics response (GET v2/models/ge_llama/stats), trimmed to what the bench reads
STATISTICS = {
    "model_stats": [
        {
            "name": "ge_llama",
            "version": "1",
            "inference_count": 40,
            "execution_count": 12,
            "batch_stats": [
                {"batch_size": 1, "compute_infer": {"count": 4, "ns": 1000}},
                {"batch_size": 4, "compute_infer": {"count": 8, "ns": 9000}},
            ],
        },
        {"name": "ge_llama", "version": "2", "inference_count": 2, "execution_count": 2, "batch_stats": []},
    ]
}


def test_counters_add_every_instance_and_version_of_one_model():
    counters = serverstats.counters(STATISTICS, Metrics.parse(METRICS), "ge_llama")
    assert (counters.engine_us, counters.engine_executes) == (4000.5, 4)
    assert (counters.inferences, counters.executions, counters.batches) == (42, 14, {1: 4, 4: 8})
    assert counters.gears == {"8x16": 5, "1x16": 1}


def test_window_counts_the_devices_executes_apart_from_tritons():
    # a batch held open took the requests of several execute calls: 6 execute calls, 2 device executes
    before = Counters(inferences=10, executions=4, gears={"8x16": 1})
    after = Counters(inferences=22, executions=10, gears={"8x16": 2, "4x16": 1})
    window = serverstats.window(before, after)
    assert window.rows_per_execute == 2.0 and window.rows_per_device_execute == 6.0
    assert window.gear_executes == {"4x16": 1, "8x16": 1}


def test_counters_are_zero_for_a_model_without_ge_metrics():
    counters = serverstats.counters({"model_stats": []}, Metrics.parse(METRICS), "py_identity")
    assert counters == Counters()


def test_read_names_the_server_that_does_not_answer():
    port = free_port()
    stats = serverstats.ServerStats(f"127.0.0.1:{port}", f"http://127.0.0.1:{port}/metrics")
    with (
        stats,
        pytest.raises(BenchError, match=r"statistics of model 'ge_llama' from tritonserver at 127\.0\.0\.1:"),
    ):
        stats.read("ge_llama")


def test_window_divides_the_differences():
    before = Counters(inferences=100, executions=50, engine_executes=40, engine_us=8000)
    after = Counters(inferences=500, executions=150, engine_executes=140, engine_us=38000)
    window = serverstats.window(before, after)
    assert window.rows_per_execute == pytest.approx(4.0)
    assert window.engine_ms_per_execute == pytest.approx(0.3)


def test_window_has_no_mean_without_executes():
    counters = Counters(inferences=3, executions=3)
    assert serverstats.window(counters, counters) == Window(None, None, None)


def test_window_counts_the_executions_of_each_batch_size_during_the_run():
    before = Counters(inferences=10, executions=5, batches={1: 3, 8: 2})
    after = Counters(inferences=60, executions=12, batches={1: 4, 4: 2, 8: 6})
    assert serverstats.window(before, after).batch_sizes == {"1": 1, "4": 2, "8": 4}
