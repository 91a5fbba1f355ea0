"""The one reader of Triton's metrics page: samples with their labels, and each family's type."""

from __future__ import annotations

import pytest

from ge_plugin.promtext import Metrics

PAGE = """\
# HELP ge_rows_total Request rows executed by the ge backend
# TYPE ge_rows_total counter
ge_rows_total{device="0",instance="npu0_0",model="llama_model",version="1"} 12
ge_rows_total{device="0",instance="npu0_1",model="llama_model",version="1"} 30
ge_rows_total{device="0",instance="npu0_0",model="bert_model",version="1"} 5
# TYPE nv_gpu_utilization gauge
nv_up 1
odd{model="a \\"quoted\\" name"} 1.5e3
"""


def test_promtext_reads_samples_labels_and_types():
    metrics = Metrics.parse(PAGE)
    assert metrics.types == {"ge_rows_total": "counter", "nv_gpu_utilization": "gauge"}
    assert metrics.total("ge_rows_total", model="llama_model") == 42
    assert metrics.total("ge_rows_total") == 47
    assert metrics.total("ge_rows_total", model="nothing") == 0
    assert metrics.select("nv_up") == [({}, 1.0)]
    ((labels, value),) = metrics.select("odd")
    assert labels == {"model": r"a \"quoted\" name"} and value == 1500.0  # escapes kept as written
    assert metrics.names() == {"ge_rows_total", "nv_up", "odd"}


def test_promtext_refuses_a_line_that_is_no_sample():
    with pytest.raises(ValueError, match="not a Prometheus sample line: 'ge_rows_total'"):
        Metrics.parse("ge_rows_total\n")
