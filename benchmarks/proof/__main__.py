"""``python -m benchmarks.proof`` (``make bench``): the seed's table replicated on a simulated device, and ge's
host cost against its floors, with our targets (``benchmarks.proof.run``). Not part of the wheel: this is what
proves the project's targets, not what a user runs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs

from benchmarks.proof.run import BenchOptions, parse_concurrencies, run_bench
from ge_plugin.cli._common import argument_type
from ge_plugin.errors import GePluginError

EXAMPLES = """examples:
  python -m benchmarks.proof                        # as `make bench` runs it: bench-results/report.{md,json}, PNG
  python -m benchmarks.proof --quick -o /tmp/bench  # every model once, short windows: checks the pipeline only
  python -m benchmarks.proof --model ge_identity --model py_identity --concurrency 1,8
  python -m benchmarks.proof --model replica_ge_llama --replica-concurrency 16,24,32
"""
_concurrencies = argument_type(parse_concurrencies)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.proof",
        description=(
            "One tritonserver serves ge's identity and tiny LLaMA next to Python-backend floors for the same "
            "tensors (host phase), and the tiny LLaMA on a simulated device that takes the seed's direct "
            "AscendCL times per batch (replica), as served, with 1 x 1 and 2 x 1 instances x streams, and as "
            "the naive per-request pyACL model. Writes a markdown report, a JSON file and a PNG, and prints "
            "the targets. Every figure is the CPU simulator's, labelled so: none is NPU time."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        help="report folder (default: bench-results)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="every model once at batch 1 and concurrency 1, 300 ms windows, no stability check",
    )
    parser.add_argument(
        "--concurrency",
        dest="concurrencies",
        type=_concurrencies,
        metavar="C,C,...",
        help="the identity pair's concurrencies (default: 1,4,8,16)",
    )
    parser.add_argument(
        "--replica-concurrency",
        dest="replica_concurrencies",
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
        "--stability",
        dest="stability_percentage",
        type=int,
        metavar="PERCENT",
        help="perf_analyzer --stability-percentage (default: 20)",
    )
    parser.add_argument(
        "--max-trials", type=int, metavar="N", help="perf_analyzer windows at most (default: 5)"
    )
    parser.add_argument(
        "--seq",
        type=int,
        help="tokens per LLaMA row, a sequence gear: 16, 32, 64 or 128 (default: 16)",
    )
    parser.add_argument(
        "--direct-seconds", type=float, metavar="S", help="direct engine time per batch size (default: 2)"
    )
    parser.add_argument(
        "--model",
        dest="models",
        action="append",
        metavar="NAME",
        help="measure only these models (repeatable); the report names them all",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = vars(parser().parse_args(argv))
    quick = args.pop("quick", False)
    if "models" in args:
        args["models"] = tuple(dict.fromkeys(args["models"]))
    try:
        base = BenchOptions.quick() if quick else BenchOptions()
        run_bench(attrs.evolve(base, **args))
    except GePluginError as exc:
        print(f"benchmarks.proof: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
