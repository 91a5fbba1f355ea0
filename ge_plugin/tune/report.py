"""What a sweep tells its user: the Pareto front (p99 against throughput) as a table and a plot, every
candidate with why it was tried and what became of it, the choice, and the same as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from ge_plugin.errors import TuneError
from ge_plugin.tune.records import Candidate, TunePoint
from ge_plugin.tune.space import KNOBS, SPEC_KEYS, Config, show

if TYPE_CHECKING:
    from ge_plugin.tune.run import Outcome

MARKDOWN = "report.md"
JSON = "report.json"
PLOT = "pareto.png"


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise TuneError(
            "ge-plugin tune draws its plot with matplotlib: pip install 'ge-plugin[bench]'"
        ) from None


def changes(config: Config, start: Config) -> str:
    """The knobs where ``config`` differs from the input spec, or "as given"."""
    diff = [f"{k}={show(config.get(k))}" for k in KNOBS if config.get(k) != start.get(k)]
    return ", ".join(diff) if diff else "as given"


def _point(p: TunePoint) -> str:
    return f"{p.throughput:.1f}/s, p99 {p.p99_ms:.2f} ms" + ("" if p.stable else " (unstable)")


def markdown(outcome: Outcome) -> str:
    o = outcome.options
    r = outcome.result
    start = r.candidates[0].config
    lines = [
        f"# ge-plugin tune: {outcome.spec.name}",
        "",
        f"**{outcome.label}**, {outcome.created}. Constraints: {o.constraints.describe()}; concurrency "
        f"{', '.join(map(str, o.concurrencies))}; perf_analyzer over gRPC, {o.measurement_ms} ms windows.",
        "",
        f"- machine: {outcome.machine.get('cpu', '')}, {outcome.machine.get('cores', '')} cores, load average at "
        f"start {outcome.machine.get('load_average')}; tritonserver {outcome.machine.get('tritonserver', '')}, "
        f"perf_analyzer {outcome.machine.get('perf_analyzer', '')}",
    ]
    if outcome.profile is not None:
        lines.append(f"- device time per gear: {outcome.profile.describe()}")
    lines.append(
        f"- search: {len(r.candidates)} candidates in {r.passes} pass(es), {r.elapsed_s / 60:.1f} of "
        f"{o.budget_minutes:g} min; ended: {_ended(r.ended)}"
    )
    lines.append(f"- input spec: {start.describe()}")
    lines.append("")
    if outcome.choice is not None:
        c, p = outcome.choice.candidate, outcome.choice.point
        lines += [
            "## Chosen",
            "",
            f"Candidate #{c.id} ({changes(c.config, start)}) at concurrency {p.concurrency}: "
            f"{p.throughput:.1f} infer/s, p50 {p.p50_ms:.2f} ms, p99 {p.p99_ms:.2f} ms.",
        ]
        if outcome.confirmed is not None:
            q = outcome.confirmed
            verdict = "meets" if o.constraints.met(q) else "**misses**"
            lines.append(
                f"Confirmed from the written spec ({outcome.written}): {q.throughput:.1f} infer/s, p99 "
                f"{q.p99_ms:.2f} ms, which {verdict} the constraints."
            )
        elif outcome.written is not None:
            lines.append(f"Written to {outcome.written} (not confirmed: --no-confirm).")
        if c.device_note:
            lines.append(f"Device time interpolated: {c.device_note}.")
        lines.append("")
    else:
        lines += ["## Chosen", "", f"Nothing met {o.constraints.describe()}.", ""]
    lines += [
        "## Pareto front (p99 against throughput)",
        "",
        "| candidate | changed from the input spec | concurrency | infer/s | p50 ms | p99 ms | rows/execute | meets |",
        "|--:|---|--:|--:|--:|--:|--:|---|",
    ]
    for c, i in outcome.front:
        p = c.points[i]
        lines.append(
            f"| #{c.id} | {changes(c.config, start)} | {p.concurrency} | {p.throughput:.1f} | {p.p50_ms:.2f} | "
            f"{p.p99_ms:.2f} | {_rows(p)} | {'yes' if o.constraints.met(p) else 'no'} |"
        )
    lines += [
        "",
        "## Every candidate",
        "",
        "| # | tried because | changed from the input spec | result | s |",
        "|--:|---|---|---|--:|",
    ]
    for c in r.candidates:
        lines.append(f"| {c.id} | {c.origin} | {changes(c.config, start)} | {_result(c)} | {c.seconds:.0f} |")
    notes = [c for c in r.candidates if c.device_note]
    if notes or outcome.notes:
        lines += ["", "## Notes", ""]
        lines += [f"- {n}" for n in outcome.notes]
        lines += [f"- #{c.id}: {c.device_note}" for c in notes]
    if outcome.front:
        lines += ["", f"![p99 against throughput, {outcome.label}]({PLOT})"]
    return "\n".join(lines) + "\n"


def _ended(why: str) -> str:
    return {
        "converged": "converged (a whole pass moved nothing)",
        "budget": "the time budget (the next candidate would not have fitted)",
        "exhausted": "the pass limit",
    }.get(why, why)


def _rows(p: TunePoint) -> str:
    return "–" if p.rows_per_execute is None else f"{p.rows_per_execute:.2f}"


def _result(c: Candidate) -> str:
    if not c.measured:
        return f"{c.status}: {c.reason}".replace("|", "/")
    return "; ".join(f"c={p.concurrency}: {_point(p)}" for p in c.points)


def summary(outcome: Outcome) -> str:
    """The few lines printed at the end."""
    if outcome.choice is None:
        return "nothing met the constraints"
    c, p = outcome.choice.candidate, outcome.choice.point
    start = outcome.result.candidates[0].config
    text = (
        f"chosen: #{c.id} ({changes(c.config, start)}) at concurrency {p.concurrency}: {p.throughput:.1f} "
        f"infer/s, p99 {p.p99_ms:.2f} ms [{outcome.label}]"
    )
    if outcome.confirmed is not None:
        q = outcome.confirmed
        ok = outcome.options.constraints.met(q)
        text += f"\nconfirmed: {q.throughput:.1f} infer/s, p99 {q.p99_ms:.2f} ms ({'meets' if ok else 'MISSES'} the constraints)"
    return text


def as_json(outcome: Outcome) -> dict[str, Any]:
    def candidate(c: Candidate) -> dict[str, Any]:
        data = attrs.asdict(c)
        data["changed"] = changes(c.config, outcome.result.candidates[0].config)
        return data

    o = outcome.options
    return {
        "label": outcome.label,
        "created": outcome.created,
        "spec": str(o.spec),
        "model": outcome.spec.name,
        "machine": outcome.machine,
        "constraints": attrs.asdict(o.constraints),
        "concurrencies": list(o.concurrencies),
        "measurement_ms": o.measurement_ms,
        "budget_minutes": o.budget_minutes,
        "profile": None
        if outcome.profile is None
        else {
            "where": outcome.profile.where,
            "by_gear": outcome.profile.by_gear,
            "info": outcome.profile.info,
        },
        "knobs": {SPEC_KEYS[k]: k for k in KNOBS},
        "search": {
            "passes": outcome.result.passes,
            "ended": outcome.result.ended,
            "elapsed_s": outcome.result.elapsed_s,
        },
        "candidates": [candidate(c) for c in outcome.result.candidates],
        "pareto": [{"candidate": c.id, "concurrency": c.points[i].concurrency} for c, i in outcome.front],
        "chosen": None
        if outcome.choice is None
        else {"candidate": outcome.choice.candidate.id, "concurrency": outcome.choice.point.concurrency},
        "written": None if outcome.written is None else str(outcome.written),
        "confirmed": None if outcome.confirmed is None else attrs.asdict(outcome.confirmed),
        "notes": list(outcome.notes),
    }


def plot(outcome: Outcome, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    o = outcome.options
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=110)
    every = [(c, p) for c in outcome.result.candidates if c.measured for p in c.points]
    ax.scatter(
        [p.p99_ms for _, p in every],
        [p.throughput for _, p in every],
        s=18,
        color="0.65",
        label="every candidate × concurrency",
        zorder=2,
    )
    front = [c.points[i] for c, i in outcome.front]
    ax.plot(
        [p.p99_ms for p in front],
        [p.throughput for p in front],
        "-o",
        drawstyle="steps-post",  # what is attainable: nothing below a front point's p99 beats its throughput
        color="tab:blue",
        markersize=5,
        label="Pareto front",
        zorder=3,
    )
    for (c, i), p in zip(outcome.front, front):
        ax.annotate(
            f"#{c.id} c={c.points[i].concurrency}",
            (p.p99_ms, p.throughput),
            fontsize=7,
            xytext=(4, 3),
            textcoords="offset points",
        )
    ax.axvline(
        o.constraints.latency_p99_ms,
        color="tab:red",
        linestyle="--",
        linewidth=1,
        label=f"p99 limit {o.constraints.latency_p99_ms:g} ms",
    )
    if o.constraints.min_throughput:
        ax.axhline(
            o.constraints.min_throughput,
            color="tab:red",
            linestyle=":",
            linewidth=1,
            label=f"min throughput {o.constraints.min_throughput:g}/s",
        )
    if outcome.choice is not None:
        p = outcome.choice.point
        ax.scatter(
            [p.p99_ms],
            [p.throughput],
            s=120,
            facecolors="none",
            edgecolors="tab:green",
            linewidths=2,
            label=f"chosen: #{outcome.choice.candidate.id} at c={p.concurrency}",
            zorder=4,
        )
    ax.set_xlabel("p99 latency (ms)")
    ax.set_ylabel("throughput (infer/s)")
    ax.set_title(f"ge-plugin tune: {outcome.spec.name}\n{outcome.label}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write(outcome: Outcome, out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": out / MARKDOWN, "json": out / JSON, "plot": out / PLOT}
    paths["markdown"].write_text(markdown(outcome))
    paths["json"].write_text(json.dumps(as_json(outcome), indent=2, default=str) + "\n")
    plot(outcome, paths["plot"])
    return paths
