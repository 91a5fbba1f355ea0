"""``ge-plugin render SPEC_OR_DIR... -o REPO [--check]``: specs -> a Triton model repository."""

from __future__ import annotations

import argparse
import sys

from ge_plugin.cli._common import add_command
from ge_plugin.errors import SpecError
from ge_plugin.render import diff_repository, render_repository, stale_models, stale_versions
from ge_plugin.spec import load_specs

EXAMPLES = """
  ge-plugin render specs -o model_repository
  ge-plugin render specs/llama.yaml specs/bert.yaml -o /tmp/repo
  ge-plugin render --check specs -o model_repository    # CI: exit 1 and a diff when out of date
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "render",
        help="write a Triton model repository from model specs",
        description=(
            "Write REPO/<name>/config.pbtxt and a version folder REPO/<name>/<version>/ for every\n"
            "version of every spec (REPO/<name>/1/ for a spec without versions). Other files in REPO\n"
            "are left alone, and files whose content stays the same keep their times.\n\n"
            "With --check nothing is written: exit 1 with a unified diff when REPO differs from the\n"
            'specs, including backend "ge" models in REPO that none of the given specs renders and\n'
            "version folders no spec lists that Triton would serve."
        ),
        examples=EXAMPLES,
    )
    parser.add_argument("specs", nargs="+", metavar="SPEC_OR_DIR", help="spec files or folders of specs")
    parser.add_argument("-o", "--output", required=True, metavar="REPO", help="the model repository")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        specs = load_specs(args.specs)
    except SpecError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 1
    if args.check:
        diff = diff_repository(specs, args.output)
        if diff:
            sys.stdout.write(diff)
            print(
                f"ge-plugin render: {args.output} differs from the specs; "
                f"run `ge-plugin render {' '.join(args.specs)} -o {args.output}`",
                file=sys.stderr,
            )
            return 1
        print(f"ok: {args.output} matches {len(specs)} spec{'s' if len(specs) != 1 else ''}")
        return 0
    for rendered in render_repository(specs, args.output):
        made = f" (new: {', '.join(rendered.made)})" if rendered.made else ""
        print(f"{'rendered' if rendered.rewritten else 'unchanged'} {rendered.config}{made}")
    for config in stale_models(specs, args.output):
        print(
            f"warning: {config} is a ge model that no given spec renders; delete it if it is stale",
            file=sys.stderr,
        )
    for folder, why in stale_versions(specs, args.output):
        print(f"warning: {folder}: {why}", file=sys.stderr)
    return 0
