"""``ge-plugin migrate CONFIG.pbtxt [-o spec.yaml]``: a CANN GE backend config as a ge-plugin spec."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ge_plugin.cli._common import add_command

EXAMPLES = """
  ge-plugin migrate models/resnet/config.pbtxt --soc-version Ascend910B3 -o specs/resnet.yaml
  ge-plugin migrate models/bert/config.pbtxt --soc-version Ascend310P3 --dims-gears 64,128,256
  ge-plugin migrate models/resnet/config.pbtxt --soc-version Ascend910B3 --renumber-devices \\
      --backend-config=npu_ge,ge.aicoreNum=12\\|10 --backend-config=npu_ge,static_model=1
  ge-plugin validate specs/resnet.yaml && ge-plugin atc specs/resnet.yaml --print
"""


def _backend_config(text: str) -> tuple[str, str, str]:
    from ge_plugin.migrate.ge_config import parse_backend_config

    try:
        return parse_backend_config(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _gears(text: str, kind: str) -> list[list[int]]:
    """Gears in ATC's text (``ge_plugin.gears.parse_values``), their faults as usage errors."""
    from ge_plugin.errors import GearTextError
    from ge_plugin.gears import parse_values

    try:
        return [list(gear) for gear in parse_values(text, kind=kind)]
    except GearTextError as exc:
        words = {
            "below_one": "values are >= 1, got {text!r}",
            "widths": "every gear lists as many values, got {text!r}",
        }
        raise argparse.ArgumentTypeError(
            exc.said(words, "expected comma-separated integers, got {text!r}")
        ) from None


def _ints(text: str) -> list[int]:
    """``1,2,4``: batch gears."""
    return [value for (value,) in _gears(text, "batch")]


def _dims_gears(text: str) -> list[list[int]]:
    """``16,32,64`` (every -1 dim takes each value in turn) or ``16,16;32,32`` (one list per gear)."""
    return _gears(text, "dims" if ";" in text else "batch")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "migrate",
        help="turn a CANN GE backend (npu_ge) config.pbtxt into a spec",
        description=(
            'Read a config.pbtxt of CANN\'s GE backend (backend: "npu_ge", which compiles an ONNX model on the\n'
            "server) and write the spec that builds the same model as an OM with gears, on the same devices and\n"
            "instances. Inputs and outputs the config omits are read from the model file (ONNX, or a TensorFlow\n"
            "frozen graph), as the GE backend reads them. Every key that does not carry over as is gets a line saying why, on stderr and as a\n"
            "comment at the top of the spec. The spec is checked with the spec loader before it is written.\n"
            "Exit 1 when the config cannot be migrated (the message names the line), 2 on usage errors.\n"
            "See docs/migrate.md."
        ),
        examples=EXAMPLES,
    )
    parser.add_argument("config", type=Path, metavar="CONFIG.pbtxt")
    parser.add_argument("-o", "--output", type=Path, metavar="SPEC.yaml", help="write here (default: stdout)")
    parser.add_argument(
        "--soc-version",
        required=True,
        metavar="CHIP",
        help="the chip ATC compiles for (npu-smi info: Ascend910B3, Ascend310P3...); the GE backend compiled for "
        "whatever chip the server had",
    )
    parser.add_argument(
        "--batch-gears", type=_ints, metavar="B,B,...", help="batch gears instead of the derived ones"
    )
    parser.add_argument(
        "--dims-gears",
        type=_dims_gears,
        metavar="V,V,...",
        help="values of the -1 dims other than the batch, when the config names no gears: 16,32,64 (every -1 "
        "dim takes each value) or 16,8;32,16 (one value per -1 dim, per gear)",
    )
    parser.add_argument(
        "--backend-config",
        action="append",
        default=[],
        type=_backend_config,
        metavar="npu_ge,KEY=VALUE",
        help="a setting the GE backend's server was launched with (tritonserver's syntax, repeatable): its fixed "
        "keys and session./graph. options count as parameters the config does not set; each is carried or noted",
    )
    parser.add_argument(
        "--renumber-devices",
        action="store_true",
        help='device_ids "4,5" become devices [0, 1] (noted): a pod numbers the NPUs it was given from 0, '
        "which ge-plugin deploy k8s requires",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ge_plugin._files import write_atomic
    from ge_plugin.migrate import format_notes, migrate_file

    result = migrate_file(
        args.config,
        soc_version=args.soc_version,
        spec_path=args.output,
        batch_gears=args.batch_gears,
        dims_gears=args.dims_gears,
        backend_config=args.backend_config,
        renumber_devices=args.renumber_devices,
    )
    if args.output is None:
        sys.stdout.write(result.text)
    else:
        try:
            args.output.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(args.output, result.text.encode("utf-8"))
        except OSError as exc:
            print(
                f"ge-plugin migrate: error: cannot write {args.output}: {exc.strerror or exc}",
                file=sys.stderr,
            )
            return 1
        print(f"wrote {args.output} ({result.migration.spec.name})", file=sys.stderr)
    for line in format_notes(args.config, result.migration.notes):
        print(line, file=sys.stderr)
    return 0
