"""``ge-plugin demo``: the main job of ``make demo`` (see ge_plugin.demo)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ge_plugin.cli._common import add_command

EXAMPLES = """
  ge-plugin demo                   # in the checkout, as `make demo` runs it, or in any empty folder
  ge-plugin demo -o /tmp/ge-demo   # everything under /tmp/ge-demo
  ge-plugin demo --keep-running
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "demo",
        help="build the example models, serve them with tritonserver and query them",
        description=(
            "Example ONNX models -> sim OM files (ATC flags) -> model repository from the demo's specs -> "
            "tritonserver with backend ge on the CPU simulator -> real HTTP and gRPC requests, every answer "
            "checked. The specs and models ship in the package (pip install 'ge-plugin[sim,serve]'). Writes "
            "only under DIR: specs/ (copies of missing specs), build/models/, model_repository/, build/triton/."
        ),
        examples=EXAMPLES,
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="where the demo writes everything (default: the current folder)",
    )
    parser.add_argument("--keep-running", action="store_true", help="keep serving after the requests")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ge_plugin import demo

    demo.run(args.output, keep_running=args.keep_running)
    return 0
