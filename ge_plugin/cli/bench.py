"""``ge-plugin bench``: the main job of ``make bench`` (see ge_plugin.bench.run)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ge_plugin.cli._common import add_command

EXAMPLES = """
  ge-plugin bench                          # as `make bench` runs it: bench-results/report.{md,json}, PNG
  ge-plugin bench --quick -o /tmp/bench    # one concurrency, short windows: checks the pipeline only
  ge-plugin bench --device-latency-ms 5    # every simulated execute also takes 5 ms, like an NPU would
  ge-plugin bench --concurrency 1,8 --model ge_llama --model naive_llama --seq 64
  ge-plugin bench --peer pytriton          # adds the same ONNX served by PyTriton with onnxruntime
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
        help="end-to-end throughput and latency with perf_analyzer, next to direct and naive baselines",
        description=(
            "One tritonserver serves the ge identity model, a Python-backend identity (the floor), the ge tiny "
            "LLaMA and a naive per-request pyACL LLaMA (the GE backend's published path); perf_analyzer sweeps "
            "each over gRPC, and the engine is also timed in-process without Triton. Writes a markdown table, "
            "a JSON file and a latency-vs-throughput PNG, and prints the targets P3-P6. Every figure is the "
            "CPU simulator's, labelled so: none is NPU time."
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
        "--quick", action="store_true", help="concurrency 1, 300 ms windows, no stability check"
    )
    parser.add_argument(
        "--concurrency",
        type=_concurrencies,
        metavar="C,C,...",
        help="perf_analyzer concurrencies (default: 1,2,4,8,16; with --quick: 1)",
    )
    parser.add_argument(
        "--measurement-ms", type=int, metavar="MS", help="perf_analyzer window (default: 2000)"
    )
    parser.add_argument(
        "--stability", type=int, metavar="PERCENT", help="perf_analyzer --stability-percentage (default: 20)"
    )
    parser.add_argument(
        "--max-trials", type=int, metavar="N", help="perf_analyzer windows at most (default: 8)"
    )
    parser.add_argument(
        "--seq",
        type=int,
        default=16,
        help="tokens per LLaMA request, a sequence gear: 16, 32, 64 or 128 (default: 16)",
    )
    parser.add_argument(
        "--device-latency-ms",
        type=float,
        default=0.0,
        metavar="X",
        help="the simulator adds X ms to every execute, so overhead reads against NPU-like compute time",
    )
    parser.add_argument(
        "--direct-seconds", type=float, metavar="S", help="direct engine time per batch size (default: 2)"
    )
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME",
        help="measure only these of ge_identity, py_identity, ge_llama, naive_llama (repeatable)",
    )
    parser.add_argument(
        "--peer",
        choices=("pytriton",),
        default="",
        help="also serve the LLaMA ONNX with PyTriton + onnxruntime and measure it in the same sweep",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import attrs

    from ge_plugin.bench.run import BenchOptions, run_bench

    base = BenchOptions.quick() if args.quick else BenchOptions()
    changes = {
        "output": args.output,
        "seq": args.seq,
        "device_latency_ms": args.device_latency_ms,
        "models": tuple(dict.fromkeys(args.model)),
        "peer": args.peer,
    }
    for field, value in (
        ("concurrencies", args.concurrency),
        ("measurement_ms", args.measurement_ms),
        ("stability_percentage", args.stability),
        ("max_trials", args.max_trials),
        ("direct_seconds", args.direct_seconds),
    ):
        if value is not None:
            changes[field] = value
    run_bench(attrs.evolve(base, **changes))
    return 0
