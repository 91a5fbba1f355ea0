"""``ge-plugin bench``: the main job of ``make bench`` (see ge_plugin.bench.run)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ge_plugin.cli._common import add_command

EXAMPLES = """
  ge-plugin bench                          # as `make bench` runs it: bench-results/report.{md,json}, PNG
  ge-plugin bench --quick -o /tmp/bench    # every model once, short windows: checks the pipeline only
  ge-plugin bench --model ge_identity --model py_identity --concurrency 1,8
  ge-plugin bench --model replica_ge_llama --replica-concurrency 16,24,32
"""


def _concurrencies(text: str) -> tuple[int, ...]:
    from ge_plugin.bench.run import parse_concurrencies

    try:
        return parse_concurrencies(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(subparsers) -> None:
    parser = add_command(
        subparsers,
        "bench",
        help="the seed's table replicated on a simulated device, and ge's host cost against its floors",
        description=(
            "One tritonserver serves ge's identity and tiny LLaMA next to Python-backend floors for the same "
            "tensors (host phase: the simulator computes nothing and takes no device time), and the tiny LLaMA "
            "on a simulated device that takes the seed's direct AscendCL times per batch (replica: 78 / 145 / "
            "220 ms at batch 1 / 4 / 8), as served, with 1 x 1 and 1 x 2 instances x streams, and as the naive "
            "per-request pyACL model. perf_analyzer measures each over gRPC; the engine is also timed in-process "
            "without Triton. Writes a markdown report, a JSON file and a PNG, and prints the targets. Every "
            "figure is the CPU simulator's, labelled so: none is NPU time."
        ),
        examples=EXAMPLES,
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("bench-results"),
        help="report folder (default: %(default)s)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="every model once at batch 1 and concurrency 1, 300 ms windows, no stability check",
    )
    parser.add_argument(
        "--concurrency",
        type=_concurrencies,
        metavar="C,C,...",
        help="the identity pair's concurrencies (default: 1,4,8,16)",
    )
    parser.add_argument(
        "--replica-concurrency",
        type=_concurrencies,
        metavar="C,C,...",
        help="the replica LLaMA's batch-1 concurrencies for the most throughput (default: 16,32)",
    )
    parser.add_argument(
        "--measurement-ms", type=int, metavar="MS", help="perf_analyzer window, host phase (default: 2000)"
    )
    parser.add_argument(
        "--replica-measurement-ms",
        type=int,
        metavar="MS",
        help="perf_analyzer window, replica (default: 4000: its requests take 78-220 ms)",
    )
    parser.add_argument(
        "--stability", type=int, metavar="PERCENT", help="perf_analyzer --stability-percentage (default: 20)"
    )
    parser.add_argument(
        "--max-trials", type=int, metavar="N", help="perf_analyzer windows at most (default: 5)"
    )
    parser.add_argument(
        "--seq",
        type=int,
        default=16,
        help="tokens per LLaMA row, a sequence gear: 16, 32, 64 or 128 (default: 16)",
    )
    parser.add_argument(
        "--direct-seconds", type=float, metavar="S", help="direct engine time per batch size (default: 2)"
    )
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME",
        help="measure only these models (repeatable); the report names them all",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import attrs

    from ge_plugin.bench.run import BenchOptions, run_bench

    base = BenchOptions.quick() if args.quick else BenchOptions()
    changes = {"output": args.output, "seq": args.seq, "models": tuple(dict.fromkeys(args.model))}
    for field, value in (
        ("concurrencies", args.concurrency),
        ("replica_concurrencies", args.replica_concurrency),
        ("measurement_ms", args.measurement_ms),
        ("replica_measurement_ms", args.replica_measurement_ms),
        ("stability_percentage", args.stability),
        ("max_trials", args.max_trials),
        ("direct_seconds", args.direct_seconds),
    ):
        if value is not None:
            changes[field] = value
    run_bench(attrs.evolve(base, **changes))
    return 0
