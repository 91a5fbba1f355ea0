"""``ge-plugin bench`` from start to end: build, time the engine alone, serve, measure, count, report.

Two phases, each on a simulated device that runs beside the CPU (timing-only: no onnxruntime on the host's
cores, as an NPU computes off them):

1. **host**: no device time at all, so what is measured is the serving stack: ge's identity and tiny LLaMA
   against Python-backend floors for the same tensors (targets P3, P7, and ge's host time per execute).
2. **replica**: the seed's direct AscendCL times (78 / 145 / 220 ms at batch 1 / 4 / 8) as the device time,
   the seed's table measured again: the direct engine, Triton at client batches 1 / 4 / 8 and at the
   concurrency that serves the most, the naive per-request model, and 1 × 1 / 2 × 1 / 1 × 2 (as served)
   instances × streams (targets P4, P5).

Order matters for fairness. The direct engine runs before the server starts, so nothing else competes for
the cores. Through Triton, the points a ratio compares are measured back to back, so drift on a shared VM
hits both sides alike, and the pairs of the targets that sit near their thresholds are measured twice,
alternating, for more windows (each target's interval comes from the windows, ``intervals``). The server
runs with the stubs' own timers on (``GE_PLUGIN_STUB_TIMING``); it is stopped before the simulator reports
and the timers are read, because the stubs write them when the server unloads their models.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs

from benchmarks.proof import plot, ratios, report, seed
from benchmarks.proof.repository import (
    FLOOR,
    GE_IDENTITY,
    GE_LLAMA,
    GE_MODELS,
    PACED_FLOOR,
    PY_IDENTITY,
    REPLICA,
    REPLICA_1X1,
    REPLICA_2X1,
    REPLICA_GE,
    REPLICA_NAIVE,
    SEQ_GEARS,
    Repository,
    build_repository,
    models,
)
from benchmarks.proof.result import Result
from ge_plugin.backend import timing
from ge_plugin.errors import BenchError, ServeError
from ge_plugin.measure import allocations as alloc
from ge_plugin.measure import direct, machine, perf, stubtimes
from ge_plugin.measure.progress import Progress
from ge_plugin.measure.records import Allocations, BenchModel, DirectRow, Measurement, Point
from ge_plugin.measure.serverstats import ServerStats, window
from ge_plugin.serve import ServerOptions, TritonServer, free_port

#: the identity pair's concurrencies (host phase): P3a reads c=1, P3b c=8; c=16 for the curve
CONCURRENCIES = (1, 8, 16)
#: the replica's batch-1 concurrencies, for the most throughput (P4b; every run so far had it at 32, with
#: more only queueing) and P5 (c=16)
REPLICA_CONCURRENCIES = (16, 32)
#: 1 × 1 and 2 × 1 are measured at these, next to 1 × 2 (as served, the replica's own sweep): at c=16 the
#: batches are not full unless they form while the device is busy; at c=1 the layouts do not differ, at 32
#: and more every layout fills its batches (the budget of ``make bench`` is 10 minutes)
STREAMS_CONCURRENCIES = (16,)
#: where the stubs' timers write, in the work folder
STUB_TIMING = "stub-timing"
#: models whose allocations are counted when served: the ge models and the naive baseline
_COUNTED = (*GE_MODELS, REPLICA_NAIVE)


@attrs.frozen
class BenchOptions:
    output: Path = Path("bench-results")
    concurrencies: tuple[int, ...] = CONCURRENCIES
    replica_concurrencies: tuple[int, ...] = REPLICA_CONCURRENCIES
    #: perf_analyzer windows in the host phase, and in the replica (whose requests take 78-220 ms)
    measurement_ms: int = 2000
    replica_measurement_ms: int = 4000
    stability_percentage: int = 20
    #: at most this many windows before a point is measured again without the stability check (the targets'
    #: intervals come from the windows, so a point needs them more than it needs three that agree)
    max_trials: int = 5
    seq: int = 16
    direct_seconds: float = 2.0
    direct_min_iterations: int = direct.MIN_ITERATIONS
    #: a subset of the served models by name; empty: all
    models: tuple[str, ...] = ()
    #: --quick: every model once, at client batch 1 and concurrency 1
    smoke: bool = False

    @classmethod
    def quick(cls, **changes) -> BenchOptions:
        """Every model once, short windows, no stability check: proves the pipeline, measures little."""
        base = cls(
            concurrencies=(1,),
            replica_concurrencies=(),
            measurement_ms=300,
            replica_measurement_ms=1000,  # a 78 ms request needs room: 300 ms can end with none
            stability_percentage=perf.NO_STABILITY_CHECK,
            max_trials=3,
            direct_seconds=0.3,
            direct_min_iterations=3,
            smoke=True,
        )
        return attrs.evolve(base, **changes)

    def check(self) -> None:
        """BenchError naming the option that is wrong."""
        problems = []
        if not self.concurrencies or any(c < 1 for c in self.concurrencies):
            problems.append(f"--concurrency needs values >= 1, got {list(self.concurrencies)}")
        if any(c < 1 for c in self.replica_concurrencies):
            problems.append(
                f"--replica-concurrency needs values >= 1, got {list(self.replica_concurrencies)}"
            )
        if self.measurement_ms < 100 or self.replica_measurement_ms < 100:
            problems.append(
                f"--measurement-ms must be >= 100, got {min(self.measurement_ms, self.replica_measurement_ms)}"
            )
        if self.stability_percentage < 1:
            problems.append(f"--stability must be >= 1 percent, got {self.stability_percentage}")
        if self.max_trials < 3:
            problems.append(
                f"--max-trials must be >= 3 (perf_analyzer needs 3 windows), got {self.max_trials}"
            )
        if self.seq not in SEQ_GEARS:
            problems.append(
                f"--seq must be a sequence gear of the LLaMA ({', '.join(map(str, SEQ_GEARS))}), got {self.seq}"
            )
        if self.direct_seconds <= 0:
            problems.append(f"--direct-seconds must be > 0, got {self.direct_seconds:g}")
        known = [m.name for m in models(self.seq)]
        unknown = [name for name in self.models if name not in known]
        if unknown:
            problems.append(f"--model {', '.join(unknown)}: unknown; the bench serves {', '.join(known)}")
        if problems:
            raise BenchError("; ".join(problems))

    def selected(self) -> tuple[BenchModel, ...]:
        every = models(self.seq)
        return tuple(m for m in every if not self.models or m.name in self.models)

    def as_json(self) -> dict:
        data = attrs.asdict(self)
        data["output"] = str(self.output)
        data["concurrencies"] = list(self.concurrencies)
        data["replica_concurrencies"] = list(self.replica_concurrencies)
        data["models"] = [m.name for m in self.selected()]
        return data


def plan(options: BenchOptions) -> list[Point]:
    """Every perf_analyzer run, in order; the points one ratio compares are next to each other, and the
    pairs of P7, P4a/P4c and P5, which sit near their thresholds, come twice (ge, floor, ge again, floor
    again) for their intervals."""
    if options.smoke:
        return [Point(m.name, 1, 1) for m in options.selected()]
    points: list[Point] = []

    def pair(*compared: Point, twice: bool = False) -> None:
        points.extend(compared)
        if twice:
            points.extend(attrs.evolve(p, again=True) for p in compared)

    for c in options.concurrencies:
        pair(Point(GE_IDENTITY, 1, c), Point(PY_IDENTITY, 1, c))
    for b in seed.BATCHES:
        pair(Point(GE_LLAMA, b, 1), Point(FLOOR, b, 1), twice=b == 1)
    for b in seed.BATCHES:
        pair(Point(REPLICA_GE, b, 1), Point(PACED_FLOOR, b, 1), twice=True)
    points.append(Point(REPLICA_NAIVE, 1, 1))
    for c in options.replica_concurrencies:
        if c == ratios.NAIVE_CONCURRENCY:
            pair(Point(REPLICA_GE, 1, c), Point(REPLICA_NAIVE, 1, c), twice=True)
        else:
            points.append(Point(REPLICA_GE, 1, c))
    for c in STREAMS_CONCURRENCIES:
        points += [Point(REPLICA_1X1, 1, c), Point(REPLICA_2X1, 1, c)]
    names = {m.name for m in options.selected()}
    return [p for p in points if p.model in names]


def run_bench(
    options: BenchOptions, *, say: Callable[[str], None] = print, progress: Progress | None = None
) -> tuple[Result, dict[str, Path]]:
    """Everything ``ge-plugin bench`` does; returns the result and the files written."""
    options.check()
    plot.require_matplotlib()
    load = os.getloadavg()
    selected = options.selected()
    by_name = {m.name: m for m in selected}
    points = plan(options)
    perf_version = perf.version()  # fails early, with the fix, when perf_analyzer cannot run
    out = Path(options.output)
    direct_groups = _direct_groups(selected)
    counted = [m for m in selected if m.name in _COUNTED]
    steps = 2 + len(direct_groups) + len(points) + bool(counted)
    bar = progress or Progress(steps)

    bar.show("building models, sim OMs and the repository")
    repo = build_repository(out / "work", seq=options.seq)
    bar.advance()
    # The simulated device's queue is this run's own: other users' simulators on the host never hold it.
    sim_env = {"GE_PLUGIN_SIM_DEVICE_LOCK_DIR": str(repo.work / "device-locks")}

    direct_rows: list[DirectRow] = []
    allocations: list[Allocations] = []
    for phase, names in direct_groups.items():
        bar.show(f"direct engine, no Triton ({phase}: {', '.join(names)})")
        rows, counts = direct.run_child(
            repo.root,
            {name: repo.inputs[name] for name in names},
            seconds=options.direct_seconds,
            min_iterations=options.direct_min_iterations,
            output=repo.work / f"direct-{phase}.json",
            environment=sim_env,
        )
        direct_rows += rows
        allocations += counts
        bar.advance()

    notes: list[str] = []
    timings = repo.work / STUB_TIMING
    shutil.rmtree(timings, ignore_errors=True)
    server_options = ServerOptions(
        repository=repo.root,
        http_port=free_port(),
        grpc_port=free_port(),
        metrics_port=free_port(),
        work_dir=repo.work / "triton",
        environment={"GE_PLUGIN_SIM_REPORT_DIR": str(repo.reports), timing.ENV: str(timings), **sim_env},
        open_apis=perf.SERVER_APIS,
        grpc_guard=False,  # tritonserver itself, as the proof's tables have it (the front: benchmarks/grpc_front.py)
    )
    log_path = repo.work / "tritonserver.log"
    bar.show(f"starting tritonserver (log: {log_path})")
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(open(log_path, "wb"))
        server = stack.enter_context(TritonServer(server_options, stdout=log, stderr=log))
        try:
            server.wait_ready(timeout=300, models=[m.name for m in selected])
        except ServeError as exc:
            raise BenchError(f"{exc}; see {log_path}") from None
        stats = stack.enter_context(ServerStats(server.http_url, server.metrics_url))
        server_version = stats.version()
        stubs = alloc.stub_models(server.process.pid)
        bar.advance()
        measurements = _measure(options, points, by_name, server.grpc_url, stats, repo, bar)
        requests = {m.name: stats.read(m.name).inferences for m in counted}
        bar.show("stopping the server; reading the stubs' simulator reports")
    if timings.is_dir():
        measurements = stubtimes.attach(measurements, timing.read(timings))
    else:
        notes.append(f"the stubs wrote no timings to {timings}: nothing inside the stub is shown")
    if counted:
        try:
            allocations += alloc.served(
                alloc.read_reports(repo.reports),
                stubs,
                requests=requests,
                at_start=_mallocs_at_start(allocations, repo, [m.name for m in counted]),
            )
        except BenchError as exc:
            notes.append(f"served allocations not counted: {exc}")
        bar.advance()

    result = Result(
        label=machine.label(machine.cores()),
        created=datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat(),
        machine=machine.describe(tritonserver=server_version, perf_analyzer=perf_version, load_average=load),
        options=options.as_json(),
        models=selected,
        triton=tuple(measurements),
        direct=tuple(direct_rows),
        allocations=tuple(allocations),
        targets=tuple(ratios.evaluate(measurements, direct_rows, allocations)),
        notes=tuple(notes),
    )
    paths = report.write(result, out)
    bar.close(f"done: {paths['markdown']}")
    say(report.markdown(result, plot=None))
    say("written: " + ", ".join(str(p) for p in paths.values()))
    return result, paths


def _direct_groups(selected: Sequence[BenchModel]) -> dict[str, list[str]]:
    """The ge models timed in-process, one child process per phase (one acl.json per process): the served
    LLaMA of each phase and the identity; the replica's 1 × 1 and 2 × 1 run the same executes."""
    timed = (GE_IDENTITY, GE_LLAMA, REPLICA_GE)
    groups: dict[str, list[str]] = {}
    for m in selected:
        if m.name in timed:
            groups.setdefault(m.phase, []).append(m.name)
    return groups


def _mallocs_at_start(
    allocations: Sequence[Allocations], repo: Repository, names: Sequence[str]
) -> dict[str, int]:
    """Mallocs one instance of each counted model makes before its first request: one lane's buffers (as
    the direct run counted them for a lane of the same OM) times its lanes. The naive model allocates
    nothing at load."""
    streams = {spec.name: spec.placement.streams_per_instance for spec in repo.specs}
    per_lane: dict[str, int] = {}  # bench spec file -> mallocs of one lane
    for a in allocations:
        if a.where == "direct" and a.model in GE_MODELS:
            per_lane.setdefault(GE_MODELS[a.model].spec_file, a.mallocs_at_start // streams[a.model])
    start = {}
    for name in names:
        if name not in GE_MODELS:
            start[name] = 0
        elif GE_MODELS[name].spec_file in per_lane:
            start[name] = per_lane[GE_MODELS[name].spec_file] * streams[name]
    return start


def _measure(
    options: BenchOptions,
    points: Sequence[Point],
    models_by_name: Mapping[str, BenchModel],
    grpc_url: str,
    stats: ServerStats,
    repo: Repository,
    bar: Progress,
) -> list[Measurement]:
    """Every point in order, with the server's counters read around each; a point measured again adds its
    windows to its first run's."""
    host = perf.PerfSettings(options.measurement_ms, options.stability_percentage, options.max_trials)
    replica = attrs.evolve(host, measurement_ms=options.replica_measurement_ms)
    measurements: list[Measurement] = []
    for point in points:
        model = models_by_name[point.model]
        bar.show(
            f"{model.name} at batch {point.batch}, concurrency {point.concurrency}"
            + (" (again)" if point.again else "")
        )
        before = stats.read(model.name)
        measured = perf.measure(
            model,
            url=grpc_url,
            concurrency=point.concurrency,
            settings=replica if model.phase == REPLICA else host,
            input_data=repo.inputs[model.name],
            work=repo.work / "perf",
            batch=point.batch,
            check_stability=not point.again,
            tag="-again" if point.again else "",
        )
        after = stats.read(model.name)
        first = next(
            (
                k
                for k, m in enumerate(measurements)
                if point.again
                and (m.model, m.batch, m.row.concurrency) == (point.model, point.batch, point.concurrency)
            ),
            None,
        )
        if first is None:
            measurements.append(attrs.evolve(measured, server=window(before, after)))
        else:
            earlier = measurements[first]
            measurements[first] = attrs.evolve(
                earlier, windows=earlier.windows + measured.windows, spans=earlier.spans + measured.spans
            )
        bar.advance()
    return measurements


def parse_concurrencies(text: str) -> tuple[int, ...]:
    """``1,2,4`` -> (1, 2, 4); ValueError with the offending item."""
    values = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) < 1:
            raise ValueError(f"{item!r} is not a concurrency (an integer >= 1)")
        values.append(int(item))
    return tuple(values)
