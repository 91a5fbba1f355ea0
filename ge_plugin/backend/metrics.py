"""Custom Triton metrics of the ``ge`` backend, flushed from in-process counters.

Each ``pb_utils`` metric call is a synchronous IPC to the server (~100 µs), so the engine only bumps
integers (``EngineStats``) and this publisher sends the differences every ``metrics_interval_ms``, never once
per request — from a background thread, so that neither a request nor an idle instance waits for a
flush. The execute-time histogram is published in Prometheus' histogram layout
(``ge_execute_duration_us_bucket{le=…}``, ``_sum``, ``_count``) as counters: Triton 2.51's Python histogram
takes one IPC per observation, which would put the cost back on every execute.

One label set, one stub at a time. Triton's core shares a Prometheus series between every metric object
created with the same family name and labels, but counts references per family object: when an instance
that is unloading deletes its metrics, the series is freed under the instance that replaced it (same
model, version and instance name), whose next increment writes freed memory in the server process
(server#8663; a load right after an unload crashes tritonserver within a few cycles). So an instance
creates its metrics only while it holds a ``LabelLease`` on its labels, and lets go of the lease only
after every metric and family of it has been deleted on the server.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Protocol

from ge_plugin import device
from ge_plugin.engine.stats import EXECUTE_BUCKETS_US, EngineStats
from ge_plugin.errors import GePluginError

log = logging.getLogger("ge_plugin.backend")

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
#: the device's side, read on the flusher's timer: families computed there, not bumped by the engine
BUSY_SECONDS = "ge_device_busy_seconds_total"
BUSY_FRACTION = "ge_device_busy_fraction"
MEMORY_USED = "ge_device_memory_used_bytes"
MEMORY_TOTAL = "ge_device_memory_total_bytes"
DEVICE_FAMILIES = {
    BUSY_SECONDS: (
        "Seconds during which an execute of the instance was on its NPU (launch until outputs back)",
        "counter",
    ),
    BUSY_FRACTION: ("The share of the last metrics interval the instance's NPU was busy with it", "gauge"),
    MEMORY_USED: ("Memory in use on the instance's NPU, by every process (acl.rt.get_mem_info)", "gauge"),
    MEMORY_TOTAL: ("Memory of the instance's NPU (acl.rt.get_mem_info)", "gauge"),
}
EXECUTES = "ge_executes_total"
DURATION = "ge_execute_duration_us"
#: always 1; its labels say what runs: the fast path (c or py), the device (ascend or sim), ge-plugin's version
INFO = "ge_backend_info"
#: how often an instance whose labels are still held by its predecessor tries again
LEASE_RETRY_S = 0.05


def instance_labels(model: str, version: str, instance: str, device_id: int) -> dict[str, str]:
    """The labels of every ``ge_*`` series of one instance: ``device`` is the id the process uses (0..N-1 in
    a pod), ``physical_id`` the chip the runtime says it is (empty where it cannot say), which is what
    node-level NPU metrics (npu-exporter's ``id``, npu-smi) are keyed by. Read once, at load."""
    chip = device.physical_id(device_id)
    return {
        "model": model,
        "version": version,
        "instance": instance,
        "device": str(device_id),
        "physical_id": "" if chip is None else str(chip),
    }


class _Metric(Protocol):
    """A ``pb_utils.Metric``: each call is one IPC to the server."""

    def increment(self, value: float) -> None: ...

    def set(self, value: float) -> None: ...


class _Family(Protocol):
    """A ``pb_utils.MetricFamily``."""

    def Metric(self, labels: dict[str, str]) -> _Metric: ...  # pb_utils spells it so


class LabelLease:
    """An exclusive claim on one label set among the stubs of one tritonserver.

    The claim is an abstract Unix socket name (Linux): binding it fails while another process holds it,
    and the kernel frees it when the holder closes it or dies, even by ``kill -9``, leaving no file behind.
    The name covers the server (its pid and pid namespace, both read from the stub, whose parent is the
    server) so that servers sharing a host and a network namespace do not wait on each other.
    """

    def __init__(self, labels: dict[str, str], *, server: str | None = None):
        server = server if server is not None else _server_identity()
        digest = hashlib.sha256(json.dumps([server, sorted(labels.items())]).encode()).hexdigest()[:32]
        self.address = f"\0ge-plugin/metrics/{digest}"
        self._socket: socket.socket | None = None

    @property
    def held(self) -> bool:
        return self._socket is not None

    def acquire(self) -> bool:
        """Take the claim if no other process holds it; True when this lease holds it."""
        if self._socket is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.bind(self.address)
            except OSError as exc:
                sock.close()
                if exc.errno != errno.EADDRINUSE:
                    raise
                return False
            self._socket = sock
        return True

    def release(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def _server_identity() -> str:
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    return f"{namespace}:{os.getppid()}"


class MetricsPublisher:
    """Publishes one engine's stats under labels ``model``, ``version`` and ``instance``.

    Its metrics exist only while it holds the lease on those labels: at once when no other stub holds it,
    otherwise from the moment the previous holder has deleted its own (counts made meanwhile are published
    then, nothing is lost)."""

    def __init__(
        self,
        pb_utils: ModuleType,
        stats: EngineStats,
        labels: dict[str, str],
        interval_ms: int,
        *,
        lease: LabelLease | None = None,
        device_memory: Callable[[], tuple[int, int]] | None = None,
        info: dict[str, str] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self._info = info or {}
        self._pb = pb_utils
        self._stats = stats
        #: (free, total) bytes of the instance's device; None where nothing can tell
        self._device_memory = device_memory
        self._memory_failed = False
        self._clock = clock
        self._last_busy = (clock(), stats.busy.seconds())
        self._labels = labels
        self._interval = interval_ms / 1000.0
        self._lock = threading.Lock()
        self._sent: dict[str, float] = {}
        self._families: list[_Family] = []
        self._metrics: dict[str, _Metric] = {}
        self._by_gear: dict[str, _Metric] = {}
        self._buckets: list[_Metric] = []
        self._executes_family: _Family | None = None
        self.lease = lease if lease is not None else LabelLease(labels)
        if self.lease.acquire():
            self._create()
            self.flush()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ge-metrics", daemon=True)
        self._thread.start()

    @property
    def publishing(self) -> bool:
        return bool(self._metrics)

    def _run(self) -> None:
        while not self.lease.held:
            if self._stop.wait(LEASE_RETRY_S):
                return
            if self.lease.acquire():
                with self._lock:
                    self._create()
                self.flush()
        while not self._stop.wait(self._interval):
            self.flush()

    def _create(self) -> None:
        labels = self._labels
        counter = self._pb.MetricFamily.COUNTER
        gauge = self._pb.MetricFamily.GAUGE
        for name, (description, _) in COUNTERS.items():
            self._metrics[name] = self._family(name, description, counter).Metric(labels=labels)
        for name, (description, _) in GAUGES.items():
            self._metrics[name] = self._family(name, description, gauge).Metric(labels=labels)
        for name, (description, kind) in DEVICE_FAMILIES.items():
            if name in (MEMORY_USED, MEMORY_TOTAL) and self._device_memory is None:
                continue
            family = self._family(name, description, counter if kind == "counter" else gauge)
            self._metrics[name] = family.Metric(labels=labels)
        if self._info:
            family = self._family(INFO, "What the ge backend instance runs (always 1)", gauge)
            self._metrics[INFO] = family.Metric(labels={**labels, **self._info})
            self._metrics[INFO].set(1)
        self._executes_family = self._family(EXECUTES, "Executes of the ge backend, by gear", counter)
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

    def _family(self, name: str, description: str, kind: int) -> _Family:
        family: _Family = self._pb.MetricFamily(name=name, description=description, kind=kind)
        self._families.append(family)
        return family

    def flush(self) -> None:
        with self._lock:
            if not self._metrics:
                return
            stats = self._stats
            for name, (_, attr) in COUNTERS.items():
                self._increment(name, self._metrics[name], getattr(stats, attr))
            for name, (_, attr) in GAUGES.items():
                self._set(name, getattr(stats, attr))
            by_gear = self._executes_family
            assert by_gear is not None  # created with the other metrics
            for gear, count in list(stats.executes_by_gear.items()):
                metric = self._by_gear.get(gear)
                if metric is None:
                    metric = self._by_gear[gear] = by_gear.Metric(labels={**self._labels, "gear": gear})
                self._increment(f"{EXECUTES}:{gear}", metric, count)
            cumulative = 0
            for bound, (metric, count) in enumerate(zip(self._buckets, stats.execute_buckets)):
                cumulative += count
                self._increment(f"{DURATION}_bucket:{bound}", metric, cumulative)
            self._increment(f"{DURATION}_sum", self._metrics[f"{DURATION}_sum"], stats.execute_us_sum)
            self._increment(
                f"{DURATION}_count", self._metrics[f"{DURATION}_count"], sum(stats.execute_buckets)
            )
            self._flush_device()

    def _flush_device(self) -> None:
        """Busy time and fraction since the last flush, and the device's memory."""
        now, busy = self._clock(), self._stats.busy.seconds()
        then, busy_then = self._last_busy
        self._last_busy = (now, busy)
        self._increment(BUSY_SECONDS, self._metrics[BUSY_SECONDS], busy)
        if now > then:
            self._set(BUSY_FRACTION, min(1.0, max(0.0, (busy - busy_then) / (now - then))))
        if self._device_memory is None or self._memory_failed:
            return
        try:
            free, total = self._device_memory()
        except GePluginError as exc:  # say it once; the other metrics go on
            self._memory_failed = True
            log.warning("device memory metrics stopped: %s", exc)
            return
        self._set(MEMORY_USED, total - free)
        self._set(MEMORY_TOTAL, total)

    def _set(self, name: str, value: float) -> None:
        if self._sent.get(name) != value:
            self._metrics[name].set(value)
            self._sent[name] = value

    def _increment(self, key: str, metric: _Metric, total: float) -> None:
        delta = total - self._sent.get(key, 0)
        if delta > 0:
            metric.increment(delta)
            self._sent[key] = total

    def close(self) -> None:
        """Stop the flusher, flush once more, delete every metric and then every family on the server (the
        python backend requires that order; each deletion is a synchronous IPC), and only then give up the
        lease for the instance that replaces this one."""
        self._stop.set()
        self._thread.join()
        try:
            self.flush()
        finally:
            with self._lock:
                self._metrics.clear()
                self._by_gear.clear()
                self._buckets = []
                self._executes_family = None
                self._families.clear()
            self.lease.release()
