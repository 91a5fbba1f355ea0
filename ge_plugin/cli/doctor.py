"""``ge-plugin doctor``: the device, fast path, numpy, glibc, tritonserver and perf_analyzer this host would use."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ge_plugin.cli._common import add_command
from ge_plugin.cli.serve import add_control_flags, control_options

if TYPE_CHECKING:
    from ge_plugin.doctor import Finding

EXAMPLES = """
  ge-plugin doctor
  GE_PLUGIN_DEVICE=ascend ge-plugin doctor      # on an Ascend host: fails unless pyACL imports
  ge-plugin doctor --admin-key-file key --open-api statistics   # which APIs such a serve opens, to whom
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "doctor",
        help="check what this host runs: device, fast path, numpy, glibc, tritonserver, perf_analyzer",
        description=(
            "One line per piece: ok, warn (optional: only bench, tune and perf-analyzer need perf_analyzer) or "
            "fail, with what to do (perf_analyzer's libraries as this shell finds them, too: run it from the "
            "shell you will use); then which API groups ge-plugin serve with the control-plane flags given here (the same "
            "as serve's, and tritonserver's own restriction flags after '--') opens to whom. Exit status 1 "
            "when a piece serving needs fails."
        ),
        examples=EXAMPLES,
    )
    add_control_flags(parser)
    parser.add_argument(
        "--http-guard",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="as serve's: whether ge-plugin's HTTP front stands before tritonserver (default: on)",
    )
    parser.add_argument(
        "--grpc-guard",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="as serve's: whether ge-plugin's gRPC front stands before tritonserver (default: on)",
    )
    parser.set_defaults(func=run, passthrough_ok=True)


def run(args: argparse.Namespace) -> int:
    from ge_plugin import doctor

    findings = doctor.run_checks() + control_plane(args)
    print(doctor.report(findings))
    print(f"({doctor.environment_summary()})")
    return 1 if any(f.status == doctor.FAIL for f in findings) else 0


def control_plane(args: argparse.Namespace) -> list[Finding]:
    from pathlib import Path

    from ge_plugin import doctor
    from ge_plugin.errors import ServeError
    from ge_plugin.serve.triton import ServerOptions

    try:
        options = ServerOptions(
            repository=Path("."),
            http_guard=args.http_guard,
            grpc_guard=args.grpc_guard,
            extra_args=args.passthrough,
            **control_options(args),
        )
        return doctor.check_control_plane(options.access())
    except ServeError as exc:
        return [doctor.Finding(doctor.FAIL, "control plane", f"ge-plugin serve would not start: {exc}")]
