"""Small helpers shared by the sub-commands."""

from __future__ import annotations

import argparse


def add_command(
    subparsers, name: str, *, help: str, description: str, examples: str
) -> argparse.ArgumentParser:
    """A sub-command parser whose --help ends with examples, as every ge-plugin command's does."""
    return subparsers.add_parser(
        name,
        help=help,
        description=description,
        epilog="examples:\n" + examples.strip("\n") + "\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
