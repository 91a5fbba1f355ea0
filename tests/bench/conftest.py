"""Fixtures for the bench tests: one bench repository and a synthetic Result (fresh_sim is in tests/conftest.py)."""

from __future__ import annotations

import pytest

from ge_plugin.bench.direct import Allocations, DirectRow
from ge_plugin.bench.perf import Measurement, PerfRow
from ge_plugin.bench.ratios import evaluate
from ge_plugin.bench.report import Result
from ge_plugin.bench.repository import build_repository, models


@pytest.fixture(scope="session")
def bench_repo(tmp_path_factory):
    return build_repository(tmp_path_factory.mktemp("bench") / "work", seq=16)


def _perf_row(concurrency: int, throughput: float, p50_us: float, **changes) -> PerfRow:
    values = dict(
        concurrency=concurrency,
        throughput=throughput,
        client_send_us=5.0,
        network_us=100.0,
        server_queue_us=50.0,
        server_compute_input_us=10.0,
        server_compute_infer_us=200.0,
        server_compute_output_us=30.0,
        client_recv_us=2.0,
        p50_us=p50_us,
        p90_us=p50_us * 1.2,
        p95_us=p50_us * 1.3,
        p99_us=p50_us * 1.5,
    )
    values.update(changes)
    return PerfRow(**values)


def _make_result(**changes) -> Result:
    """A plausible full run: four models at c=1, 8 and 16, direct rows and allocation counts."""
    triton = []
    speeds = {
        "ge_identity": (2000, 500),
        "py_identity": (2500, 400),
        "ge_llama": (180, 5500),
        "naive_llama": (120, 7000),
    }
    for name, (throughput, p50) in speeds.items():
        for c in (1, 8, 16):
            triton.append(
                Measurement(
                    model=name,
                    row=_perf_row(c, throughput * (1 + c / 8), p50 * (1 + c / 4)),
                    stable=c != 16,
                    requests_per_execute=1.0 + c / 4,
                    engine_ms_per_execute=0.2 if name.startswith("ge_") else None,
                )
            )
    direct = [DirectRow("ge_llama", 1, 300, 650.0, 1.3, 4.0), DirectRow("ge_llama", 8, 40, 700.0, 11.0, 20.0)]
    allocations = [
        Allocations("ge_llama", "direct", 1, 2000, 5, 5),
        Allocations("ge_llama", "served", 2, 900, 5, 10),
        Allocations("naive_llama", "served", 2, 800, 0, 3200),
    ]
    base = dict(
        label="CPU simulator, 2 cores",
        created="2026-01-01T00:00:00+00:00",
        machine={
            "cpu": "Test CPU",
            "cores": 2,
            "memory_gib": 8.0,
            "os": "Linux",
            "python": "3.11.7",
            "numpy": "1.26.4",
            "onnxruntime": "1.32.0",
            "ge_plugin": "0.1.0",
            "fastpath": "c",
            "tritonserver": "2.51.0",
            "perf_analyzer": "2.51.0",
        },
        options={
            "output": "bench-results",
            "concurrencies": [1, 8, 16],
            "measurement_ms": 2000,
            "stability_percentage": 20,
            "max_trials": 8,
            "seq": 16,
            "device_latency_ms": 0.0,
            "direct_seconds": 2.0,
            "models": [m.name for m in models(16)],
        },
        models=models(16),
        triton=tuple(triton),
        direct=tuple(direct),
        allocations=tuple(allocations),
        targets=tuple(evaluate(triton, direct, allocations)),
        notes=(),
    )
    base.update(changes)
    return Result(**base)


@pytest.fixture
def perf_row():
    """perf_row(concurrency, throughput, p50_us, **other columns) -> PerfRow"""
    return _perf_row


@pytest.fixture
def make_result():
    """make_result(**changes) -> a plausible full run's Result"""
    return _make_result


@pytest.fixture
def result() -> Result:
    return _make_result()
