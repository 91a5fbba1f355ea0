"""``ge-plugin demo``: the main job of ``make demo`` (see ge_plugin.demo)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ge_plugin.cli._common import add_command

EXAMPLES = """
  ge-plugin demo              # from the repository root, as `make demo` runs it
  ge-plugin demo --keep-running
"""


def register(subparsers) -> None:
    parser = add_command(
        subparsers,
        "demo",
        help="build the example models, serve them with tritonserver and query them",
        description=(
            "Example ONNX models -> sim OM files (ATC flags) -> model repository from specs/ -> tritonserver with "
            "backend ge on the CPU simulator -> real HTTP and gRPC requests, every answer checked."
        ),
        examples=EXAMPLES,
    )
    parser.add_argument("--root", type=Path, default=Path("."), help="the ge-plugin checkout (default: .)")
    parser.add_argument("--keep-running", action="store_true", help="keep serving after the requests")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ge_plugin import demo

    demo.run(args.root, keep_running=args.keep_running)
    return 0
