"""``ge-plugin bench``: the user's specs through Triton against the direct engine (ge_plugin.bench.run)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ge_plugin.cli._common import add_command, argument_type

EXAMPLES = """
  ge-plugin bench specs/llama.yaml --profile llama-910b.json              # on the simulator: a device profile
  ge-plugin bench specs/llama.yaml specs/bert.yaml --concurrency 1,8,16 -o /tmp/bench
"""


def _concurrencies(text: str) -> tuple[int, ...]:
    from ge_plugin.tune.space import parse_ints

    return parse_ints(text, minimum=0)  # the options record says which values it takes


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "bench",
        help="your specs served through Triton, measured against the engine alone",
        description=(
            "Each spec is rendered, compiled (a sim OM here, ATC's on an Ascend host), served by one "
            "tritonserver and measured by perf_analyzer over gRPC at each concurrency; then the engine is timed "
            "in-process without Triton, per batch gear. Prints one table: what Triton and the ge backend add "
            "to the engine for your models on this host. On the simulator every gear takes a profile's device "
            "time (--profile), and every figure says so."
        ),
        examples=EXAMPLES,
    )
    parser.add_argument("specs", nargs="+", type=Path, metavar="SPEC", help="model spec YAML files")
    parser.add_argument("-o", "--output", type=Path, help="work folder (default: bench-results)")
    parser.add_argument(
        "--concurrency",
        dest="concurrencies",
        type=argument_type(_concurrencies),
        metavar="C,C,...",
        help="perf_analyzer concurrencies (default: 1,4,8)",
    )
    parser.add_argument("--profile", type=Path, metavar="FILE", help="device time per gear (docs/tune.md)")
    parser.add_argument(
        "--measurement-ms", type=int, metavar="MS", help="perf_analyzer window (default: 2000)"
    )
    parser.add_argument(
        "--direct-seconds", type=float, metavar="S", help="direct engine time per model (default: 2)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import attrs

    from ge_plugin.bench.run import BenchOptions, run_bench

    given = vars(args)
    fields = {field.name for field in attrs.fields(BenchOptions)}
    options = {name: given[name] for name in fields & given.keys() if given[name] is not None}
    run_bench(BenchOptions(**{**options, "specs": tuple(args.specs)}))
    return 0
