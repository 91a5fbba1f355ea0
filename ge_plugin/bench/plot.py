"""The picture a user would rather look at: p50 latency against throughput, one line per served model.

Each family (identity, tiny LLaMA) gets its own panel, because their scales differ a hundredfold. Points
are labelled with their concurrency; the direct engine's batch sizes are stars. The title says "CPU
simulator, N cores" so the PNG cannot be mistaken for NPU numbers once it travels without its report.
"""

from __future__ import annotations

from pathlib import Path

from ge_plugin.bench.report import Result
from ge_plugin.errors import BenchError

FAMILIES = (("identity", "identity [1,16] fp32"), ("llama", "tiny LLaMA"))


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
    from matplotlib import ticker

    families = [(f, title) for f, title in FAMILIES if any(m.family == f for m in result.models)]
    fig, axes = plt.subplots(
        1, max(1, len(families)), figsize=(6.2 * max(1, len(families)), 4.6), squeeze=False
    )
    for ax, (family, title) in zip(axes[0], families):
        names = [m.name for m in result.models if m.family == family]
        colors = {}
        for name in names:
            points = sorted((m.row for m in result.triton if m.model == name), key=lambda r: r.concurrency)
            if not points:
                continue
            xs = [r.throughput for r in points]
            ys = [r.p50_us / 1e3 for r in points]
            (line,) = ax.plot(xs, ys, marker="o", label=f"{name} (Triton)")
            colors[name] = line.get_color()
            for r, x, y in zip(points, xs, ys):
                ax.annotate(
                    f"c={r.concurrency}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7
                )
            p99 = [r.p99_us / 1e3 for r in points]
            ax.vlines(xs, ys, p99, colors=line.get_color(), alpha=0.25, linewidth=3)
        for name in names:
            direct = [d for d in result.direct if d.model == name]
            if not direct:
                continue
            xs = [d.throughput for d in direct]
            ys = [d.p50_ms for d in direct]
            ax.scatter(
                xs,
                ys,
                marker="*",
                s=140,
                zorder=3,
                color=colors.get(name),
                label=f"{name} direct (no Triton)",
            )
            for d, x, y in zip(direct, xs, ys):
                ax.annotate(f"b={d.batch}", (x, y), textcoords="offset points", xytext=(4, -10), fontsize=7)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("throughput (inferences/s)")
        ax.set_ylabel("p50 latency (ms); bar up to p99")
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(ticker.NullFormatter())
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"ge-plugin bench: latency vs throughput. {result.label}: not NPU time", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
