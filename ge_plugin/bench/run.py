"""``ge-plugin bench`` from start to end: build, time the engine alone, serve, sweep, count, report.

Order matters for fairness. The direct engine runs before the server starts, so nothing else competes for
the cores. Through Triton, every model is measured at one concurrency before any model moves to the next,
so the rows a ratio compares are measured back to back and drift on a shared VM hits both sides alike. The server is stopped before the simulator reports are read, because the stubs write them
when the server unloads their models.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs

from ge_plugin.bench import allocations as alloc
from ge_plugin.bench import direct, machine, peer, perf, plot, ratios, report, serverstats
from ge_plugin.bench.progress import Progress
from ge_plugin.bench.repository import SEQ_GEARS, BenchModel, build_repository, models
from ge_plugin.errors import BenchError, ServeError
from ge_plugin.serve import ServerOptions, TritonServer, free_port

CONCURRENCIES = (1, 2, 4, 8, 16)
PEERS = ("", "pytriton")
#: models whose allocations are counted when served: the ge models and the naive baseline
_COUNTED = ("ge_identity", "ge_llama", "naive_llama")


@attrs.frozen
class BenchOptions:
    output: Path = Path("bench-results")
    concurrencies: tuple[int, ...] = CONCURRENCIES
    measurement_ms: int = 2000
    stability_percentage: int = 20
    max_trials: int = 8
    seq: int = 16
    device_latency_ms: float = 0.0
    direct_seconds: float = 2.0
    #: a subset of the served models by name; empty: all four
    models: tuple[str, ...] = ()
    #: "pytriton": also serve the LLaMA ONNX with PyTriton + onnxruntime and measure it in the same sweep
    peer: str = ""

    @classmethod
    def quick(cls, **changes) -> BenchOptions:
        """One concurrency, short windows, no stability check: proves the pipeline, measures little."""
        base = cls(
            concurrencies=(1,),
            measurement_ms=300,
            stability_percentage=perf.NO_STABILITY_CHECK,
            max_trials=3,
            direct_seconds=0.3,
        )
        return attrs.evolve(base, **changes)

    def check(self) -> None:
        """BenchError naming the option that is wrong."""
        problems = []
        if not self.concurrencies or any(c < 1 for c in self.concurrencies):
            problems.append(f"--concurrency needs values >= 1, got {list(self.concurrencies)}")
        if self.measurement_ms < 100:
            problems.append(f"--measurement-ms must be >= 100, got {self.measurement_ms}")
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
        if self.device_latency_ms < 0:
            problems.append(f"--device-latency-ms must be >= 0, got {self.device_latency_ms:g}")
        if self.direct_seconds <= 0:
            problems.append(f"--direct-seconds must be > 0, got {self.direct_seconds:g}")
        if self.peer not in PEERS:
            problems.append(
                f"--peer {self.peer}: unknown; the bench knows {', '.join(p for p in PEERS if p)}"
            )
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
        data["models"] = [m.name for m in self.selected()]
        return data


def run_bench(
    options: BenchOptions, *, say: Callable[[str], None] = print, progress: Progress | None = None
) -> tuple[report.Result, dict[str, Path]]:
    """Everything ``ge-plugin bench`` does; returns the result and the files written."""
    options.check()
    plot.require_matplotlib()
    selected = options.selected()
    swept = selected + ((peer.model(options.seq),) if options.peer else ())
    perf_version = perf.version()  # fails early, with the fix, when perf_analyzer cannot run
    out = Path(options.output)
    ge_selected = [m for m in selected if m.backend == "ge"]
    counted = [m for m in selected if m.name in _COUNTED]
    steps = 2 + bool(ge_selected) + len(options.concurrencies) * len(swept) + bool(counted)
    bar = progress or Progress(steps)

    bar.show("building models, sim OMs and the repository")
    repo = build_repository(out / "work", seq=options.seq)
    bar.advance()
    sim_env = (
        {"GE_PLUGIN_SIM_EXECUTE_LATENCY_MS": f"{options.device_latency_ms:g}"}
        if options.device_latency_ms
        else {}
    )

    direct_rows: list[direct.DirectRow] = []
    allocations: list[direct.Allocations] = []
    if ge_selected:
        bar.show("direct engine, no Triton")
        direct_rows, allocations = direct.run_child(
            repo.root,
            {m.name: repo.inputs[m.name] for m in ge_selected},
            seconds=options.direct_seconds,
            output=repo.work / "direct.json",
            environment=sim_env,
        )
        bar.advance()

    notes: list[str] = []
    server_options = ServerOptions(
        repository=repo.root,
        http_port=free_port(),
        grpc_port=free_port(),
        metrics_port=free_port(),
        work_dir=repo.work / "triton",
        environment={"GE_PLUGIN_SIM_REPORT_DIR": str(repo.reports), **sim_env},
    )
    log_path = repo.work / "tritonserver.log"
    bar.show(f"starting tritonserver (log: {log_path})")
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(open(log_path, "wb"))
        server = stack.enter_context(TritonServer(server_options, stdout=log, stderr=log))
        try:
            server.wait_ready(timeout=180)
        except ServeError as exc:
            raise BenchError(f"{exc}; see {log_path}") from None
        server_version = serverstats.get_json(f"http://{server.http_url}/v2").get("version", "unknown")
        stubs = alloc.stub_models(server.process.pid)
        endpoints = {m.name: server for m in selected}
        inputs = dict(repo.inputs)
        if options.peer:
            bar.show("starting the PyTriton peer")
            (llama,) = [spec for spec in repo.specs if spec.name == "ge_llama"]
            ports = (free_port(), free_port(), free_port())
            pytriton = peer.Peer.start(
                repo.work / "models" / "tiny_llama.onnx", work=repo.work, ports=ports, like=llama
            )
            stack.callback(pytriton.stop)
            endpoints[peer.MODEL] = pytriton
            inputs[peer.MODEL] = repo.inputs["ge_llama"]
        bar.advance()
        measurements = _sweep(options, swept, endpoints, inputs, repo.work / "perf", bar)
        requests = {
            m.name: serverstats.read(server.http_url, server.metrics_url, m.name).inferences for m in counted
        }
        bar.show("stopping the servers; reading the stubs' simulator reports")
    if counted:
        at_start = {a.model: a.mallocs_at_start for a in allocations}
        # The naive model allocates nothing before its first request (loading is not a malloc).
        at_start.update({m.name: 0 for m in counted if m.name == "naive_llama"})
        try:
            allocations += alloc.served(
                alloc.read_reports(repo.reports), stubs, requests=requests, at_start=at_start
            )
        except BenchError as exc:
            notes.append(f"served allocations not counted: {exc}")
        bar.advance()

    result = report.Result(
        label=machine.label(machine.cores(), options.device_latency_ms),
        created=datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat(),
        machine=machine.describe(tritonserver=server_version, perf_analyzer=perf_version),
        options=options.as_json(),
        models=swept,
        triton=tuple(measurements),
        direct=tuple(direct_rows),
        allocations=tuple(allocations),
        targets=tuple(
            ratios.evaluate(
                measurements, direct_rows, allocations, device_latency_ms=options.device_latency_ms
            )
        ),
        notes=tuple(notes),
    )
    paths = report.write(result, out)
    bar.close(f"done: {paths['markdown']}")
    say(report.markdown(result, plot=None))
    say("written: " + ", ".join(str(p) for p in paths.values()))
    return result, paths


def _sweep(
    options: BenchOptions,
    swept: Sequence[BenchModel],
    endpoints: Mapping[str, TritonServer | peer.Peer],
    inputs: Mapping[str, Path],
    work: Path,
    bar: Progress,
) -> list[perf.Measurement]:
    """Every model at one concurrency, then every model at the next, with the server's counters around each."""
    settings = perf.PerfSettings(options.measurement_ms, options.stability_percentage, options.max_trials)
    measurements = []
    for concurrency in options.concurrencies:
        for model in swept:
            bar.show(f"{model.name} at concurrency {concurrency}")
            server = endpoints[model.name]
            before = serverstats.read(server.http_url, server.metrics_url, model.name)
            measured = perf.measure(
                model,
                url=server.grpc_url,
                concurrency=concurrency,
                settings=settings,
                input_data=inputs[model.name],
                work=work,
            )
            after = serverstats.read(server.http_url, server.metrics_url, model.name)
            measurements.append(attrs.evolve(measured, **attrs.asdict(serverstats.window(before, after))))
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
