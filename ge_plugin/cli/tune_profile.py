"""``ge-plugin tune-profile``: each gear's device time, measured by the engine alone (ge_plugin.tune.devprofile)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ge_plugin.cli._common import add_command

EXAMPLES = """
  ge-plugin tune-profile specs/bert.yaml -o bert-910b.json            # on the Ascend host
  ge-plugin tune-profile specs/llama.yaml --om llama.om -o llama.json  # an OM already compiled
  ge-plugin tune specs/bert.yaml --latency-p99-ms 20 --profile bert-910b.json
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "tune-profile",
        help="measure each gear's device time (the profile ge-plugin tune replays on the simulator)",
        description=(
            "Renders the spec, builds its OM (ATC on an Ascend host, a sim OM here) and times every gear with "
            "the engine alone, no Triton: a batch that lands exactly on the gear, the engine's stream time per "
            "execute (copies and the execute, until the stream synchronizes). Writes the profile JSON that "
            "`ge-plugin tune --profile` reads. On an Ascend host that is the card's time; on the CPU simulator "
            "it is the simulator's onnxruntime time, labelled so."
        ),
        examples=EXAMPLES,
    )
    parser.add_argument("spec", type=Path, help="the model spec (YAML)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the profile file to write (JSON)")
    parser.add_argument("--seconds", type=float, default=1.0, metavar="S", help="time per gear (default: 1)")
    parser.add_argument("--om", type=Path, help="use this OM instead of compiling one")
    parser.add_argument(
        "--work", type=Path, default=Path("build/tune-profile"), help="scratch folder (default: %(default)s)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ge_plugin.errors import TuneError
    from ge_plugin.spec import load_spec
    from ge_plugin.tune.devprofile import measure_profile
    from ge_plugin.tune.run import device_kind

    if not args.seconds > 0:
        raise TuneError(f"--seconds must be > 0, got {args.seconds:g}")
    if args.om is not None and not args.om.is_file():
        raise TuneError(f"--om {args.om}: no such file")
    spec = load_spec(args.spec)
    data = measure_profile(
        spec, work=args.work, seconds=args.seconds, om=args.om, device_kind=device_kind(), say=print
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(data, indent=2) + "\n")
    print(f"written: {args.output} ({data['device']})")
    return 0
