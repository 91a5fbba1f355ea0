"""``ge-plugin validate SPEC_OR_DIR...``: check specs and report every problem, one per line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ge_plugin.cli._common import add_command
from ge_plugin.spec import check_specs

EXAMPLES = """
  ge-plugin validate specs/llama.yaml
  ge-plugin validate specs                 # every *.yaml / *.yml in the folder
  ge-plugin validate specs --repository model_repository   # generate: specs against their OMs too
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    parser.add_argument(
        "--repository",
        metavar="REPO",
        help="also check each generate: spec against its OM in REPO/<name>/1/ (names, dtypes, dims, gears)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    checked = check_specs(args.specs)
    problems = 0
    for item in checked:
        found = item.problems
        if item.spec is not None and item.spec.generate is not None and args.repository:
            from ge_plugin.cli._generate_om import om_problems

            om = Path(args.repository) / item.spec.name / "1" / item.spec.om_filename
            found = om_problems(item.spec, om) if om.is_file() else (f"{item.path}: no OM at {om}",)
        if item.spec is not None and not found:
            print(f"ok: {item.path} ({item.spec.name})")
        for problem in found:
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
