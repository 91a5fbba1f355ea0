"""``ge-plugin validate SPEC_OR_DIR...``: check specs and report every problem, one per line."""

from __future__ import annotations

import argparse
import sys

from ge_plugin.cli._common import add_command
from ge_plugin.spec import check_specs

EXAMPLES = """
  ge-plugin validate specs/llama.yaml
  ge-plugin validate specs                 # every *.yaml / *.yml in the folder
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers,
        "validate",
        help="check model specs",
        description=(
            "Check model specs. Prints 'ok: PATH (NAME)' per valid spec, or every problem as\n"
            "FILE:LINE: $.path: message, and exits 1 when any spec is invalid."
        ),
        examples=EXAMPLES,
    )
    parser.add_argument("specs", nargs="+", metavar="SPEC_OR_DIR", help="spec files or folders of specs")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    checked = check_specs(args.specs)
    problems = 0
    for item in checked:
        if item.spec is not None:
            print(f"ok: {item.path} ({item.spec.name})")
        for problem in item.problems:
            print(problem, file=sys.stderr)
            problems += 1
    if problems:
        print(
            f"ge-plugin validate: {problems} problem{'s' if problems != 1 else ''} "
            "(checks that need a well-formed spec run once its keys and types are right, so more may follow)",
            file=sys.stderr,
        )
        return 1
    return 0
