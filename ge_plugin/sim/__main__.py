"""``python -m ge_plugin.sim run [--check] SCRIPT [ARGS...]``: run a pyACL program with ``import acl`` simulated.

The script runs unmodified as ``__main__`` (``sys.argv`` = SCRIPT and ARGS, its directory first on
``sys.path``), so a sample written for a real Ascend host runs as is. With ``--check`` the simulator is a
sanitizer (``ge_plugin.sim.sanitizer``): every memory bug the program makes is reported on stderr as it
happens, leaks when it finalizes (or exits), a summary at the end, and the exit status is 1 when the program
made errors but would have exited 0. ``python -m ge_plugin.sim om FILE`` prints a sim OM's header.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
from collections.abc import Sequence

EXAMPLES = """examples:
  python -m ge_plugin.sim run samples/acl_sample.py --model model.om
  python -m ge_plugin.sim run --check samples/acl_sample.py --model model.om
  GE_PLUGIN_SIM_FAULTS="mdl.execute:nth=2:code=507011" python -m ge_plugin.sim run app.py
  python -m ge_plugin.sim om model.om
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ge_plugin.sim",
        description="The ge-plugin CPU simulator of pyACL.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    run = sub.add_parser("run", help="run a pyACL program with `import acl` resolving to the simulator")
    run.add_argument(
        "--check",
        action="store_true",
        help="sanitize: report out-of-bounds copies, use after free, wrong memory kinds and leaks "
        "(exit status 1 when the program made errors)",
    )
    run.add_argument("script", help="the Python program to run")
    run.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    om = sub.add_parser("om", help="print the header of a sim OM file")
    om.add_argument("file")
    return parser


def run_script(script: str, args: Sequence[str], *, check: bool = False) -> int:
    """Run ``script`` as ``__main__`` with the simulator installed as ``acl``; its exit status (with
    ``check``, 1 instead of 0 when the sanitizer caught errors)."""
    from ge_plugin.sim import install, sanitizer

    if not os.path.isfile(script):
        print(f"python -m ge_plugin.sim run: error: {script} does not exist", file=sys.stderr)
        return 2
    if check:
        os.environ[sanitizer.ENV] = "1"  # for acl.init here, and for processes the program starts
        sanitizer.enable()
    install()
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    status = _run_main(script)
    if check:
        _report_leaks_at_exit()
        print(sanitizer.summary(), file=sys.stderr)
        if status == 0 and sanitizer.errors():
            status = 1
    return status


def _run_main(script: str) -> int:
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    return 0


def _report_leaks_at_exit() -> None:
    """A program that never finalized leaks everything still allocated: say so before the summary (the
    interpreter's exit hook would say it after)."""
    from ge_plugin.sim import _state

    _state.report_exit_leaks("the end of the program (acl.finalize was never called)")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "run":
        return run_script(args.script, args.args, check=args.check)
    from ge_plugin.atc import simom
    from ge_plugin.errors import ModelFileError

    try:
        om = simom.read(args.file)
    except ModelFileError as exc:
        print(f"python -m ge_plugin.sim om: error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(om.header, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
