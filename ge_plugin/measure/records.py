"""What a measurement gives, as plain records: the only place their fields are declared.

The modules that measure (perf, serverstats, direct) write these, and what reads them (``ge-plugin bench``'s
table, tune, the proof's targets and report in benchmarks/) names each field through them, so a field is
named once and a JSON key follows from it. They hold no behaviour beyond what is derived from their own fields.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class BenchModel:
    """One model the bench serves."""

    name: str
    backend: str  #: "ge" or "python"
    family: str  #: "identity" or "llama": models of a family are compared with each other
    #: "host" (timing-only, no device time) or "replica" (timing-only, the seed's device time per gear)
    phase: str
    what: str  #: one line for tables: what this row stands for
    input_name: str
    #: perf_analyzer ``--shape`` value (dims without the batch dim), or "" when the config fixes every dim
    shape: str = ""


@attrs.frozen
class Point:
    """One perf_analyzer run: a model, rows per request, requests in flight. ``again``: the point is measured
    a second time (three windows, no stability check), its windows added to the first run's."""

    model: str
    batch: int
    concurrency: int
    again: bool = False


@attrs.frozen
class PerfRow:
    """One concurrency level as perf_analyzer measured it (µs, infer/s)."""

    concurrency: int
    throughput: float
    client_send_us: float
    network_us: float
    server_queue_us: float
    server_compute_input_us: float
    server_compute_infer_us: float
    server_compute_output_us: float
    client_recv_us: float
    p50_us: float
    p90_us: float
    p95_us: float
    p99_us: float


@attrs.frozen
class Counters:
    """The server's cumulative counters of one model at one moment (Triton's statistics, ge's metrics)."""

    inferences: int = 0
    executions: int = 0
    engine_executes: float = 0.0
    engine_us: float = 0.0
    #: executions per batch size (rows in one execute), as Triton's batch_stats count them
    batches: dict[int, int] = attrs.field(factory=dict)
    #: the ge backend's own executes per gear label (``ge_executes_total``): with a batch held open across
    #: several ``execute`` calls (streams_per_instance > 1), these are the device's executes, Triton's are not
    gears: dict[str, int] = attrs.field(factory=dict)


@attrs.frozen
class Window:
    """Per-execute figures over one run, from the counters before and after it; None where not known (no
    execute to divide by, or the counters were not read)."""

    rows_per_execute: float | None = None
    engine_ms_per_execute: float | None = None
    #: executions per batch size during the run ("8": 12 means twelve executes of 8 rows)
    batch_sizes: dict[str, int] | None = None
    #: the ge backend's executes per gear during the run ("8x16": 12), and its rows per execute
    gear_executes: dict[str, int] | None = None
    rows_per_device_execute: float | None = None


@attrs.frozen
class Pass:
    """One measurement window: rows per second and the p50 in µs (perf_analyzer's pass; a stretch of the
    direct engine's calls)."""

    throughput: float
    p50_us: float


@attrs.frozen
class StubPhases:
    """What the stub's ``execute`` spent during one point, from its timer (``ge_plugin.backend.timing``):
    medians over the point's executes, per request for reading and responding, per execute for the model's
    own work and (ge only) the part of it on the simulated device's stream."""

    executes: int
    requests_per_execute: float
    read_us: float
    work_us: float
    #: None when the responses are sent from the engine's completion thread (streams_per_instance > 1)
    respond_us: float | None
    stream_us: float | None = None


@attrs.frozen
class Measurement:
    """One point through Triton: what perf_analyzer measured and what the server counted meanwhile."""

    model: str
    row: PerfRow
    stable: bool  #: False: perf_analyzer's stability check failed and the point was measured without it
    #: rows per request (perf_analyzer ``-b``); throughput counts rows, as the seed's req/s does
    batch: int = 1
    #: from the server's counters over the run (ge_plugin.measure.serverstats)
    server: Window = Window()
    #: every measurement window of the point's runs (a point a target compares is measured twice)
    windows: tuple[Pass, ...] = ()
    #: wall clock (time.time()) at the start and end of each perf_analyzer run of the point
    spans: tuple[tuple[float, float], ...] = ()
    #: the stub's own timing of the point's executes, when the server ran with it
    stub: StubPhases | None = None
    #: why perf_analyzer gave no result even without the stability check (a window with no request done: a
    #: host too busy for the window); ``row`` then holds only the medians of the windows it got. None: measured
    failure: str | None = None

    @property
    def measured(self) -> bool:
        return self.failure is None


@attrs.frozen
class DirectRow:
    """One batch gear of a ge model timed in-process, without Triton."""

    model: str
    batch: int
    iterations: int
    throughput: float  #: rows (inferences) per second
    p50_ms: float
    p99_ms: float
    #: mean ms per call the engine spent on the stream (launch until synchronize returned: H2D, execute, D2H)
    stream_ms: float | None = None
    #: the calls in consecutive stretches, each its p50 and rows/s (for the targets' intervals)
    windows: tuple[Pass, ...] = ()

    @property
    def host_us(self) -> float | None:
        """The host's part of one call (p50 minus the mean stream time): the engine's own work, in µs."""
        return None if self.stream_ms is None else (self.p50_ms - self.stream_ms) * 1e3


@attrs.frozen
class Allocations:
    """Simulator allocations (device + pinned host) of one model: at start-up, and after serving requests."""

    model: str
    where: str  #: "direct" (this process) or "served" (the Triton stubs' reports)
    instances: int
    requests: int
    mallocs_at_start: int  #: per instance
    mallocs_total: int  #: all instances, start-up included

    @property
    def per_request(self) -> float | None:
        if self.requests <= 0:
            return None
        return (self.mallocs_total - self.instances * self.mallocs_at_start) / self.requests
