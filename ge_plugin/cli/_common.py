"""Small helpers shared by the sub-commands."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def add_command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    *,
    help: str,
    description: str,
    examples: str,
) -> argparse.ArgumentParser:
    """A sub-command parser whose --help ends with examples, as every ge-plugin command's does."""
    return subparsers.add_parser(
        name,
        help=help,
        description=description,
        epilog="examples:\n" + examples.strip("\n") + "\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def argument_type(parse: Callable[[str], T]) -> Callable[[str], T]:
    """``parse`` as an argparse ``type=``: its ValueError becomes argparse's usage error, with its message."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert
