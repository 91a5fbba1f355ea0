"""The ``ge-plugin`` command: one module per sub-command, each with ``register(subparsers)``.

Exit codes: 0 ok, 1 a check failed or a spec is invalid, 2 usage errors (argparse's own). Sub-command modules
are imported only when the command line names them, so ``ge-plugin validate`` does not pay for importing
onnxruntime or tritonclient.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ge_plugin import __version__
from ge_plugin.errors import GePluginError

#: sub-command -> module under ge_plugin.cli, in the order --help lists them
COMMANDS: dict[str, str] = {
    "validate": "validate",
    "render": "render",
    "atc": "atc",
    "demo-models": "demo_models",
    "install-backend": "install_backend",
    "serve": "serve",
    "demo": "demo",
    "bench": "bench",
    "tune": "tune",
    "tune-profile": "tune_profile",
    "deploy": "deploy",
    "migrate": "migrate",
    "doctor": "doctor",
    "perf-analyzer": "perf_analyzer",
}
#: commands whose arguments all belong to the program they run, handed over before argparse sees them
RAW = frozenset({"perf-analyzer"})

EPILOG = """examples:
  ge-plugin validate specs/llama.yaml
  ge-plugin render specs -o model_repository
  ge-plugin atc specs/llama.yaml --print
  ge-plugin serve model_repository
"""


def build_parser(names: Sequence[str] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ge-plugin",
        description='Serve Huawei Ascend OM models with NVIDIA Triton (backend "ge").',
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ge-plugin {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in names if names is not None else COMMANDS:
        module = importlib.import_module(f"ge_plugin.cli.{COMMANDS[name]}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in RAW:
        module = importlib.import_module(f"ge_plugin.cli.{COMMANDS[argv[0]]}")
        return int(module.run_raw(argv[1:]))
    # Everything after a lone "--" belongs to the program a command runs (tritonserver for serve); it is cut
    # off before argparse, which would otherwise take it for options of its own.
    passthrough: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1 :]
    # Import only the named command's module; fall back to all of them for --help and typos.
    named = [a for a in argv if not a.startswith("-")][:1]
    parser = build_parser(named if named and named[0] in COMMANDS else None)
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "unknown_ok", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")  # what parse_args says
    args.unknown = unknown
    if passthrough and not getattr(args, "passthrough_ok", False):
        parser.error(f"ge-plugin {args.command} takes no arguments after '--'")
    args.passthrough = passthrough
    try:
        return int(args.func(args) or 0)
    except GePluginError as exc:
        print(f"ge-plugin {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM / SIGHUP while a tritonserver ran (SignalStop)
        return 128 + getattr(exc, "signum", 2)
