"""The pictures: the seed's table replicated (added latency, most rows/s) and the host phase against its floors.

Four panels. Top: what Triton adds to the direct engine at batch 1 / 4 / 8 next to the seed's +4 / +7 / +8 ms
and the same-size floor; the most rows per second, the seed's and ours. Bottom: the identity's p50 against
throughput over concurrency, ge and the Python floor; the tiny LLaMA's p50 per client batch, ge and the
same-size floor. The title says "CPU simulator" so the PNG cannot pass for NPU numbers once it travels
without its report.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.proof import seed
from benchmarks.proof.analysis import LAYOUTS, replica_rows
from benchmarks.proof.ratios import NAIVE_CONCURRENCY, added_ms, at, fastest, p50_ms, paced_added_ms
from benchmarks.proof.repository import FLOOR, GE_IDENTITY, GE_LLAMA, PY_IDENTITY, REPLICA_GE, REPLICA_NAIVE
from benchmarks.proof.result import Result
from ge_plugin.errors import BenchError


def require_matplotlib() -> None:
    """Fail before anything is measured, rather than with an ImportError at the end of a whole run."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise BenchError(
            "ge-plugin bench draws its plot with matplotlib, which is not installed: "
            "pip install 'ge-plugin[bench]'"
        ) from None


def plot(result: Result, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12.4, 8.4))
    _added(axes[0][0], result)
    _most(axes[0][1], result)
    _identity(axes[1][0], result)
    _llama(axes[1][1], result)
    fig.suptitle(f"ge-plugin bench. {result.label}: not NPU time", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def _label_bars(ax, bars, values: list[float | None]) -> None:
    """Each bar's value over it, "n/a" over a bar that stands for nothing measured."""
    for bar, v in zip(bars, values):
        ax.annotate(
            "n/a" if v is None else f"{v:.1f}",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=7,
        )


def _bars(ax, groups: list[str], series: list[tuple[str, list[float | None]]]) -> None:
    width = 0.8 / max(1, len(series))
    for k, (label, values) in enumerate(series):
        xs = [g + (k - (len(series) - 1) / 2) * width for g in range(len(groups))]
        heights = [v if v is not None else 0.0 for v in values]
        _label_bars(ax, ax.bar(xs, heights, width, label=label), values)
    ax.set_xticks(range(len(groups)), groups)
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)


def _added(ax, result: Result) -> None:
    _bars(
        ax,
        [f"batch {b}" for b in seed.BATCHES],
        [
            ("seed: Triton + GE backend", [seed.TRITON_MS[b] - seed.DIRECT_MS[b] for b in seed.BATCHES]),
            ("ours: Triton + ge", [added_ms(result.triton, result.direct, b) for b in seed.BATCHES]),
            ("ours: same-size floor p50", [p50_ms(result.triton, FLOOR, 1, b) for b in seed.BATCHES]),
            (
                "ours: paced floor, added to its wait",
                [paced_added_ms(result.triton, b) for b in seed.BATCHES],
            ),
        ],
    )
    ax.set_title("replica: p50 added by Triton over direct (ms), c=1", fontsize=10)
    ax.set_ylabel("ms")


def _most(ax, result: Result) -> None:
    ours = replica_rows(result)
    layouts = []
    for name, layout in LAYOUTS.items():
        best = fastest(result.triton, name)
        layouts.append((f"ours: Triton {layout}", best.row.throughput if best else None))
    naive = at(result.triton, REPLICA_NAIVE, NAIVE_CONCURRENCY)
    bars = [
        ("seed: direct", seed.DIRECT_MAX_RPS),
        ("seed: Triton", seed.TRITON_MAX_RPS),
        ("ours: direct", ours["direct_max_rows_per_s"]),
        *layouts,
        (f"ours: naive, c={NAIVE_CONCURRENCY}", naive.row.throughput if naive else None),
    ]
    xs = range(len(bars))
    heights = [v or 0.0 for _, v in bars]
    colors = ["tab:gray", "tab:gray"] + ["tab:blue"] * (len(bars) - 3) + ["tab:red"]
    _label_bars(ax, ax.bar(xs, heights, color=colors), [v for _, v in bars])
    ax.set_xticks(list(xs), [label for label, _ in bars], rotation=25, ha="right", fontsize=7)
    ax.set_title(f"replica: the most rows/s ({REPLICA_GE}: best concurrency)", fontsize=10)
    ax.set_ylabel("rows/s")
    ax.grid(True, axis="y", alpha=0.3)


def _identity(ax, result: Result) -> None:
    for name in (GE_IDENTITY, PY_IDENTITY):
        points = sorted(
            (m.row for m in result.triton if m.model == name and m.batch == 1), key=lambda r: r.concurrency
        )
        if not points:
            continue
        xs = [r.throughput for r in points]
        ys = [r.p50_us / 1e3 for r in points]
        ax.plot(xs, ys, marker="o", label=name)
        for r, x, y in zip(points, xs, ys):
            ax.annotate(f"c={r.concurrency}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_title("host phase (no device time): identity [1,16] fp32", fontsize=10)
    ax.set_xlabel("throughput (inferences/s)")
    ax.set_ylabel("p50 latency (ms)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)


def _llama(ax, result: Result) -> None:
    _bars(
        ax,
        [f"batch {b}" for b in seed.BATCHES],
        [
            (GE_LLAMA, [p50_ms(result.triton, GE_LLAMA, 1, b) for b in seed.BATCHES]),
            (f"{FLOOR} (same-size floor)", [p50_ms(result.triton, FLOOR, 1, b) for b in seed.BATCHES]),
        ],
    )
    ax.set_title("host phase (no device time): tiny LLaMA p50 (ms), c=1", fontsize=10)
    ax.set_ylabel("ms")
