"""``ge-plugin doctor``: the device, fast path, numpy, glibc, tritonserver and perf_analyzer this host would use."""

from __future__ import annotations

import argparse

from ge_plugin.cli._common import add_command

EXAMPLES = """
  ge-plugin doctor
  GE_PLUGIN_DEVICE=ascend ge-plugin doctor      # on an Ascend host: fails unless pyACL imports
"""


def register(subparsers) -> None:
    parser = add_command(
        subparsers,
        "doctor",
        help="check what this host runs: device, fast path, numpy, glibc, tritonserver, perf_analyzer",
        description=(
            "One line per piece: ok, warn (optional: only the bench needs perf_analyzer) or fail, with what "
            "to do. Exit status 1 when a piece serving needs fails."
        ),
        examples=EXAMPLES,
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ge_plugin import doctor

    findings = doctor.run_checks()
    print(doctor.report(findings))
    print(f"({doctor.environment_summary()})")
    return 1 if any(f.status == doctor.FAIL for f in findings) else 0
