"""Prometheus metrics of a generating model, published off the request path like metrics.py's.

The loop only counts (``generate.stats.Stats``); this flusher sends the differences every
``metrics_interval_ms`` from its own thread. Time to first token and inter-token latency are histograms in
Prometheus' layout (``_bucket{le=…}``, ``_sum``, ``_count``) kept as counters, as metrics.py does for
execute time: Triton 2.51's Python histogram costs one IPC per observation. Metrics exist only while the
instance holds the ``LabelLease`` on its labels (metrics.py says why).
"""

from __future__ import annotations

import bisect
import threading
from typing import Any

from ge_plugin.backend.metrics import LEASE_RETRY_S, LabelLease
from ge_plugin.generate.config import Layout
from ge_plugin.generate.stats import Stats

#: seconds: from 1 ms (a step on a fast device) to 30 s (a long prompt queued behind others)
TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)

COUNTERS = {
    "ge_generate_tokens_total": ("Tokens generated", "tokens"),
    "ge_generate_prefill_executes_total": ("Prefill executes (one prompt chunk each)", "prefill_executes"),
    "ge_generate_decode_executes_total": (
        "Decode executes (one token for every active sequence)",
        "decode_executes",
    ),
}
ACTIVE = "ge_generate_active_slots"
OCCUPANCY = "ge_generate_kv_cache_occupancy"
HISTOGRAMS = {
    "ge_generate_time_to_first_token_seconds": (
        "Time from a request's arrival to its first token",
        TTFT_BUCKETS,
    ),
    "ge_generate_inter_token_latency_seconds": ("Time between a sequence's successive tokens", ITL_BUCKETS),
}


class GenerateMetrics:
    def __init__(self, pb_utils: Any, stats: Stats, labels: dict[str, str], interval_ms: int, layout: Layout):
        self._pb = pb_utils
        self._stats = stats
        self._labels = labels
        self._capacity = layout.slots * layout.context
        self._interval = interval_ms / 1000.0
        self._lock = threading.Lock()
        self._families: list[Any] = []
        self._metrics: dict[str, Any] = {}
        self._sent: dict[str, float] = {}
        #: per histogram: cumulative counts per bucket (+Inf last) and the sum, as observed so far
        self._counts = {name: [0] * (len(bounds) + 1) for name, (_, bounds) in HISTOGRAMS.items()}
        self._sums = dict.fromkeys(HISTOGRAMS, 0.0)
        self.lease = LabelLease(labels)
        if self.lease.acquire():
            self._create()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ge-generate-metrics", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self.lease.held:
            if self._stop.wait(LEASE_RETRY_S):
                return
            if self.lease.acquire():
                with self._lock:
                    self._create()
        while not self._stop.wait(self._interval):
            self.flush()

    def _family(self, name: str, description: str, kind: Any) -> Any:
        family = self._pb.MetricFamily(name=name, description=description, kind=kind)
        self._families.append(family)
        return family

    def _create(self) -> None:
        counter, gauge = self._pb.MetricFamily.COUNTER, self._pb.MetricFamily.GAUGE
        labels = self._labels
        for name, (description, _) in COUNTERS.items():
            self._metrics[name] = self._family(name, description, counter).Metric(labels=labels)
        self._metrics[ACTIVE] = self._family(ACTIVE, "Sequences holding a KV cache slot", gauge).Metric(
            labels=labels
        )
        self._metrics[OCCUPANCY] = self._family(
            OCCUPANCY, "Share of the KV cache's token positions holding a sequence's keys and values", gauge
        ).Metric(labels=labels)
        for name, (description, bounds) in HISTOGRAMS.items():
            buckets = self._family(f"{name}_bucket", f"{description} (cumulative buckets)", counter)
            for bound in (*bounds, "+Inf"):
                self._metrics[f"{name}_bucket:{bound}"] = buckets.Metric(labels={**labels, "le": str(bound)})
            self._metrics[f"{name}_sum"] = self._family(f"{name}_sum", description, counter).Metric(
                labels=labels
            )
            self._metrics[f"{name}_count"] = self._family(f"{name}_count", description, counter).Metric(
                labels=labels
            )

    def flush(self) -> None:
        ttft, itl = self._stats.drain()
        with self._lock:
            for name, values in zip(HISTOGRAMS, (ttft, itl)):
                bounds = HISTOGRAMS[name][1]
                for value in values:
                    self._counts[name][bisect.bisect_left(bounds, value)] += 1
                    self._sums[name] += value
            if not self._metrics:
                return
            stats = self._stats
            for name, (_, attr) in COUNTERS.items():
                self._increment(name, getattr(stats, attr))
            self._set(ACTIVE, stats.active)
            self._set(OCCUPANCY, stats.cached_tokens / self._capacity if self._capacity else 0.0)
            for name, (_, bounds) in HISTOGRAMS.items():
                cumulative = 0
                for bound, count in zip((*bounds, "+Inf"), self._counts[name]):
                    cumulative += count
                    self._increment(f"{name}_bucket:{bound}", cumulative)
                self._increment(f"{name}_sum", self._sums[name])
                self._increment(f"{name}_count", sum(self._counts[name]))

    def _set(self, key: str, value: float) -> None:
        if self._sent.get(key) != value:
            self._metrics[key].set(value)
            self._sent[key] = value

    def _increment(self, key: str, total: float) -> None:
        delta = total - self._sent.get(key, 0)
        if delta > 0:
            self._metrics[key].increment(delta)
            self._sent[key] = total

    def close(self) -> None:
        """Stop, flush once more, delete metrics then families (the python backend's order), release."""
        self._stop.set()
        self._thread.join()
        try:
            self.flush()
        finally:
            with self._lock:
                self._metrics.clear()
                self._families.clear()
            self.lease.release()
