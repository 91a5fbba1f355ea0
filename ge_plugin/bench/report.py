"""One bench run as data (``Result``), as JSON with stable keys, and as the markdown report people read.

The JSON holds every row, the machine, the options and each target with its threshold, value and verdict,
so runs can be compared by a script; ``from_json`` reads it back and names the first missing key. Every
section heading and the JSON's ``label`` say "CPU simulator, N cores".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ge_plugin.bench.direct import Allocations, DirectRow
from ge_plugin.bench.perf import NO_STABILITY_CHECK, Measurement, PerfRow
from ge_plugin.bench.ratios import Target
from ge_plugin.bench.repository import BenchModel
from ge_plugin.errors import BenchError

SCHEMA = "ge-plugin-bench/1"
MARKDOWN = "report.md"
JSON = "report.json"
PLOT = "latency_throughput.png"


@attrs.frozen
class Result:
    label: str  #: "CPU simulator, 2 cores"
    created: str  #: ISO 8601, UTC
    machine: dict[str, Any]
    options: dict[str, Any]
    models: tuple[BenchModel, ...]
    triton: tuple[Measurement, ...]
    direct: tuple[DirectRow, ...]
    allocations: tuple[Allocations, ...]
    targets: tuple[Target, ...]
    notes: tuple[str, ...] = ()  #: what the run could not do, said in the report rather than hidden

    def model(self, name: str) -> BenchModel:
        return next(m for m in self.models if m.name == name)


def to_json(result: Result) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "label": result.label,
        "created": result.created,
        "machine": result.machine,
        "options": result.options,
        "models": [attrs.asdict(m) for m in result.models],
        "triton": [_measurement_json(m) for m in result.triton],
        "direct": [attrs.asdict(r) for r in result.direct],
        "allocations": [{**attrs.asdict(a), "per_request": a.per_request} for a in result.allocations],
        "targets": [{**attrs.asdict(t), "passed": t.passed, "verdict": t.verdict()} for t in result.targets],
        "notes": list(result.notes),
        "files": {"markdown": MARKDOWN, "plot": PLOT},
    }


def _measurement_json(m: Measurement) -> dict[str, Any]:
    return {
        "model": m.model,
        "stable": m.stable,
        "requests_per_execute": m.requests_per_execute,
        "engine_ms_per_execute": m.engine_ms_per_execute,
        **attrs.asdict(m.row),
    }


def from_json(data: Mapping[str, Any], *, source: str = "report.json") -> Result:
    """The Result a ``to_json`` dict holds; BenchError names the first key that is missing or wrong."""
    if data.get("schema") != SCHEMA:
        raise BenchError(f"{source}: schema is {data.get('schema')!r}, expected {SCHEMA!r}")

    def each(key: str, build) -> tuple:
        try:
            return tuple(build(item) for item in data[key])
        except KeyError as exc:
            raise BenchError(f"{source}: $.{key}: missing key {exc}") from None
        except (TypeError, ValueError) as exc:
            raise BenchError(f"{source}: $.{key}: {exc}") from None

    def fields(cls: type, item: Mapping[str, Any]) -> dict[str, Any]:
        return {f.name: item[f.name] for f in attrs.fields(cls)}

    try:
        head = {key: data[key] for key in ("label", "created", "machine", "options")}
    except KeyError as exc:
        raise BenchError(f"{source}: missing key {exc}") from None
    return Result(
        **head,
        models=each("models", lambda m: BenchModel(**fields(BenchModel, m))),
        triton=each(
            "triton",
            lambda m: Measurement(
                model=m["model"],
                row=PerfRow(**fields(PerfRow, m)),
                stable=m["stable"],
                requests_per_execute=m["requests_per_execute"],
                engine_ms_per_execute=m["engine_ms_per_execute"],
            ),
        ),
        direct=each("direct", lambda r: DirectRow(**fields(DirectRow, r))),
        allocations=each("allocations", lambda a: Allocations(**fields(Allocations, a))),
        targets=each("targets", lambda t: Target(**fields(Target, t))),
        notes=tuple(data.get("notes", ())),
    )


def _ms(us: float) -> str:
    return f"{us / 1e3:.2f}"


def _opt(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def markdown(result: Result, *, plot: str | None = PLOT) -> str:
    m, o = result.machine, result.options
    latency = o.get("device_latency_ms") or 0
    lines = [
        f"# ge-plugin bench: {result.label}",
        "",
        f"**{result.label}: not NPU time.** Every figure is the ge-plugin simulator running sim OMs with "
        "onnxruntime on this host's CPU; compare rows with each other, not with Ascend hardware.",
        "",
        f"- Machine: {m['cpu']}, {m['cores']} cores"
        + (f", {m['memory_gib']} GiB" if m.get("memory_gib") else "")
        + f"; {m['os']}; Python {m['python']}, numpy {m['numpy']}, onnxruntime {m['onnxruntime']}, "
        f"ge-plugin {m['ge_plugin']} (fast path: {m['fastpath']})",
        f"- Triton: tritonserver {m['tritonserver']}; perf_analyzer {m['perf_analyzer']} over gRPC, batch 1 per "
        f"request, concurrency {', '.join(map(str, o['concurrencies']))}, {o['measurement_ms']} ms windows"
        + (
            f", stability {o['stability_percentage']} %"
            if o.get("stability_percentage", 0) < NO_STABILITY_CHECK
            else ", stability check off"
        ),
        f"- Tiny LLaMA requests: {o['seq']} tokens (input_ids [1,{o['seq']}] -> logits [1,{o['seq']},32000] fp32, "
        f"{o['seq'] * 32000 * 4 / 2**20:.1f} MiB per response)",
        f"- Simulated device time per execute: {f'{latency:g} ms' if latency else 'none'}; "
        f"direct engine: {o['direct_seconds']:g} s per batch size",
        f"- Run {result.created}",
        "",
        f"## Through Triton (perf_analyzer): {result.label}",
        "",
        "| model | what | c | infer/s | p50 ms | p99 ms | client send+recv ms | network + server send/recv ms "
        "| queue ms | compute input ms | compute infer ms | compute output ms | requests per execute "
        "| ge device ms per execute |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    order = {model.name: k for k, model in enumerate(result.models)}
    rows = sorted(result.triton, key=lambda x: (order.get(x.model, 99), x.row.concurrency))
    for meas in rows:
        r = meas.row
        star = "" if meas.stable else " (unstable)"
        lines.append(
            f"| {meas.model} | {result.model(meas.model).what} | {r.concurrency} | {r.throughput:.1f}{star} "
            f"| {_ms(r.p50_us)} | {_ms(r.p99_us)} | {_ms(r.client_send_us + r.client_recv_us)} | {_ms(r.network_us)} "
            f"| {_ms(r.server_queue_us)} | {_ms(r.server_compute_input_us)} | {_ms(r.server_compute_infer_us)} "
            f"| {_ms(r.server_compute_output_us)} | {_opt(meas.requests_per_execute, '.2f')} "
            f"| {_opt(meas.engine_ms_per_execute, '.2f')} |"
        )
    if any(not x.stable for x in result.triton):
        lines += [
            "",
            "(unstable): perf_analyzer found no three windows in a row within the stability percentage; "
            "the point was measured again over 3 windows without that check.",
        ]
    lines += [
        "",
        f"## Direct engine, no Triton: {result.label}",
        "",
        "The engine in-process on the same sim OM and config, sequential `execute` calls of one batch each.",
        "",
        "| model | batch | calls | rows/s | p50 ms | p99 ms |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for d in result.direct:
        lines.append(
            f"| {d.model} | {d.batch} | {d.iterations} | {d.throughput:.1f} | {d.p50_ms:.2f} | {d.p99_ms:.2f} |"
        )
    lines += [
        "",
        f"## Targets: {result.label}",
        "",
        "| id | what | target | measured | from | verdict |",
        "|---|---|---|--:|---|---|",
    ]
    for t in result.targets:
        lines.append(
            f"| {t.id} | {t.what} | {t.show_target()} | {t.show_value()} | {t.detail} | {t.verdict()} |"
        )
    lines += [
        "",
        "## Allocations after warm-up (simulator counters: device + pinned host mallocs)",
        "",
        "| model | where | instances | requests | mallocs at start, per instance | mallocs in total | per request |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for a in result.allocations:
        per = "n/a" if a.per_request is None else f"{a.per_request:.3g}"
        lines.append(
            f"| {a.model} | {a.where} | {a.instances} | {a.requests} | {a.mallocs_at_start} | {a.mallocs_total} | {per} |"
        )
    if result.notes:
        lines += ["", "Notes:", ""] + [f"- {note}" for note in result.notes]
    if plot:
        lines += ["", f"![latency vs throughput, {result.label}]({plot})"]
    return "\n".join(lines) + "\n"


def write(result: Result, directory: Path) -> dict[str, Path]:
    """report.md, report.json and the plot in ``directory``; name -> path."""
    from ge_plugin.bench.plot import plot

    directory.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": directory / MARKDOWN, "json": directory / JSON, "plot": directory / PLOT}
    paths["json"].write_text(json.dumps(to_json(result), indent=2) + "\n")
    plot(result, paths["plot"])
    paths["markdown"].write_text(markdown(result))
    return paths
