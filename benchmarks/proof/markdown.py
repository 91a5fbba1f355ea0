"""A bench run as the markdown report people read. Every section heading says "CPU simulator (timing-only),
N cores" (the run's label)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from benchmarks.proof import seed
from benchmarks.proof.analysis import (
    LAYOUTS,
    device_bound,
    device_bound_gears,
    host_rows,
    leading,
    replica_rows,
    stub_rows,
)
from benchmarks.proof.ratios import (
    added_ms,
    at,
    p50_ms,
    paced_added_ms,
)
from benchmarks.proof.report_json import PLOT
from benchmarks.proof.repository import (
    REPLICA_GE,
    REPLICA_NAIVE,
)
from benchmarks.proof.result import Result
from ge_plugin.measure.perf import NO_STABILITY_CHECK


def _ms(us: float) -> str:
    return f"{us / 1e3:.2f}"


def _opt(value: float | None, spec: str, prefix: str = "") -> str:
    return "–" if value is None else prefix + format(value, spec)


def markdown(result: Result, *, plot: str | None = PLOT) -> str:
    lines = _head(result)
    lines += _seed_section(result)
    lines += _targets_section(result)
    lines += _host_section(result)
    lines += _stub_section(result)
    lines += _layouts_section(result)
    lines += _triton_section(result)
    lines += _direct_section(result)
    lines += _allocations_section(result)
    if result.notes:
        lines += ["", "Notes:", ""] + [f"- {note}" for note in result.notes]
    if plot:
        lines += ["", f"![the seed's table replicated, and the host phase: {result.label}]({plot})"]
    return "\n".join(lines) + "\n"


def _head(result: Result) -> list[str]:
    m, o = result.machine, result.options
    load = m.get("load_average")
    return [
        f"# ge-plugin bench: {result.label}",
        "",
        f"**{result.label}: not NPU time.** The simulator runs sim OMs in timing-only mode: it checks every "
        "pyACL call's arguments as always but moves, zero-fills and computes nothing (outputs hold whatever their "
        "staging held), and an execute takes the device time its "
        "profile gives, waiting off the CPU as a host waits for an NPU. The host phase has no device time; the "
        f"replica takes {seed.SOURCE}'s direct times per batch gear ({seed.DIRECT_MS[1]:g} / "
        f"{seed.DIRECT_MS[4]:g} / {seed.DIRECT_MS[8]:g} ms at batch 1 / 4 / 8).",
        "",
        f"- Machine: {m['cpu']}, {m['cores']} cores"
        + (f", {m['memory_gib']} GiB" if m.get("memory_gib") else "")
        + f"; {m['os']}; load average at start {', '.join(map(str, load)) if load else 'unknown'}",
        f"- Software: Python {m['python']}, numpy {m['numpy']}, ge-plugin {m['ge_plugin']} (fast path: "
        f"{m['fastpath']}); tritonserver {m['tritonserver']}; perf_analyzer {m['perf_analyzer']} over gRPC",
        f"- perf_analyzer windows: {o['measurement_ms']} ms (host), {o['replica_measurement_ms']} ms (replica)"
        + (
            f", stability {o['stability_percentage']} %"
            if o.get("stability_percentage", 0) < NO_STABILITY_CHECK
            else ", stability check off"
        ),
        f"- Tiny LLaMA requests: {o['seq']} tokens per row (input_ids [B,{o['seq']}] -> logits [B,{o['seq']},32000] "
        f"fp32, {o['seq'] * 32000 * 4 / 2**20:.0f} MiB per row); direct engine: {o['direct_seconds']:g} s per "
        "batch size",
        f"- Run {result.created}",
    ]


def _seed_section(result: Result) -> list[str]:
    return [
        "",
        f"## The seed's table, replicated: {result.label}",
        "",
        f"The first three rows are {seed.SOURCE}. Ours: the tiny LLaMA on the simulated device with those "
        "direct times, Triton at client batches of 1 / 4 / 8 rows, concurrency 1; the most rows/s over the "
        "concurrency sweep. The floor is a Python-backend model returning precomputed logits of the same size "
        "with no device: what Triton, the Python backend and gRPC cost for that response alone. The paced floor "
        "does the same after waiting the device time of the batch, so its transport runs after the same idle "
        "gap as the replica's; what it adds beyond the device time is what any model at that pace pays.",
        "",
        "| row | batch 1 p50 ms | batch 4 p50 ms | batch 8 p50 ms | most rows/s |",
        "|---|--:|--:|--:|--:|",
        *_seed_rows(),
        *_our_rows(result),
    ]


def _table_row(label: str, cells: Iterable[str], last: str = "–") -> str:
    """One markdown row of the seed's table: the label, a cell per batch size, the most rows/s."""
    return f"| {label} | " + " | ".join(cells) + f" | {last} |"


def _seed_rows() -> list[str]:
    """The seed's own three rows, as published."""
    added = [seed.TRITON_MS[b] - seed.DIRECT_MS[b] for b in seed.BATCHES]
    return [
        _table_row(
            "seed: direct AscendCL",
            (f"{seed.DIRECT_MS[b]:g}" for b in seed.BATCHES),
            f"{seed.DIRECT_MAX_RPS:g}",
        ),
        _table_row(
            "seed: Triton + CANN GE backend",
            (f"{seed.TRITON_MS[b]:g}" for b in seed.BATCHES),
            f"{seed.TRITON_MAX_RPS:g}",
        ),
        _table_row(
            "seed: added by Triton",
            (f"+{a:g}" for a in added),
            f"{seed.TRITON_MAX_RPS / seed.DIRECT_MAX_RPS:.2f}×",
        ),
    ]


def _minus(a: float | None, b: float | None) -> float | None:
    return a - b if a is not None and b is not None else None


def _our_rows(result: Result) -> list[str]:
    """The same rows measured here, then the floors that say how much of Triton's addition any model pays."""
    ours = replica_rows(result)
    d, t, f, paced = ours["direct_ms"], ours["triton_ms"], ours["floor_ms"], ours["paced_floor_ms"]
    best_d, best_t = ours["direct_max_rows_per_s"], ours["triton_max_rows_per_s"]
    added = [added_ms(result.triton, result.direct, b) for b in seed.BATCHES]
    paced_added = [paced_added_ms(result.triton, b) for b in seed.BATCHES]
    ratio = best_t / best_d if best_t and best_d else None
    lines = [
        _table_row(
            "ours: direct engine",
            (_opt(d[str(b)], ".2f") for b in seed.BATCHES),
            _opt(best_d, ".1f") + (f" (batch {ours['direct_max_at_batch']})" if best_d else ""),
        ),
        _table_row(
            "ours: Triton + ge backend (1 instance × 2 streams, as served)",
            (_opt(t[str(b)], ".2f") for b in seed.BATCHES),
            _opt(best_t, ".1f") + (f" (c={ours['triton_max_at_concurrency']})" if best_t else ""),
        ),
        _table_row(
            "ours: added by Triton",
            (_opt(a, ".2f", "+" if a is not None and a >= 0 else "") for a in added),
            _opt(ratio, ".2f") + ("×" if ratio is not None else ""),
        ),
        _table_row(
            "ours: the same-size floor, no device (2 / 8 / 16 MiB)",
            (_opt(f[str(b)], ".2f") for b in seed.BATCHES),
        ),
        _table_row(
            "ours: added minus the floor",
            (_opt(_minus(a, f[str(b)]), "+.2f") for a, b in zip(added, seed.BATCHES)),
        ),
        _table_row(
            "ours: the paced floor (waits the device time, then returns the logits)",
            (_opt(paced[str(b)], ".2f") for b in seed.BATCHES),
        ),
        _table_row(
            "ours: added minus what the paced floor adds to its wait",
            (_opt(_minus(a, p), "+.2f") for a, p in zip(added, paced_added)),
        ),
    ]
    naive_1 = p50_ms(result.triton, REPLICA_NAIVE, 1)
    if naive_1 is not None or ours["naive_rows_per_s"]:
        lines.append(
            _table_row(
                "ours: naive per-request pyACL through Triton",
                [_opt(naive_1, ".2f"), "–", "–"],
                _opt(ours["naive_rows_per_s"], ".1f")
                + (f" (c={ours['naive_at_concurrency']})" if ours["naive_rows_per_s"] else ""),
            )
        )
    return lines


def _targets_section(result: Result) -> list[str]:
    lines = [
        "",
        f"## Targets: {result.label}",
        "",
        "Each value with its 95 % interval from the windows of the points it compares (perf_analyzer's "
        "measurement windows, stretches of the direct engine's calls; `intervals`). Verdict: *met* when the "
        "whole interval meets the target, *missed* when none of it does, *within noise* when it straddles "
        "the threshold.",
        "",
        "| id | what | target | measured | 95 % interval | from | verdict |",
        "|---|---|---|--:|--:|---|---|",
    ]
    for t in result.targets:
        lines.append(
            f"| {t.id} | {t.what} | {t.show_target()} | {t.show_value()} | {t.show_interval()} | {t.detail} "
            f"| {t.verdict()} |"
        )
    return lines


def _host_section(result: Result) -> list[str]:
    rows = host_rows(result)
    if not rows:
        return []
    lines = [
        "",
        f"## Host time per execute: {result.label}",
        "",
        "Concurrency 1, one request per execute, µs. *Stream* is the engine's time from queueing the copies and "
        "the execute until the stream is synchronized: the simulator's H2D, execute (its device time, and its "
        "own Python and memsets) and D2H. *Host* is the rest: what ge-plugin's backend and engine spend. The "
        "floor's compute infer is the Python backend's `execute` for the same response with nothing to run. "
        "A model with `streams_per_instance` > 1 returns from `execute` once its batch is staged and answers "
        "from its completion thread: its compute infer ends before its stream, and its served host time cannot "
        "be read from it (–).",
        "",
        "| model | batch | direct µs | direct: stream | direct: host | served: compute infer | served: stream "
        "| served: host | floor | floor's compute infer |",
        "|---|--:|--:|--:|--:|--:|--:|--:|---|--:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['batch']} | {_opt(r['direct_us'], '.0f')} | {_opt(r['direct_stream_us'], '.0f')} "
            f"| {_opt(r['direct_host_us'], '.0f')} | {_opt(r['compute_infer_us'], '.0f')} "
            f"| {_opt(r['stream_us'], '.0f')} | {_opt(r['host_us'], '.0f')} | {r['floor'] or '–'} "
            f"| {_opt(r['floor_compute_infer_us'], '.0f')} |"
        )
    return lines


def _stub_section(result: Result) -> list[str]:
    rows = stub_rows(result)
    if not rows:
        return []
    lines = [
        "",
        f"## Inside the stub: {result.label}",
        "",
        "The stubs' own timers (`GE_PLUGIN_STUB_TIMING`, on for every model of the run), concurrency 1, medians "
        "over the point's executes, µs. *Read*: from the requests to the arrays the model takes, per request; "
        "*work*: the model's own part of `execute` (ge: the engine, the simulated stream included; the floors: "
        "finding the logits, and for the paced floor its wait); *respond*: building the responses, per request. "
        "A ge model with `streams_per_instance` > 1 answers from its completion thread: its work is the submit "
        "(validating, staging, launching) and it has no responding inside `execute` (–).",
        "",
        "| model | floor | batch | read: ge | read: floor | respond: ge | respond: floor | work: ge "
        "| of which stream | work: floor | executes: ge / floor |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]

    def cell(stub: dict | None, key: str) -> str:
        return "–" if stub is None or stub.get(key) is None else f"{stub[key]:.1f}"

    for r in rows:
        ge, floor = r["ge"], r["floor_stub"]
        lines.append(
            f"| {r['model']} | {r['floor']} | {r['batch']} | {cell(ge, 'read_us')} | {cell(floor, 'read_us')} "
            f"| {cell(ge, 'respond_us')} | {cell(floor, 'respond_us')} | {cell(ge, 'work_us')} "
            f"| {cell(ge, 'stream_us')} | {cell(floor, 'work_us')} "
            f"| {ge['executes'] if ge else '–'} / {floor['executes'] if floor else '–'} |"
        )
    return lines


def _sizes(batch_sizes: Mapping[str, int] | None) -> str:
    """``8×20, 7×2``: executes per batch size (or gear), largest first."""
    if not batch_sizes:
        return "–"
    return ", ".join(
        f"{size}×{count}" for size, count in sorted(batch_sizes.items(), key=lambda x: (-leading(x[0]), x[0]))
    )


def _layouts_section(result: Result) -> list[str]:
    cs = sorted({m.row.concurrency for m in result.triton if m.model in LAYOUTS and m.batch == 1})
    if not any(m.model in LAYOUTS and m.model != REPLICA_GE for m in result.triton):
        return []
    lines = [
        "",
        f"## Instances × streams in the replica: {result.label}",
        "",
        "The replica's LLaMA with 1 instance × 1 stream, 2 × 1 and 1 × 2 (`streams_per_instance: 2`, as served), "
        "client batch 1. All three share the one simulated device, which computes one execute at a time. Each "
        "cell: rows/s measured / rows/s the device allows for the executes it ran (their rows over the seed's "
        "time of their gears); p50 ms; rows per device execute.",
        "",
        "| instances × streams | " + " | ".join(f"c={c}" for c in cs) + " |",
        "|---|" + "--:|" * len(cs),
    ]
    for name, layout in LAYOUTS.items():
        cells = []
        for c in cs:
            m = at(result.triton, name, c)
            if m is None:
                cells.append("–")
                continue
            if m.server.gear_executes:
                bound = device_bound_gears(m.server.gear_executes, m.server.rows_per_device_execute)
                per_execute = m.server.rows_per_device_execute
            else:
                bound, per_execute = device_bound(m.server.batch_sizes), m.server.rows_per_execute
            cells.append(
                f"{m.row.throughput:.1f} / {_opt(bound, '.1f')}; {m.row.p50_us / 1e3:.1f} ms; {_opt(per_execute, '.2f')}"
            )
        lines.append(f"| {layout} | " + " | ".join(cells) + " |")
    return lines


def _triton_section(result: Result) -> list[str]:
    lines = [
        "",
        f"## Through Triton (perf_analyzer): {result.label}",
        "",
        'Averages per request except p50/p99; rows/s counts rows (a client batch of 4 is 4). "Executes by rows" '
        "are Triton's (`execute` calls); \"ge executes by gear\" the device's, which differ when a batch held open "
        'takes the requests of several `execute` calls (`streams_per_instance` > 1). "ge stream ms" is one '
        "engine execute on the simulated stream.",
        "",
        "| model | what | phase | batch | c | rows/s | p50 ms | p99 ms | client send+recv ms "
        "| network + server send/recv ms | queue ms | compute input ms | compute infer ms | compute output ms "
        "| rows per execute | executes by rows | ge executes by gear | ge stream ms per execute |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|--:|",
    ]
    order = {model.name: k for k, model in enumerate(result.models)}
    rows = sorted(result.triton, key=lambda x: (order.get(x.model, 99), x.batch, x.row.concurrency))
    for meas in rows:
        r = meas.row
        star = " (not measured)" if not meas.measured else "" if meas.stable else " (unstable)"
        model = result.model(meas.model)
        lines.append(
            f"| {meas.model} | {model.what} | {model.phase} | {meas.batch} | {r.concurrency} | {r.throughput:.1f}{star} "
            f"| {_ms(r.p50_us)} | {_ms(r.p99_us)} | {_ms(r.client_send_us + r.client_recv_us)} | {_ms(r.network_us)} "
            f"| {_ms(r.server_queue_us)} | {_ms(r.server_compute_input_us)} | {_ms(r.server_compute_infer_us)} "
            f"| {_ms(r.server_compute_output_us)} | {_opt(meas.server.rows_per_execute, '.2f')} "
            f"| {_sizes(meas.server.batch_sizes)} | {_sizes(meas.server.gear_executes)} "
            f"| {_opt(meas.server.engine_ms_per_execute, '.2f')} |"
        )
    if any(not x.stable and x.measured for x in result.triton):
        lines += [
            "",
            "(unstable): perf_analyzer found no three windows in a row within the stability percentage; "
            "the point was measured again over 3 windows without that check.",
        ]
    failed = [x for x in result.triton if not x.measured]
    if failed:
        lines += [
            "",
            "(not measured): perf_analyzer gave no result even without the stability check; the row holds the "
            "medians of the windows it got, and no target reads it:",
        ]
        lines += [
            f"- {x.model} at batch {x.batch}, concurrency {x.row.concurrency}: {x.failure} "
            f"({len(x.windows)} windows)"
            for x in failed
        ]
    return lines


def _direct_section(result: Result) -> list[str]:
    lines = [
        "",
        f"## Direct engine, no Triton: {result.label}",
        "",
        "The engine in-process on the same sim OM and config (and so the same simulated device), sequential "
        "`execute` calls of one batch each, outputs read where they land (views of the engine's staging).",
        "",
        "| model | phase | batch | calls | rows/s | p50 ms | p99 ms | stream ms per call | host µs per call |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    phases = {m.name: m.phase for m in result.models}
    for d in result.direct:
        lines.append(
            f"| {d.model} | {phases.get(d.model, '–')} | {d.batch} | {d.iterations} | {d.throughput:.1f} "
            f"| {d.p50_ms:.3f} | {d.p99_ms:.3f} | {_opt(d.stream_ms, '.3f')} | {_opt(d.host_us, '.0f')} |"
        )
    return lines


def _allocations_section(result: Result) -> list[str]:
    lines = [
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
    return lines
