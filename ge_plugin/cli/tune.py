"""``ge-plugin tune``: the serving configuration that meets a latency budget, measured (ge_plugin.tune)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ge_plugin.cli._common import add_command, argument_type

EXAMPLES = """
  ge-plugin tune specs/llama.yaml --latency-p99-ms 400 --seed-profile --concurrency 1,8,16
  ge-plugin tune specs/bert.yaml --latency-p99-ms 20 --min-throughput 300 --profile bert-910b.json
  ge-plugin tune specs/llama.yaml --latency-p99-ms 300 --seed-profile --knobs instances,streams,max_queue_delay_us \\
      --queue-delays-us 0,5000,20000 --budget-minutes 10 -o /tmp/tune
  ge-plugin tune-profile specs/bert.yaml -o bert-910b.json          # on the Ascend host: the profile
"""


def _ints(minimum: int) -> Callable[[str], tuple[int, ...]]:
    from ge_plugin.tune.space import parse_ints

    return argument_type(lambda text: parse_ints(text, minimum=minimum))


def _gear_sets(pairs: bool) -> Callable[[str], tuple[tuple[Any, ...], ...]]:
    from ge_plugin.tune.space import parse_gear_sets

    return argument_type(lambda text: parse_gear_sets(text, pairs=pairs))


def _fraction(text: str) -> float:
    """A percentage as the fraction the options record holds."""
    return float(text) / 100


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "tune",
        help="find the serving configuration that meets a latency budget (Model Analyzer for Ascend)",
        description=(
            "Sweeps what the spec controls (batch gears, preferred batch sizes, queue delay, instances per "
            "device, streams per instance, sequence or image gears): each candidate is written into the spec, "
            "validated, compiled, served by a real tritonserver and measured by perf_analyzer at each "
            "concurrency. The search walks one knob at a time from the best so far and stops a direction once "
            "it gets worse, within --budget-minutes. Prints and writes the Pareto front (p99 against "
            "throughput) as a table and a plot, writes the best configuration under the constraints as the "
            "input spec with the chosen values, and measures that spec once more to confirm it. On the CPU "
            "simulator every gear takes the device time of a profile (--profile or --seed-profile) and every "
            "figure is labelled the simulator's; on an Ascend host the card is measured."
        ),
        examples=EXAMPLES,
    )
    parser.add_argument("spec", type=Path, help="the model spec to tune (YAML)")
    parser.add_argument(
        "--latency-p99-ms",
        type=float,
        required=True,
        metavar="MS",
        help="the p99 latency a configuration must meet",
    )
    parser.add_argument(
        "--min-throughput",
        type=float,
        default=0.0,  # a Constraints field, given as one with the latency
        metavar="N",
        help="and at least this many inferences per second",
    )
    parser.add_argument(
        "--concurrency",
        dest="concurrencies",
        type=_ints(0),  # the options record says which values it takes
        metavar="C,C,...",
        help="perf_analyzer concurrencies each candidate is measured at (default: 1,4,8)",
    )
    profile = parser.add_mutually_exclusive_group()
    profile.add_argument(
        "--profile", type=Path, metavar="FILE", help="device time per gear (JSON; see docs/tune.md)"
    )
    profile.add_argument(
        "--seed-profile",
        action="store_true",
        help="the seed's published LLaMA-7B times (78 / 145 / 220 ms at batch 1 / 4 / 8) as the device time",
    )
    parser.add_argument("-o", "--output", type=Path, help="report folder (default: tune-results)")
    parser.add_argument(
        "--output-spec",
        type=Path,
        metavar="FILE",
        help="where the tuned spec goes (default: OUTPUT/<spec file>)",
    )
    parser.add_argument(
        "--budget-minutes", type=float, metavar="MIN", help="time for the sweep (default: 30)"
    )
    parser.add_argument(
        "--measurement-ms", type=int, metavar="MS", help="perf_analyzer window (default: 2000)"
    )
    parser.add_argument(
        "--stability",
        dest="stability_percentage",
        type=int,
        metavar="PERCENT",
        help="perf_analyzer --stability-percentage (default: 20)",
    )
    parser.add_argument(
        "--max-trials", type=int, metavar="N", help="perf_analyzer windows at most (default: 6)"
    )
    parser.add_argument(
        "--input-data",
        type=Path,
        metavar="FILE",
        help="the requests to send, in perf_analyzer's --input-data format (default: one per dims gear or image "
        "size; a JPEG for an input with preprocess)",
    )
    parser.add_argument(
        "--knobs",
        type=_names,
        metavar="K,K,...",
        help="the knobs to vary (default: all the spec has): instances, streams, max_queue_delay_us, "
        "preferred_batch_sizes, batch_gears, dims_gears, image_sizes",
    )
    parser.add_argument(
        "--instances", type=_ints(1), metavar="N,N,...", help="instances per device to try (default: 1,2,3,4)"
    )
    parser.add_argument(
        "--streams", type=_ints(1), metavar="N,N,...", help="streams per instance to try (default: 1,2,3)"
    )
    parser.add_argument(
        "--queue-delays-us",
        dest="max_queue_delay_us",
        type=_ints(0),
        metavar="US,US,...",
        help="max_queue_delay_us values (default: 0,500,...,64000)",
    )
    parser.add_argument(
        "--batch-gears",
        type=_gear_sets(False),
        metavar="G,G;G,G,...",
        help="batch gear sets to try, ';' between sets",
    )
    parser.add_argument(
        "--dims-gears",
        type=_gear_sets(True),
        metavar="G,G;...",
        help="dims gear sets to try, ';' between sets ('16,32;16,64', or '224x224,448x448' for several -1 dims)",
    )
    parser.add_argument(
        "--image-sizes",
        type=_gear_sets(True),
        metavar="HxW,HxW;...",
        help="image size sets to try, ';' between sets",
    )
    parser.add_argument(
        "--tolerance",
        type=_fraction,
        metavar="PERCENT",
        help="how much more throughput (or less p99) a change must bring to count as better; below it the "
        "input spec's value is kept (default: 5, about perf_analyzer's run-to-run spread here)",
    )
    parser.add_argument(
        "--no-confirm",
        dest="confirm",
        action="store_false",
        help="skip the confirming run of the written spec",
    )
    parser.set_defaults(func=run)


#: the knobs whose ladder a flag replaces, each under the knob's own name
LADDERS = ("instances", "streams", "max_queue_delay_us", "batch_gears", "dims_gears", "image_sizes")


def run(args: argparse.Namespace) -> int:
    import attrs

    from ge_plugin.tune.records import Constraints
    from ge_plugin.tune.run import TuneOptions, run_tune

    given = vars(args)
    fields = {field.name for field in attrs.fields(TuneOptions)} - {"constraints", "ladders"}
    options = {name: given[name] for name in fields & given.keys() if given[name] is not None}
    run_tune(
        TuneOptions(
            **options,
            constraints=Constraints(args.latency_p99_ms, args.min_throughput),
            ladders={knob: given[knob] for knob in LADDERS if given[knob] is not None},
        )
    )
    return 0
