"""``ge-plugin atc``: ATC's command line, building sim OMs for the simulator, or printed for a real host.

Three ways to call it:

- ATC's own flags (``--flag=value`` or ``--flag value``): build ``<output>.om`` as a sim OM, answering like
  ATC (``ATC run success, welcome to the next use.`` or ``ATC run failed, ...`` plus an E1xxxx line);
- ``SPEC... --print``: the ``atc`` command that compiles each spec's OM on an Ascend host;
- ``SPEC... --sim [--repository REPO]``: build each spec's sim OM into ``REPO/<name>/1/`` from those same ATC
  flags, through the same code as the first form. A directory means every spec in it.

A spec with ``versions`` has one OM per version, in ``REPO/<name>/<version>/``; ``--model-version N`` limits
both forms to version N, which is how a rolling update compiles only the version it adds (rebuilding a
served version's OM would make Triton reload it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ge_plugin.atc import flags as atc_flags
from ge_plugin.atc.tables import MULTI_DEVICE_ATC_FLAGS
from ge_plugin.cli._common import add_command
from ge_plugin.errors import AtcError

if TYPE_CHECKING:
    from ge_plugin.spec.model import ModelSpec

START = "ATC start working now, please wait for a moment."
SUCCESS = "ATC run success, welcome to the next use."
FAILURE = "ATC run failed, Please check the detail log, Try 'atc --help' for more information"

EXAMPLES = """\
  ge-plugin atc --model=tiny_llama.onnx --framework=5 --output=llama --soc_version=Ascend910B3 \\
      --input_shape="input_ids:-1,-1" --input_format=ND --dynamic_dims="1,16;1,32;4,16;4,32" \\
      --precision_mode=must_keep_origin_dtype
  ge-plugin atc --model=resnet.onnx --framework=5 --output=resnet --soc_version=Ascend310P3 \\
      --input_shape="x:-1,3,224,224" --dynamic_batch_size="1,2,4,8"
  ge-plugin atc specs/llama.yaml --print
  ge-plugin atc specs --sim --repository model_repository
  ge-plugin atc specs/llama.yaml --sim --model-version 2    # only the OM of version 2
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "atc",
        help="build sim OMs with ATC's flags, or print the real ATC command of a spec",
        description=(
            "Build a sim OM (for the ge-plugin simulator) from an ONNX model with ATC's own flags, or, given "
            "specs, print the atc command that compiles them on an Ascend host (--print) or build their sim OMs "
            "into a model repository (--sim). Sim OM format and supported flags: docs/atc.md."
        ),
        examples=EXAMPLES,
    )
    parser.allow_abbrev = False  # ATC has --mode and --model; a prefix must not pick one
    parser.add_argument(
        "specs", nargs="*", metavar="SPEC", help="spec files or directories (with --print/--sim)"
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--print", dest="print_command", action="store_true", help="print the atc command of each spec"
    )
    what.add_argument("--sim", action="store_true", help="build each spec's sim OM into the repository")
    parser.add_argument(
        "--repository",
        metavar="REPO",
        default="model_repository",
        help="with --sim, and with --print for specs that list versions (default: model_repository)",
    )
    parser.add_argument(
        "--model-version",
        metavar="N",
        type=int,
        action="append",
        dest="model_versions",
        help="with SPECs: only this version (repeatable; default: every version of each spec)",
    )
    group = parser.add_argument_group(
        "ATC flags, as ATC takes them (--flag=value or --flag value; -flag and --flag-name too)"
    )
    for flag, text in atc_flags.SUPPORTED.items():
        group.add_argument(f"--{flag}", dest=f"atc_{flag}", metavar="VALUE", help=text)
    for flag in (*atc_flags.IGNORED, *atc_flags.UNSUPPORTED, *MULTI_DEVICE_ATC_FLAGS):
        group.add_argument(f"--{flag}", dest=f"atc_{flag}", help=argparse.SUPPRESS)
    for flag in (*atc_flags.SUPPORTED, *atc_flags.IGNORED, *atc_flags.UNSUPPORTED, *MULTI_DEVICE_ATC_FLAGS):
        group.add_argument(*_other_spellings(flag), dest=f"atc_{flag}", help=argparse.SUPPRESS)
    # flags ATC does not know are answered in ATC's words (run), not argparse's
    parser.set_defaults(func=run, _parser=parser, unknown_ok=True)


def _other_spellings(flag: str) -> list[str]:
    """ATC turns a one-dash prefix into two and takes ``-`` for ``_`` in names (the ATC guide's parameter
    overview): ``-output_type``, ``--output-type``, ``-output-type`` are ``--output_type``."""
    hyphens = flag.replace("_", "-")
    return [f"-{flag}", *([f"--{hyphens}", f"-{hyphens}"] if hyphens != flag else [])]


def _given_flags(args: argparse.Namespace) -> list[str]:
    return [
        f"--{name[len('atc_') :]}={value}"
        for name, value in vars(args).items()
        if name.startswith("atc_") and value is not None
    ]


def _unknown_flag(word: str) -> int:
    """ATC's (gflags') answer to a flag it does not know, with the nearest one it does; a usage error."""
    import difflib

    name = word.lstrip("-").split("=", 1)[0].replace("-", "_")
    known = [*atc_flags.SUPPORTED, *atc_flags.IGNORED, *atc_flags.UNSUPPORTED, "print", "sim", "repository"]
    near = difflib.get_close_matches(name, known, n=2, cutoff=0.75)
    hint = f" (did you mean {' or '.join(f'--{flag}' for flag in near)}?)" if near else ""
    print(f"ERROR: unknown command line flag '{name}'{hint}", file=sys.stderr)
    return 2


def _fail(error: AtcError) -> int:
    print(FAILURE, file=sys.stderr)
    print(error, file=sys.stderr)
    return 1


def build_from_flags(argv: list[str]) -> Path:
    """Mode 1 and the engine of mode 3: ATC flags -> sim OM; AtcError as ATC would report it."""
    from ge_plugin.atc import simbuild

    options = atc_flags.parse_args(argv)
    return simbuild.build(options, echo=print).path


def _versions(spec: ModelSpec, wanted: list[int] | None) -> list[int]:
    """The spec's versions to compile: all, or those of ``--model-version`` (AtcError for one it lacks)."""
    if not wanted:
        return list(spec.version_numbers)
    for version in wanted:
        if version not in spec.version_numbers:
            shown = ", ".join(map(str, spec.version_numbers))
            raise AtcError(
                f"{spec.name}: --model-version {version}: the spec has no such version (its versions: {shown})"
            )
    return sorted(set(wanted))


def run(args: argparse.Namespace) -> int:
    """Every AtcError of every mode ends here, reported as ATC reports a failure."""
    if args.unknown:
        return _unknown_flag(args.unknown[0])
    try:
        return _run(args)
    except AtcError as exc:
        return _fail(exc)


def _run(args: argparse.Namespace) -> int:
    given = _given_flags(args)
    for flag in MULTI_DEVICE_ATC_FLAGS:  # before any other check: the answer to "split over 8 NPUs"
        value = getattr(args, f"atc_{flag}", None)
        if value is not None:
            raise atc_flags.multi_device_error(flag, value)
    _check_usage(args, given)
    if not args.specs:
        return _run_flags(given)
    from ge_plugin.spec import load_specs

    specs = load_specs(args.specs)
    chosen = [(spec, _versions(spec, args.model_versions)) for spec in specs]
    if args.print_command:
        return _print_commands(chosen, Path(args.repository))
    return _build_specs(chosen, Path(args.repository))


def _check_usage(args: argparse.Namespace, given: list[str]) -> None:
    """ATC flags, or SPECs with --print or --sim; a usage error (exit 2) otherwise."""
    if args.model_versions and not args.specs:
        args._parser.error("--model-version applies to SPECs (with --print or --sim)")
    if args.specs and given:
        args._parser.error("give either ATC flags or SPECs with --print/--sim, not both")
    if args.specs and not (args.print_command or args.sim):
        args._parser.error("with SPECs, say what to do: --print (the atc command) or --sim (build sim OMs)")
    if not args.specs and (args.print_command or args.sim):
        args._parser.error("--print and --sim take SPEC files or directories")
    if not args.specs and not given:
        args._parser.error("no ATC flags given; start with --model=MODEL.onnx --framework=5 --output=NAME")


def _run_flags(given: list[str]) -> int:
    """Mode 1: ATC's own flags -> one sim OM, with ATC's messages."""
    print(START)
    path = build_from_flags(given)
    print(f"sim OM written to {path}")
    print(SUCCESS)
    return 0


def _print_commands(chosen: list[tuple[ModelSpec, list[int]]], repository: Path) -> int:
    """SPEC --print: the atc command of each spec (and version) for a real Ascend host."""
    from ge_plugin.atc.command import atc_command

    for spec, versions in chosen:
        for version in versions:
            if spec.versions:  # several OMs: each into its own version folder
                print(f"# {spec.name} version {version}")
                print(atc_command(spec, version=version, output=_output(repository, spec, version)))
            else:
                print(atc_command(spec))
    return 0


def _build_specs(chosen: list[tuple[ModelSpec, list[int]]], repository: Path) -> int:
    """SPEC --sim: a sim OM for each spec (and version), in its Triton version folder."""
    from ge_plugin.atc.command import atc_args

    print(START)
    for spec, versions in chosen:
        for version in versions:
            output = _output(repository, spec, version)
            output.parent.mkdir(parents=True, exist_ok=True)
            try:
                path = build_from_flags(atc_args(spec, version=version, output=output))
            except AtcError as exc:
                raise AtcError(f"{spec.name}: {exc}") from None
            print(f"{spec.name}: sim OM written to {path}")
    print(SUCCESS)
    return 0


def _output(repository: Path, spec: ModelSpec, version: int) -> Path:
    """``REPO/<name>/<version>/<om stem>``: where Triton's version folder holds the OM."""
    return repository / spec.name / str(version) / Path(spec.om_filename_for(version)).stem
