"""Server counters around one perf_analyzer run: metrics parsed by label, per-execute means."""

from __future__ import annotations

import pytest

from ge_plugin.bench import serverstats
from ge_plugin.bench.records import Counters, Window

METRICS = """\
# HELP ge_execute_duration_us_sum Total execute time (µs)
# TYPE ge_execute_duration_us_sum counter
ge_execute_duration_us_sum{instance="npu0_0",model="ge_llama",version="1"} 3000
ge_execute_duration_us_sum{instance="npu0_1",model="ge_llama",version="1"} 1000.5
ge_execute_duration_us_sum{instance="npu0_0",model="ge_identity",version="1"} 77
ge_execute_duration_us_count{instance="npu0_0",model="ge_llama",version="1"} 4
nv_inference_count{model="ge_llama",version="1"} 123
"""


def test_metric_sums_adds_every_instance_of_one_model():
    sums = serverstats.metric_sums(
        METRICS, "ge_llama", ("ge_execute_duration_us_sum", "ge_execute_duration_us_count")
    )
    assert sums == {"ge_execute_duration_us_sum": 4000.5, "ge_execute_duration_us_count": 4}


def test_metric_sums_is_zero_for_a_model_without_ge_metrics():
    assert serverstats.metric_sums(METRICS, "py_identity", ("ge_execute_duration_us_sum",)) == {
        "ge_execute_duration_us_sum": 0.0
    }


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
