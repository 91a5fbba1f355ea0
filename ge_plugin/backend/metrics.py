"""Custom Triton metrics of the ``ge`` backend, flushed from in-process counters.

Each ``pb_utils`` metric call is a synchronous IPC to the server (~100 µs), so the engine only bumps
integers (``EngineStats``) and this publisher sends the differences every ``metrics_interval_ms``, never once
per request — from a background thread, so that neither a request nor an idle instance waits for a
flush. The execute-time histogram is published in Prometheus' histogram layout
(``ge_execute_duration_us_bucket{le=…}``, ``_sum``, ``_count``) as counters: Triton 2.51's Python histogram
takes one IPC per observation, which would put the cost back on every execute.
"""

from __future__ import annotations

import threading
from types import ModuleType

from ge_plugin.engine.stats import EXECUTE_BUCKETS_US, EngineStats

#: counter families: metric name -> (description, EngineStats attribute)
COUNTERS = {
    "ge_h2d_bytes_total": ("Bytes copied host to device by the ge backend", "h2d_bytes"),
    "ge_d2h_bytes_total": ("Bytes copied device to host by the ge backend", "d2h_bytes"),
    "ge_rows_total": ("Request rows executed by the ge backend", "rows"),
    "ge_padded_rows_total": ("Rows added to reach a batch gear (padding waste)", "padded_rows"),
    "ge_padded_elements_total": (
        "Input elements computed on padding (batch and sequence gears)",
        "padded_elements",
    ),
    "ge_request_errors_total": ("Requests refused as invalid by the ge backend", "request_errors"),
    "ge_device_errors_total": ("Requests failed by a device error in the ge backend", "device_errors"),
    "ge_isolation_executes_total": (
        "Executes re-run to find the request that failed a multi-request execute on the device",
        "isolation_executes",
    ),
    "ge_lane_rebuilds_total": ("Lanes (stream + model load) rebuilt after a device failure", "lane_rebuilds"),
    "ge_lane_rebuild_failures_total": (
        "Lane rebuilds that failed (retried with backoff)",
        "lane_rebuild_failures",
    ),
}
GAUGES = {
    "ge_lanes_down": ("Lanes of the instance that could not be rebuilt yet (0 = healthy)", "lanes_down"),
    "ge_device_memory_bytes": ("Device memory held by the ge backend instance", "device_bytes"),
    "ge_pinned_memory_bytes": ("Pinned host memory held by the ge backend instance", "pinned_bytes"),
}
EXECUTES = "ge_executes_total"
DURATION = "ge_execute_duration_us"


class MetricsPublisher:
    """Publishes one engine's stats under labels ``model``, ``version`` and ``instance``."""

    def __init__(self, pb_utils: ModuleType, stats: EngineStats, labels: dict[str, str], interval_ms: int):
        self._pb = pb_utils
        self._stats = stats
        self._labels = labels
        self._interval = interval_ms / 1000.0
        self._lock = threading.Lock()
        self._sent: dict[str, float] = {}
        counter = pb_utils.MetricFamily.COUNTER
        gauge = pb_utils.MetricFamily.GAUGE
        self._families = []
        self._metrics: dict[str, object] = {}
        for name, (description, _) in COUNTERS.items():
            self._metrics[name] = self._family(name, description, counter).Metric(labels=labels)
        for name, (description, _) in GAUGES.items():
            self._metrics[name] = self._family(name, description, gauge).Metric(labels=labels)
        self._executes_family = self._family(EXECUTES, "Executes of the ge backend, by gear", counter)
        self._by_gear: dict[str, object] = {}
        buckets = self._family(
            f"{DURATION}_bucket", "Execute time histogram buckets (cumulative, µs)", counter
        )
        self._buckets = [
            buckets.Metric(labels={**labels, "le": str(bound)}) for bound in (*EXECUTE_BUCKETS_US, "+Inf")
        ]
        self._metrics[f"{DURATION}_sum"] = self._family(
            f"{DURATION}_sum", "Total execute time (µs)", counter
        ).Metric(labels=labels)
        self._metrics[f"{DURATION}_count"] = self._family(
            f"{DURATION}_count", "Executes timed", counter
        ).Metric(labels=labels)
        self.flush()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ge-metrics", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.flush()

    def _family(self, name: str, description: str, kind):
        family = self._pb.MetricFamily(name=name, description=description, kind=kind)
        self._families.append(family)
        return family

    def flush(self) -> None:
        with self._lock:
            stats = self._stats
            for name, (_, attr) in COUNTERS.items():
                self._increment(name, self._metrics[name], getattr(stats, attr))
            for name, (_, attr) in GAUGES.items():
                value = getattr(stats, attr)
                if self._sent.get(name) != value:
                    self._metrics[name].set(value)
                    self._sent[name] = value
            for gear, count in list(stats.executes_by_gear.items()):
                metric = self._by_gear.get(gear)
                if metric is None:
                    metric = self._by_gear[gear] = self._executes_family.Metric(
                        labels={**self._labels, "gear": gear}
                    )
                self._increment(f"{EXECUTES}:{gear}", metric, count)
            cumulative = 0
            for bound, (metric, count) in enumerate(zip(self._buckets, stats.execute_buckets)):
                cumulative += count
                self._increment(f"{DURATION}_bucket:{bound}", metric, cumulative)
            self._increment(f"{DURATION}_sum", self._metrics[f"{DURATION}_sum"], stats.execute_us_sum)
            self._increment(
                f"{DURATION}_count", self._metrics[f"{DURATION}_count"], sum(stats.execute_buckets)
            )

    def _increment(self, key: str, metric, total: float) -> None:
        delta = total - self._sent.get(key, 0)
        if delta > 0:
            metric.increment(delta)
            self._sent[key] = total

    def close(self) -> None:
        """Stop the flusher, flush once more, then drop metrics before their families (the python backend
        requires that order)."""
        self._stop.set()
        self._thread.join()
        try:
            self.flush()
        finally:
            self._metrics.clear()
            self._by_gear.clear()
            self._buckets = []
            self._families.clear()
