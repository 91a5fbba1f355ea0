"""Fixtures for the bench tests: one bench repository and a synthetic Result (fresh_sim is in tests/conftest.py)."""

from __future__ import annotations

import pytest

from benchmarks.proof.ratios import evaluate
from benchmarks.proof.repository import build_repository, models
from benchmarks.proof.result import Result
from ge_plugin.measure.records import Allocations, DirectRow, Measurement, Pass, PerfRow, Window


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


def _windows(throughput: float, p50_us: float, spread: float = 0.02, n: int = 4) -> tuple[Pass, ...]:
    """n windows around a point's figures, ``spread`` apart (relative): what its intervals come from."""
    steps = [(k - (n - 1) / 2) * spread for k in range(n)]
    return tuple(Pass(throughput * (1 - step), p50_us * (1 + step)) for step in steps)


def _make_result(**changes) -> Result:
    """A plausible full run: both phases' points, direct rows and allocation counts."""
    triton = []
    speeds = {  # (rows/s at c=1, p50 µs at c=1)
        "ge_identity": (2000, 500),
        "py_identity": (2500, 400),
        "ge_llama": (600, 1600),
        "py_logits": (700, 1400),
        "replica_ge_llama": (12.5, 79_600),
        "replica_py_logits": (12.7, 79_000),
        "replica_ge_llama_1x1": (12.4, 79_700),
        "replica_ge_llama_2x1": (12.6, 79_500),
        "replica_naive_llama": (12.3, 80_000),
    }
    for name, (throughput, p50) in speeds.items():
        for c in (1, 8, 16):
            rate, latency = throughput * (1 + c / 8), p50 * (1 + (c - 1) / 4)
            triton.append(
                Measurement(
                    model=name,
                    row=_perf_row(c, rate, latency),
                    windows=_windows(rate, latency),
                    stable=c != 16,
                    server=Window(
                        rows_per_execute=1.0 + c / 4,
                        engine_ms_per_execute=p50 / 2e3 if name.startswith(("ge_", "replica_ge")) else None,
                    ),
                )
            )
    for name, by_batch in (
        ("ge_llama", {4: 4000, 8: 6400}),
        ("py_logits", {4: 3500, 8: 5600}),
        ("replica_ge_llama", {4: 149_500, 8: 227_000}),
        ("replica_py_logits", {4: 148_000, 8: 226_000}),
    ):
        for batch, p50 in by_batch.items():
            triton.append(
                Measurement(
                    model=name,
                    row=_perf_row(1, 1e6 / p50 * batch, p50),
                    windows=_windows(1e6 / p50 * batch, p50),
                    stable=True,
                    batch=batch,
                    server=Window(
                        rows_per_execute=1.0, engine_ms_per_execute=p50 / 2e3 if name != "py_logits" else None
                    ),
                )
            )
    direct = [
        DirectRow(model, batch, n, rate, p50, p99, stream, windows=_windows(rate, p50 * 1e3, 0.002))
        for model, batch, n, rate, p50, p99, stream in (
            ("ge_identity", 1, 300, 5000.0, 0.2, 0.4, 0.15),
            ("ge_llama", 1, 300, 3000.0, 0.33, 0.6, 0.3),
            ("replica_ge_llama", 1, 20, 12.6, 79.3, 79.9, 79.2),
            ("replica_ge_llama", 4, 20, 27.5, 145.5, 146.0, 145.4),
            ("replica_ge_llama", 8, 20, 36.2, 221.0, 222.0, 220.9),
        )
    ]
    allocations = [
        Allocations("replica_ge_llama", "direct", 1, 2000, 5, 5),
        Allocations("replica_ge_llama", "served", 2, 900, 5, 10),
        Allocations("replica_naive_llama", "served", 2, 800, 0, 3200),
    ]
    base = dict(
        label="CPU simulator (timing-only), 2 cores",
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
            "load_average": [0.5, 0.6, 0.7],
        },
        options={
            "output": "bench-results",
            "concurrencies": [1, 8, 16],
            "replica_concurrencies": [16],
            "measurement_ms": 2000,
            "replica_measurement_ms": 4000,
            "stability_percentage": 20,
            "max_trials": 8,
            "seq": 16,
            "direct_seconds": 2.0,
            "direct_min_iterations": 20,
            "models": [m.name for m in models(16)],
            "smoke": False,
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
def windows():
    """windows(throughput, p50_us, spread=0.02, n=4) -> tuple of Pass around those figures"""
    return _windows


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
