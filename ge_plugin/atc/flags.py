"""ATC's command-line flags, parsed and checked the way ATC checks them, before any model is read.

``parse_args(["--model=x.onnx", "--framework=5", ...])`` accepts ``--flag=value`` and ``--flag value``, with one
dash or two and with ``-`` or ``_`` inside the name (``-soc-version``), as the ATC guide says ATC does (and a
leading ``atc``), the last occurrence of a flag winning, as with ATC's gflags. Errors are AtcError with
ATC's message codes (E10001 "Value [...] for parameter [...] is invalid. Reason: ...", E10009 for more than
one gear flag, E10035/E10036 for a gear count outside 2-100, ...) so a user who knows ATC recognises them.
Checks that need the model (input names, -1 dims the gears must cover, output names) are in ``simbuild``.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import NamedTuple

import attrs

from ge_plugin import dtypes
from ge_plugin import precision as P
from ge_plugin.atc.tables import (
    FRAMEWORKS,
    GEAR_FLAGS_EXCLUSIVE,
    MULTI_DEVICE_ATC_FLAGS,
    NOT_ATC_FLAGS,
    ONNX_FRAMEWORK,
)
from ge_plugin.errors import AtcError, GearTextError
from ge_plugin.gears import FLAG_KINDS, GEAR_FLAGS, MAX_GEARS, MIN_GEARS, GearSet, dims_slots, parse_values

INPUT_FORMATS = ("NCHW", "NCDHW", "ND")
LOG_LEVELS = ("debug", "info", "warning", "error", "null")

#: --precision_mode value -> how the simulator rounds float outputs
PRECISION_MODES = {value: P.ROUNDING[p] for value, p in P.precision_of(P.PRECISION_MODE).items()}
#: --precision_mode_v2 value -> rounding
PRECISION_MODES_V2 = {value: P.ROUNDING[p] for value, p in P.precision_of(P.PRECISION_MODE_V2).items()}
#: --output_type values (ge_plugin.dtypes maps them to aclDataType)
OUTPUT_TYPES = tuple(dtypes.BY_ATC_OUTPUT_TYPE)

#: flags the simulator implements, with their --help text
SUPPORTED = {
    "mode": "0 (default): build an OM; the simulator supports no other mode",
    "model": "the ONNX model to build from",
    "framework": "5 (ONNX); the simulator builds ONNX models only",
    "output": "where to write the OM, without .om (ATC appends it)",
    "soc_version": "the target chip, e.g. Ascend910B3 (recorded in the OM)",
    "input_shape": 'e.g. "input_ids:-1,-1;mask:-1,-1"; -1 marks dims the gear flag chooses',
    "input_format": "NCHW (default), NCDHW or ND; --dynamic_dims needs ND",
    "dynamic_batch_size": 'batch gears, e.g. "1,2,4,8" (2 to 100 gears); -1 in the first dim',
    "dynamic_image_size": 'image-size gears, e.g. "224,224;448,448"; -1 in H and W of NCHW inputs',
    "dynamic_dims": 'dims gears, e.g. "1,16;1,32;4,16;4,32": each lists every -1 dim of --input_shape in order',
    "precision_mode": "force_fp16 (default), must_keep_origin_dtype, allow_mix_precision_bf16, ...",
    "precision_mode_v2": "fp16 (default), origin, mixed_float16, mixed_bfloat16, cube_fp16in_fp32out",
    "input_fp16_nodes": 'inputs that take float16 data, e.g. "in1;in2"',
    "out_nodes": 'outputs to keep: ONNX output names "out1;out2" or "node:0;node2:1"',
    "output_type": 'output dtype, e.g. FP16, or per output "node:0:FP16;node2:0:FP32" with --out_nodes',
    "log": "debug, info, warning, error or null (default)",
    "insert_op_conf": "a static AIPP config file (aipp_op sections): CSC, channel swap, mean and scale",
}
#: real ATC flags that do not change what the simulator builds: accepted and recorded
IGNORED = (
    "host_env_os",
    "host_env_cpu",
    "op_select_implmode",
    "optypelist_for_implmode",
    "op_debug_level",
    "enable_small_channel",
    "buffer_optimize",
    "disable_reuse_memory",
    "enable_single_stream",
    "display_model_info",
    "status_check",
    "sparsity",
    # where ATC writes its pre-check report, whether it keeps the original graph, caches and debug output
    "check_report",
    "save_original_model",
    "op_compiler_cache_mode",
    "op_compiler_cache_dir",
    "debug_dir",
    "op_debug_config",
    "quant_dumpable",
    # how ATC schedules and tunes kernels: a sim OM has no kernels
    "core_type",
    "aicore_num",
    "virtual_type",
    "allow_hf32",
    "deterministic",
    "atomic_clean_policy",
    "enable_scope_fusion_passes",
    "mdl_bank_path",
    "op_bank_path",
    "enable_compress_weight",
    "compress_weight_conf",
    "oo_level",
    "jit_compile",
)
#: the values ATC documents for some ignored flags: a typo is refused even though the flag changes nothing
IGNORED_CHOICES = {
    "save_original_model": ("true", "false"),
    "allow_hf32": ("true", "false"),
    "enable_compress_weight": ("true", "false"),
    "deterministic": ("0", "1"),
    "virtual_type": ("0", "1"),
    "atomic_clean_policy": ("0", "1"),
    "op_compiler_cache_mode": ("enable", "disable", "force"),
    "core_type": ("AiCore", "VectorCore"),
}
#: real ATC flags that would change the model in ways the simulator cannot reproduce
UNSUPPORTED = (
    "weight",
    "om",
    "json",
    "singleop",
    "keep_dtype",
    "input_shape_range",
    "external_weight",
    "compression_optimize_conf",
    "fusion_switch_file",
    "is_input_adjust_hw_layout",
    "is_output_adjust_hw_layout",
    "dump_mode",
    "customize_dtypes",
    "auto_tune_mode",
    "op_precision_mode",
    "modify_mixlist",
    "cluster_config",
    "op_name_map",
    "input_hint_shape",
    "shape_generalized_build_mode",
)


def invalid(value: object, flag: str, reason: str) -> AtcError:
    """ATC's E10001."""
    return AtcError(f"E10001: Value [{value}] for parameter [--{flag}] is invalid. Reason: {reason}")


def multi_device_error(flag: str, value: object) -> AtcError:
    """``--tp_size`` and ATC's distributed-build flags: what ATC would say, and why ge-plugin cannot serve it."""
    if flag in NOT_ATC_FLAGS:
        return AtcError(f"ERROR: unknown command line flag '{flag}': {MULTI_DEVICE_ATC_FLAGS[flag]}")
    return invalid(value, flag, MULTI_DEVICE_ATC_FLAGS[flag])


class OutputType(NamedTuple):
    """One item of a per-output ``--output_type``: output ``output_index`` of ``node`` has type ``dtype``."""

    node: str
    output_index: int
    dtype: str


@attrs.frozen
class AtcOptions:
    """One ATC invocation, checked as far as possible without the model."""

    model: str
    framework: int
    output: str  #: without .om
    soc_version: str
    input_shape: tuple[tuple[str, tuple[int, ...]], ...] = ()
    input_format: str | None = None
    #: the gears of the one gear flag given (static without one)
    gear_set: GearSet = attrs.field(factory=GearSet)
    precision_mode: str | None = None
    precision_mode_v2: str | None = None
    input_fp16_nodes: tuple[str, ...] = ()
    out_nodes: tuple[str, ...] = ()
    output_type: str | None = None  #: one type for every output
    output_type_per_node: tuple[OutputType, ...] = ()
    log: str = "null"
    #: the AIPP config file (``ge_plugin.atc.aipp``), or None
    insert_op_conf: str | None = None
    given: tuple[tuple[str, str], ...] = ()  #: every flag as given, in order

    @property
    def dynamic_mode(self) -> str:
        """static | batch | hw | dims"""
        return self.gear_set.kind

    @property
    def gears(self) -> tuple[tuple[int, ...], ...]:
        """Per gear, the values ATC was given."""
        return self.gear_set.values

    @property
    def om_path(self) -> str:
        return self.output + ".om"

    @property
    def precision(self) -> str:
        """How float outputs are rounded: fp32 (exact), fp16 or bf16. ATC's default is fp16."""
        if self.precision_mode_v2 is not None:
            return PRECISION_MODES_V2[self.precision_mode_v2]
        return PRECISION_MODES[self.precision_mode or P.DEFAULT_MODE]

    def command(self) -> str:
        return shlex.join(["atc", *(f"--{flag}={value}" for flag, value in self.given)])


def split_args(argv: Sequence[str]) -> list[tuple[str, str]]:
    """``(flag, value)`` pairs from ``--flag=value`` / ``--flag value`` tokens, one dash or two, ``-`` or ``_``
    inside names (``-soc-version`` is ``soc_version``); a leading ``atc`` is skipped."""
    tokens = list(argv)
    if tokens and tokens[0] in ("atc", "atc.bin"):
        tokens = tokens[1:]
    pairs = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("-") or token in ("-", "--"):
            raise AtcError(f"E10001: Value [{token}] is not a flag; ATC takes --flag=value arguments only")
        name, sep, value = token.lstrip("-").partition("=")
        name = name.replace("-", "_")
        if not sep:
            if i + 1 >= len(tokens):
                raise AtcError(f"E10004: Value for --{name} is empty.")
            value = tokens[i + 1]
            i += 1
        pairs.append((name, value))
        i += 1
    return pairs


def parse_args(argv: Sequence[str]) -> AtcOptions:
    """Check ATC flags as ATC does; AtcError with ATC's message for the first problem."""
    given = _known_flags(argv)
    flags = dict(given)
    for name in ("model", "framework", "output", "soc_version"):
        if not flags.get(name, "").strip():
            raise AtcError(f"E10004: Value for --{name} is empty.")
    mode = flags.get("mode", "0").strip()
    if mode != "0":
        raise invalid(mode, "mode", "the ge-plugin simulator builds OM files (--mode=0) only")
    framework = _framework(flags["framework"])
    input_format = flags.get("input_format")
    if input_format is not None and input_format not in INPUT_FORMATS:
        raise invalid(input_format, "input_format", f"ONNX models take {', '.join(INPUT_FORMATS)}")
    shapes = _input_shape(flags["input_shape"]) if "input_shape" in flags else ()
    gears = _gears(flags, shapes, input_format)
    precision_mode, precision_mode_v2 = _precision_modes(
        flags.get("precision_mode"), flags.get("precision_mode_v2")
    )
    out_nodes = _names(flags.get("out_nodes", ""))
    output_type, per_node = _output_type(flags.get("output_type"), out_nodes)
    log = flags.get("log", "null")
    if log not in LOG_LEVELS:
        raise AtcError(
            f"E10010: Value [{log}] for parameter [--log] is invalid. Use {', '.join(LOG_LEVELS)}."
        )
    output = flags["output"].strip()
    return AtcOptions(
        model=flags["model"].strip(),
        framework=framework,
        output=output[: -len(".om")] if output.endswith(".om") else output,
        soc_version=flags["soc_version"].strip(),
        input_shape=shapes,
        input_format=input_format,
        gear_set=gears,
        precision_mode=precision_mode,
        precision_mode_v2=precision_mode_v2,
        input_fp16_nodes=_names(flags.get("input_fp16_nodes", "")),
        out_nodes=out_nodes,
        output_type=output_type,
        output_type_per_node=per_node,
        log=log,
        insert_op_conf=flags["insert_op_conf"].strip() if flags.get("insert_op_conf", "").strip() else None,
        given=tuple(given),
    )


def _known_flags(argv: Sequence[str]) -> list[tuple[str, str]]:
    """The (flag, value) pairs, each a flag the simulator supports or ignores; AtcError for any other."""
    pairs = split_args(argv)
    for name, value in pairs:
        if name in MULTI_DEVICE_ATC_FLAGS:
            raise multi_device_error(name, value)
        if name in UNSUPPORTED:
            raise invalid(
                value,
                name,
                f"--{name} is an ATC flag the ge-plugin simulator does not support (see docs/atc.md)",
            )
        if name not in SUPPORTED and name not in IGNORED:
            raise AtcError(f"ERROR: unknown command line flag '{name}'")
        choices = IGNORED_CHOICES.get(name)
        if choices is not None and value.strip() not in choices:
            raise invalid(value, name, f"use {' or '.join(choices)}")
    return pairs


def _precision_modes(mode: str | None, mode_v2: str | None) -> tuple[str | None, str | None]:
    """--precision_mode or --precision_mode_v2 (not both), each one of its values."""
    if mode is not None and mode_v2 is not None:
        raise AtcError("E10047: --precision_mode and --precision_mode_v2 are mutually exclusive.")
    if mode is not None and mode not in PRECISION_MODES:
        raise invalid(mode, "precision_mode", f"use one of {', '.join(PRECISION_MODES)}")
    if mode_v2 is not None and mode_v2 not in PRECISION_MODES_V2:
        reason = f"use one of {', '.join(PRECISION_MODES_V2)}"
        if mode_v2 == "mixed_hif8":
            reason = "HiFloat8 (Atlas 350) is not simulated; " + reason
        raise invalid(mode_v2, "precision_mode_v2", reason)
    return mode, mode_v2


def _framework(text: str) -> int:
    try:
        framework = int(text.strip())
    except ValueError:
        raise invalid(
            text, "framework", "expected 0 (Caffe), 1 (MindSpore), 3 (TensorFlow) or 5 (ONNX)"
        ) from None
    if framework != ONNX_FRAMEWORK:
        what = FRAMEWORKS.get(framework)
        detail = f"{what} models" if what else f"framework {framework}"
        raise invalid(
            text,
            "framework",
            f"the ge-plugin simulator builds ONNX models only (--framework=5); {detail} are not supported",
        )
    return framework


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(";") if name.strip())


_SHAPE_SAMPLE = '"input_name1:n1,c1,h1,w1;input_name2:n2,c2,h2,w2"'


def _input_shape(text: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    shapes: dict[str, tuple[int, ...]] = {}
    for item in text.split(";"):
        if not item.strip():
            continue
        name, sep, dims_text = item.rpartition(":")
        name = name.strip()
        if not sep or not name:
            raise AtcError(
                f"E10002: Value [{text}] for parameter [--input_shape] is invalid. Reason: [{item}] has no input name. "
                f"The value must be formatted as {_SHAPE_SAMPLE}."
            )
        if "~" in dims_text:
            raise invalid(
                text,
                "input_shape",
                f"[{item}] is a shape range (n1~n2), which builds a dynamic-shape model; the ge-plugin simulator "
                "supports gear models only (--dynamic_batch_size, --dynamic_image_size, --dynamic_dims)",
            )
        dims = []
        for dim in dims_text.split(",") if dims_text.strip() else []:
            try:
                value = int(dim.strip())
            except ValueError:
                raise AtcError(
                    f"E10002: Value [{text}] for parameter [--input_shape] is invalid. Reason: [{dim}] in [{item}] "
                    f"is not an integer. The value must be formatted as {_SHAPE_SAMPLE}."
                ) from None
            if value == 0 or value < -1:
                raise AtcError(
                    f"E10011: Value [{text}] for parameter [--input_shape] is invalid. Shape values must be "
                    f"positive integers or -1. The error value in the shape is [{value}]."
                )
            dims.append(value)
        if name in shapes:
            raise AtcError(
                f"E10002: Value [{text}] for parameter [--input_shape] is invalid. Reason: input [{name}] appears "
                f"twice. The value must be formatted as {_SHAPE_SAMPLE}."
            )
        shapes[name] = tuple(dims)
    return tuple(shapes.items())


def _gear_values(flag: str, text: str) -> tuple[tuple[int, ...], ...]:
    """Gears of ``--flag`` (``ge_plugin.gears.parse_values``), its text's faults in ATC's words."""
    try:
        return parse_values(text, kind=FLAG_KINDS[flag])
    except GearTextError as exc:
        if exc.problem in ("empty", "widths"):  # ATC counts the profiles first
            _check_count(
                flag, len([p for p in text.split(";") if p.strip()]) if exc.problem == "widths" else 0
            )
        words = {
            "not_integer": f"E10001: Value [{{text}}] for parameter [--{flag}] is invalid. Reason: [{{item}}] is "
            "not an integer",
            "below_one": f"E10038: Dimension size [{{value}}] in --{flag} is invalid. The value must be greater "
            "than 0.",
            "not_pairs": "E10020: Value [{text}] for parameter --dynamic_image_size is invalid. Each profile must "
            'be "height,width", profiles separated by ";".',
        }
        raise AtcError(
            exc.said(
                words,
                f"E10037: The profiles configured in --{flag} have inconsistent dimension counts. A profile has "
                "{a} dimensions while another has {b} dimensions.",
            )
        ) from None


def _check_count(flag: str, count: int) -> None:
    if count < MIN_GEARS:
        raise AtcError(f"E10035: --{flag} has {count} profiles, which is less than the minimum {MIN_GEARS}.")
    if count > MAX_GEARS:
        raise AtcError(
            f"E10036: --{flag} has {count} profiles, which is greater than the maximum {MAX_GEARS}."
        )


def _check_profiles(flag: str, gears: tuple[tuple[int, ...], ...], width: int | None) -> None:
    """ATC's checks of a gear list as a whole: how many, the width ``width`` when the -1 dims say, no
    duplicates."""
    _check_count(flag, len(gears))
    if width is not None and gears[0] and len(gears[0]) != width:
        raise AtcError(
            f"E10045: --input_shape has {width} dims of -1 but each profile in --{flag} has {len(gears[0])} values; "
            "each profile lists one value per -1 dim, in --input_shape order."
        )
    if len(set(gears)) != len(gears):
        raise AtcError(f"E10039: The --{flag} argument has duplicate profiles.")


_Shapes = tuple[tuple[str, tuple[int, ...]], ...]


def _gears(flags: dict[str, str], shapes: _Shapes, input_format: str | None) -> GearSet:
    """The gears of the one gear flag given (none: a static model), checked as ATC checks them."""
    present = [f for f in GEAR_FLAGS if f in flags]
    if len(present) > 1:
        raise AtcError(f"E10009: {GEAR_FLAGS_EXCLUSIVE} (given: {', '.join('--' + f for f in present)}).")
    minus = [(name, k) for name, dims in shapes for k, d in enumerate(dims) if d == -1]
    if not present:
        if minus:
            raise _dynamic_without_gears(flags["input_shape"], *minus[0])
        return GearSet()
    flag = present[0]
    if not minus:
        raise _gears_without_dynamic(flag)
    if flag == "dynamic_batch_size":
        _check_batch_dims(shapes, minus)
    elif flag == "dynamic_image_size":
        _check_image_dims(shapes, input_format)
    elif input_format != "ND":
        raise invalid(input_format or "NCHW", "input_format", "--dynamic_dims needs --input_format=ND")
    values = _gear_values(flag, flags[flag])
    _check_profiles(flag, values, len(minus) if flag == "dynamic_dims" else None)
    return GearSet(
        values=values, kind=FLAG_KINDS[flag], slots=dims_slots(shapes) if flag == "dynamic_dims" else ()
    )


def _dynamic_without_gears(input_shape: str, name: str, k: int) -> AtcError:
    return AtcError(
        f"E10011: Value [{input_shape}] for parameter [--input_shape] is invalid. Shape values must "
        f"be positive integers. The error value in the shape is [-1] (input {name}, dim {k}). Add "
        "--dynamic_batch_size, --dynamic_image_size or --dynamic_dims to choose gears for -1 dims (ATC would "
        "build a dynamic-shape model, which the ge-plugin simulator does not support)."
    )


def _gears_without_dynamic(flag: str) -> AtcError:
    if flag == "dynamic_batch_size":
        return AtcError(
            "E10031: --dynamic_batch_size is included, but none of the nodes specified in --input_shape has a "
            "batch size equaling -1."
        )
    return AtcError(
        f"E10040: As --{flag} is included, the corresponding nodes specified in --input_shape must have -1 axes."
    )


def _check_batch_dims(shapes: _Shapes, minus: list[tuple[str, int]]) -> None:
    """With --dynamic_batch_size, only dim 0 may be -1."""
    for name, k in minus:
        if k != 0:
            raise AtcError(
                f"E10018: Value [{dict(shapes)[name]}] for shape [{name}] is invalid. When --dynamic_batch_size "
                "is included, only batch size N can be -1 in --input_shape."
            )


def _check_image_dims(shapes: _Shapes, input_format: str | None) -> None:
    """With --dynamic_image_size: NCHW inputs whose -1 dims are exactly h and w."""
    if input_format not in (None, "NCHW"):
        raise invalid(input_format, "input_format", "--dynamic_image_size needs NCHW inputs")
    for name, dims in shapes:
        marked = [k for k, d in enumerate(dims) if d == -1]
        if marked and (len(dims) != 4 or marked != [2, 3]):
            raise AtcError(
                "E10019: When --dynamic_image_size is included, only the height and width axes can be -1 in "
                f"--input_shape (input {name} is {list(dims)})."
            )


def _output_type(text: str | None, out_nodes: tuple[str, ...]) -> tuple[str | None, tuple[OutputType, ...]]:
    if text is None or not text.strip():
        return None, ()
    text = text.strip()
    if ":" not in text:
        if text.upper() not in OUTPUT_TYPES:
            raise invalid(text, "output_type", f"use one of {', '.join(OUTPUT_TYPES)}")
        return text.upper(), ()
    if not out_nodes:
        raise invalid(text, "output_type", "a per-output --output_type (node:index:type) needs --out_nodes")
    per_node: list[OutputType] = []
    for item in _names(text):
        node, sep1, rest = item.partition(":")
        index, sep2, dtype = rest.partition(":")
        if not (sep1 and sep2) or not (index.strip().isascii() and index.strip().isdigit()):
            raise invalid(text, "output_type", f"[{item}] is not node:index:type")
        if dtype.strip().upper() not in OUTPUT_TYPES:
            raise invalid(
                text, "output_type", f"[{dtype}] in [{item}] is not one of {', '.join(OUTPUT_TYPES)}"
            )
        per_node.append(OutputType(node.strip(), int(index), dtype.strip().upper()))
    return None, tuple(per_node)
