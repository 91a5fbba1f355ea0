"""Checks on spec values, each with a message that stands alone.

cattrs reports where a problem is (``$.batching.gears``) and the loader adds the line, so a message says
only what is wrong and what would be right. Field validators are attrs validators: they raise
``ValueError(message, attribute, value, at)``, where ``at`` optionally narrows the place to an item
(``(2,)`` for ``gears[2]``). ``cross_checks`` holds the rules that span fields (names, gear grids, dim ties);
they run once the whole spec has structured.

The numeric limits are ATC's (ge_plugin.atc.tables): 2 to 100 gears per model (``--dynamic_batch_size`` /
``--dynamic_image_size`` / ``--dynamic_dims``), batch sizes 1 to 2048, and one dynamic mode per model, which is
why batch gears and dims gears combine into a single ``--dynamic_dims`` grid, and why image sizes take one fixed
batch size.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any, NoReturn, Union

import attrs

from ge_plugin.acl_constants import ACL_DYNAMIC_TENSOR_NAME as MBATCH_INPUT
from ge_plugin.atc.tables import CONTROLLED_ATC_FLAGS, GEAR_FLAGS_EXCLUSIVE, MULTI_DEVICE_ATC_FLAGS
from ge_plugin.gears import MAX_BATCH, MAX_GEARS, MIN_GEARS

if TYPE_CHECKING:
    from ge_plugin.dtypes import DType
    from ge_plugin.spec.model import ModelSpec

#: where a cross-field problem is, from the spec root, and what it is
Problem = tuple[tuple[Union[str, int], ...], str]

#: streams one device has (CANN documents 1024 for the Ascend 310 and 2048 for the 910; a spec keeps within
#: the smaller so that it loads on either). Every instance takes ``streams_per_instance`` of them plus the
#: default stream of its context.
DEVICE_STREAMS = 1024
DEVICE_STREAMS_WHY = "the Ascend 310's number; the 910 has 2048"
MAX_INSTANCES_PER_DEVICE = DEVICE_STREAMS // 2
MAX_STREAMS_PER_INSTANCE = DEVICE_STREAMS - 1
MAX_WARMUP = 100
MAX_METRICS_INTERVAL_MS = 3_600_000
UINT32_MAX = 2**32 - 1
#: Triton's version numbers are int64; a version folder is named by its number
MAX_VERSION = 2**63 - 1

#: ATC's own words for its one-dynamic-mode rule, as a spec error says it
_ONE_DYNAMIC_MODE = f"ATC: {GEAR_FLAGS_EXCLUSIVE} (E10009)"

_MODEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_SOC_VERSION = re.compile(r"Ascend[0-9A-Za-z_]+")
_ATC_FLAG = re.compile(r"[a-z][a-z0-9_]*")

Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def _fail(attribute: attrs.Attribute[Any], value: Any, message: str, *at: Union[str, int]) -> NoReturn:
    raise ValueError(message, attribute, value, at)


def _show(values: Sequence[Any]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def between(minimum: int, maximum: int, why: str) -> Validator:
    """``minimum`` <= value <= ``maximum``; ``why`` says where the upper bound comes from."""

    def check(_instance: Any, attribute: attrs.Attribute[Any], value: int) -> None:
        if value < minimum:
            _fail(attribute, value, f"must be >= {minimum}, got {value}")
        if value > maximum:
            _fail(attribute, value, f"at most {maximum}: {why}, got {value}")

    return check


def uint_field(bits: int, triton_field: str) -> Validator:
    """>= 0 and within the unsigned protobuf field of Triton's model config that the value is rendered to."""
    return between(0, 2**bits - 1, f"Triton's {triton_field} is a {bits}-bit unsigned field")


def one_of(choices: Sequence[str]) -> Validator:
    def check(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
        if value not in choices:
            _fail(attribute, value, f"expected one of {', '.join(choices)}, got {value!r}")

    return check


def finite(_instance: Any, attribute: attrs.Attribute[Any], value: float) -> None:
    if not math.isfinite(value):
        _fail(attribute, value, f"must be a finite number, got {value}")


def model_name(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if not _MODEL_NAME.fullmatch(value) or value in (".", ".."):
        _fail(
            attribute,
            value,
            f"a model name becomes a directory of the model repository: use letters, digits, '_', '-' and '.', "
            f"got {value!r}",
        )


def tensor_name(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if not value.strip() or value != value.strip():
        _fail(attribute, value, f"a tensor name must be non-empty, without surrounding spaces, got {value!r}")
    if value == MBATCH_INPUT:
        _fail(attribute, value, f"{MBATCH_INPUT!r} is the input ATC adds to gear models; pick another name")


def tensor_dtype(_instance: Any, attribute: attrs.Attribute[Any], value: DType) -> None:
    """Types the ``ge`` backend can carry between Triton and an OM (it refuses the others at load time)."""
    if value.short == "string":
        _fail(attribute, value, "string tensors cannot go to an OM model; send token ids or bytes as uint8")


def dims(_instance: Any, attribute: attrs.Attribute[Any], value: tuple[int, ...]) -> None:
    if not value:
        _fail(attribute, value, "list at least one dim (config dims exclude the batch dim when batching)")
    for index, dim in enumerate(value):
        if dim != -1 and dim < 1:
            _fail(attribute, value, f"a dim is -1 (dynamic) or >= 1, got {dim}", index)


def om_filename(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    path = PurePosixPath(value)
    if not value.endswith(".om") or path.name == ".om":
        _fail(attribute, value, f"the OM file name ends in .om, e.g. model.om, got {value!r}")
    if path.is_absolute() or PureWindowsPath(value).is_absolute() or ".." in path.parts:
        _fail(
            attribute,
            value,
            f"the OM file lives in the model's version folder <repo>/<name>/1/: give a relative path without "
            f"'..', got {value!r}",
        )


def onnx_path(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if not value.lower().endswith(".onnx"):
        _fail(
            attribute,
            value,
            f"the source is the ONNX model ATC compiles (--framework=5), a .onnx file, got {value!r}",
        )


def json_file(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if not value.lower().endswith(".json"):
        _fail(attribute, value, f"a Hugging Face tokenizer file is a .json file, got {value!r}")


def soc_version(_instance: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if not _SOC_VERSION.fullmatch(value):
        _fail(
            attribute,
            value,
            f"expected 'Ascend' + the chip name from npu-smi info without spaces (e.g. Ascend310P3, "
            f"Ascend910B3), got {value!r}",
        )


def batch_gears(_instance: Any, attribute: attrs.Attribute[Any], value: tuple[int, ...]) -> None:
    """Each gear on its own; how many there may be depends on image_sizes (a cross check)."""
    if not value:
        _fail(attribute, value, "list at least one batch size")
    if len(value) > MAX_GEARS:
        _fail(attribute, value, f"ATC takes {MIN_GEARS} to {MAX_GEARS} batch gears, got {len(value)}")
    for index, gear in enumerate(value):
        if not 1 <= gear <= MAX_BATCH:
            _fail(attribute, value, f"a batch gear is 1 to {MAX_BATCH}, got {gear}", index)
        if index and gear <= value[index - 1]:
            _fail(attribute, value, f"gears must be strictly ascending, got {_show(value)}", index)


def seq_gears(_instance: Any, attribute: attrs.Attribute[Any], value: tuple[int, ...]) -> None:
    """Prefill chunk lengths: strictly ascending, each >= 1; how they fit the context is a cross check."""
    if not value:
        _fail(attribute, value, "list at least one prefill chunk length")
    for index, gear in enumerate(value):
        if gear < 1:
            _fail(attribute, value, f"a chunk length is >= 1, got {gear}", index)
        if index and gear <= value[index - 1]:
            _fail(attribute, value, f"gears must be strictly ascending, got {_show(value)}", index)


def dims_gears(_instance: Any, attribute: attrs.Attribute[Any], value: tuple[Any, ...]) -> None:
    """The shape of ``dims_gears`` on its own; how it fits the inputs is a cross check."""
    if len(value) > MAX_GEARS:
        _fail(attribute, value, f"ATC takes at most {MAX_GEARS} gears, got {len(value)}")
    flat = [isinstance(gear, int) for gear in value]
    if any(flat) and not all(flat):
        _fail(
            attribute,
            value,
            "use one form: a list of ints (every -1 dim takes that value) or a list of lists (one value per -1 "
            "dim), not both",
        )
    seen: dict[Any, int] = {}
    for index, gear in enumerate(value):
        values = (gear,) if isinstance(gear, int) else gear
        if not values:
            _fail(attribute, value, "a gear lists at least one dim value", index)
        if any(v < 1 for v in values):
            _fail(attribute, value, f"dim values are >= 1, got {_show(values)}", index)
        if gear in seen:
            _fail(
                attribute, value, f"gear {_show(values)} is listed twice (also at index {seen[gear]})", index
            )
        seen[gear] = index


def image_sizes(_instance: Any, attribute: attrs.Attribute[Any], value: tuple[tuple[int, ...], ...]) -> None:
    """``[[224, 224], [448, 448]]``: ATC's --dynamic_image_size profiles, "height,width" each."""
    if value and not MIN_GEARS <= len(value) <= MAX_GEARS:
        _fail(attribute, value, f"ATC takes {MIN_GEARS} to {MAX_GEARS} image sizes, got {len(value)}")
    seen: dict[tuple[int, ...], int] = {}
    for index, size in enumerate(value):
        if len(size) != 2:
            _fail(attribute, value, f"an image size is [height, width], got {_show(size)}", index)
        if any(d < 1 for d in size):
            _fail(attribute, value, f"height and width are >= 1, got {_show(size)}", index)
        if size in seen:
            _fail(attribute, value, f"{_show(size)} is listed twice (also at index {seen[size]})", index)
        seen[size] = index


def value_range(_instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if len(value) != 2:
        _fail(attribute, value, f"a range is [low, high], got {len(value)} values")
    for index, bound in enumerate(value):
        if isinstance(bound, bool) or not isinstance(bound, (int, float)) or bound != bound:
            _fail(attribute, value, f"a range bound is a number, got {bound!r}", index)
    if value[0] > value[1]:
        _fail(attribute, value, f"low {value[0]} is above high {value[1]}")


def channel_means(_instance: Any, attribute: attrs.Attribute[Any], value: tuple[float, ...]) -> None:
    """Three pixel values, 0..255: what AIPP subtracts (its mean_chn and min_chn)."""
    if len(value) != 3:
        _fail(attribute, value, f"one value per channel: 3, got {len(value)}")
    for index, mean in enumerate(value):
        if not (math.isfinite(mean) and 0 <= mean <= 255):
            _fail(attribute, value, f"a mean is a pixel value in 0..255, got {mean}", index)


def channel_stds(_instance: Any, attribute: attrs.Attribute[Any], value: tuple[float, ...]) -> None:
    """Three non-zero numbers whose reciprocal AIPP can hold (its var_reci_chn: at most 65504 in size)."""
    if len(value) != 3:
        _fail(attribute, value, f"one value per channel: 3, got {len(value)}")
    for index, std in enumerate(value):
        if not math.isfinite(std) or abs(std) < 1 / 65504:
            _fail(
                attribute,
                value,
                f"a std is finite and at least 1/65504 in size (AIPP multiplies by 1/std), got {std}",
                index,
            )


def device_ids(_instance: Any, attribute: attrs.Attribute[Any], value: tuple[int, ...]) -> None:
    if not value:
        _fail(attribute, value, "list at least one NPU device id")
    for index, device in enumerate(value):
        if device < 0:
            _fail(attribute, value, f"device ids are >= 0, got {device}", index)
        if device in value[:index]:
            _fail(attribute, value, f"device {device} is listed twice", index)


def atc_options(_instance: Any, attribute: attrs.Attribute[Any], value: dict[str, str]) -> None:
    for flag in value:
        if flag.startswith("-"):
            _fail(attribute, value, f"write ATC flags without the leading dashes: {flag.lstrip('-')!r}", flag)
        if flag in CONTROLLED_ATC_FLAGS:
            _fail(attribute, value, f"--{flag} is set by the spec; use {CONTROLLED_ATC_FLAGS[flag]}", flag)
        if flag in MULTI_DEVICE_ATC_FLAGS:
            _fail(attribute, value, f"--{flag}: {MULTI_DEVICE_ATC_FLAGS[flag]}", flag)
        if not _ATC_FLAG.fullmatch(flag):
            _fail(
                attribute,
                value,
                f"an ATC flag name is lower-case letters, digits and '_', got {flag!r}",
                flag,
            )


def _version_problem(version: int) -> Union[str, None]:
    if not 1 <= version <= MAX_VERSION:
        return (
            f"a version is 1 to {MAX_VERSION}, named by its folder <repo>/<name>/<version>/ (Triton ignores "
            f"folders named 0 or starting with 0), got {version}"
        )
    return None


def version_numbers(_instance: Any, attribute: attrs.Attribute[Any], value: dict[int, Any]) -> None:
    """The keys of ``versions``."""
    for version in value:
        problem = _version_problem(version)
        if problem:
            _fail(attribute, value, problem, version)


def version_list(_instance: Any, attribute: attrs.Attribute[Any], value: tuple[int, ...]) -> None:
    """``version_policy.specific``."""
    if not value:
        _fail(attribute, value, "list at least one version (or use latest: N or all)")
    for index, version in enumerate(value):
        problem = _version_problem(version)
        if problem:
            _fail(attribute, value, problem, index)
        if version in value[:index]:
            _fail(attribute, value, f"version {version} is listed twice", index)


def latest_versions(_instance: Any, attribute: attrs.Attribute[Any], value: int) -> None:
    """``version_policy.latest``: Triton's ``latest.num_versions``."""
    if not 1 <= value <= UINT32_MAX:
        _fail(attribute, value, f"serve the latest 1 to {UINT32_MAX} versions (a 32-bit field), got {value}")


def json_object(_instance: Any, attribute: attrs.Attribute[Any], value: dict[str, Any]) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        _fail(
            attribute,
            value,
            f"acl.json options must be plain JSON values (strings, numbers, lists, maps): {exc}",
        )


def cross_checks(spec: ModelSpec) -> list[Problem]:
    """Every rule that spans fields; written to cope with fields that failed their own checks."""
    if spec.generate is not None:
        return [*_generate(spec), *_device_streams(spec), *_version_policy(spec)]
    return [
        *_tensors_given(spec),
        *_unique_tensor_names(spec),
        *_batch_gear_count(spec),
        *(_image_sizes_fit(spec) if spec.image_sizes else _dims_gears_fit(spec)),
        *_padded_inputs(spec),
        *_ties(spec),
        *_same_as(spec),
        *_integer_ranges(spec),
        *_input_format(spec),
        *_preprocessed(spec),
        *_preferred_batch_sizes(spec),
        *_device_streams(spec),
        *_version_policy(spec),
    ]


def _tensors_given(spec: ModelSpec) -> list[Problem]:
    return [
        ((field,), f"list at least one tensor under {field} (or give a generate: section)")
        for field, tensors in (("inputs", spec.inputs), ("outputs", spec.outputs))
        if not tensors
    ]


def _generate(spec: ModelSpec) -> list[Problem]:
    """A generating model: its Triton tensors and batching are the backend's own (docs/generate.md), and
    its gears must fit the context and ATC's limits."""
    section = spec.generate
    assert section is not None
    problems: list[Problem] = []
    for field, given in (
        ("inputs", spec.inputs),
        ("outputs", spec.outputs),
        ("batching", spec.batching),
        ("dims_gears", spec.dims_gears),
        ("image_sizes", spec.image_sizes),
    ):
        if given:
            problems.append(
                (
                    (field,),
                    "a generate: model takes no " + field + ": its Triton tensors are fixed and the "
                    "backend batches sequences step by step itself (docs/generate.md)",
                )
            )
    where = ("generate",)
    if section.batch_gears and section.batch_gears[0] != 1:
        problems.append(((*where, "batch_gears"), "must start at 1: prefill runs one sequence at a time"))
    if section.seq_gears and section.seq_gears[-1] > section.context:
        problems.append(
            (
                (*where, "seq_gears"),
                f"a prefill chunk of {section.seq_gears[-1]} exceeds the context of {section.context}",
            )
        )
    gears = len(set(section.batch_gears)) + len([s for s in section.seq_gears if s != 1])
    if not MIN_GEARS <= gears <= MAX_GEARS:
        problems.append(
            (
                (*where, "batch_gears"),
                f"ATC's --dynamic_dims takes {MIN_GEARS} to {MAX_GEARS} gears; these make {gears}",
            )
        )
    for index, eos in enumerate(section.eos_ids):
        if not 0 <= eos < section.vocab:
            problems.append(
                ((*where, "eos_ids", index), f"{eos} is not a token id of a vocabulary of {section.vocab}")
            )
    if section.form == "per_layer":
        for key, value in (("past", section.past), ("present", section.present)):
            if "{layer}" not in value or "{kind}" not in value:
                problems.append(
                    (
                        (*where, "tensors", key),
                        f"the per_layer form names one tensor per layer and kind: "
                        f"write a pattern with {{layer}} and {{kind}}, got {value!r}",
                    )
                )
    return problems


def _version_policy(spec: ModelSpec) -> list[Problem]:
    policy = spec.version_policy
    if policy is None or policy.all_versions:
        return []
    where = ("version_policy",)
    if (policy.latest is None) == (policy.specific is None):
        return [(where, "give one of latest: N or specific: [versions], or write version_policy: all")]
    known = spec.version_numbers
    return [
        (
            (*where, "specific", index),
            f"version {version} is not among the spec's versions ({', '.join(map(str, known))}): it would have "
            f"no folder for Triton to load",
        )
        for index, version in enumerate(policy.specific or ())
        if version not in known and version not in (policy.specific or ())[:index]
    ]


def _device_streams(spec: ModelSpec) -> list[Problem]:
    placement = spec.placement
    if not (
        1 <= placement.instances_per_device <= MAX_INSTANCES_PER_DEVICE
        and 1 <= placement.streams_per_instance <= MAX_STREAMS_PER_INSTANCE
    ):
        return []  # the field's own check says what is wrong
    needed = placement.instances_per_device * (placement.streams_per_instance + 1)
    if needed <= DEVICE_STREAMS:
        return []
    return [
        (
            ("placement",),
            f"{placement.instances_per_device} instances x ({placement.streams_per_instance} streams + 1 default "
            f"stream of each instance's context) need {needed} streams on each device; a device has "
            f"{DEVICE_STREAMS} ({DEVICE_STREAMS_WHY})",
        )
    ]


def _preferred_batch_sizes(spec: ModelSpec) -> list[Problem]:
    batching = spec.batching
    if batching is None or batching.preferred_batch_sizes is None:
        return []
    where = ("batching", "preferred_batch_sizes")
    if not batching.preferred_batch_sizes:
        return [(where, "list at least one gear, or leave preferred_batch_sizes out (the largest gear)")]
    return [
        (
            (*where, index),
            f"{size} is not a batch gear; Triton would form batches the OM pads: use one of {_show(batching.gears)}",
        )
        for index, size in enumerate(batching.preferred_batch_sizes)
        if size not in batching.gears
    ]


def _unique_tensor_names(spec: ModelSpec) -> list[Problem]:
    problems: list[Problem] = []
    first: dict[str, str] = {}
    for kind, tensors in (("inputs", spec.inputs), ("outputs", spec.outputs)):
        for index, tensor in enumerate(tensors):
            here = f"$.{kind}[{index}]"
            if tensor.name in first:
                problems.append(
                    (
                        (kind, index, "name"),
                        f"tensor name {tensor.name!r} is already used by {first[tensor.name]}",
                    )
                )
            else:
                first[tensor.name] = here
    return problems


def _batch_gear_count(spec: ModelSpec) -> list[Problem]:
    """2 to 100 batch gears (ATC's --dynamic_batch_size), or with image sizes exactly one: the OM's fixed
    batch, since ATC takes no batch gears beside --dynamic_image_size."""
    if spec.batching is None:
        return []
    gears = spec.batching.gears
    where = ("batching", "gears")
    if spec.image_sizes:
        if len(gears) == 1:
            return []
        return [
            (
                where,
                f"{_ONE_DYNAMIC_MODE}: with image_sizes an OM has one batch size, so list one gear, the OM's "
                f"fixed batch (--input_shape=NAME:{gears[-1]},3,-1,-1), or give height and width as dims_gears "
                "(--dynamic_dims, which takes batch gears), got "
                f"{_show(gears)}",
            )
        ]
    if not MIN_GEARS <= len(gears) <= MAX_GEARS:
        return [(where, f"ATC takes {MIN_GEARS} to {MAX_GEARS} batch gears, got {len(gears)}")]
    return []


def _image_sizes_fit(spec: ModelSpec) -> list[Problem]:
    """ATC's --dynamic_image_size rules: not with --dynamic_dims, and only H and W of NCHW inputs at -1."""
    problems: list[Problem] = []
    if spec.dims_gears:
        problems.append(
            (
                ("dims_gears",),
                f"{_ONE_DYNAMIC_MODE}: give an image's height and width as image_sizes or every -1 dim as "
                "dims_gears, not both",
            )
        )
    extra = 1 if spec.batching is not None else 0
    marked = False
    for index, tensor in enumerate(spec.inputs):
        full = (-1,) * extra + tensor.dims
        dynamic = [d for d, dim in enumerate(full) if dim == -1 and d >= extra]
        marked = marked or bool(dynamic)
        if dynamic and (len(full) != 4 or dynamic != [2, 3]):
            shown = f"[batch, {', '.join(map(str, tensor.dims))}]" if extra else _show(tensor.dims)
            problems.append(
                (
                    ("inputs", index, "dims"),
                    "ATC: when --dynamic_image_size is included, only the height and width axes can be -1 in "
                    f"--input_shape (E10019): an NCHW input with -1 in H and W, got {tensor.name} {shown}",
                )
            )
    if not marked:
        problems.append(
            (
                ("image_sizes",),
                "no input has -1 height and width (dims [3, -1, -1] when batching, [1, 3, -1, -1] when not), so "
                "there is nothing for image_sizes to set",
            )
        )
    return problems


def _padded_inputs(spec: ModelSpec) -> list[Problem]:
    """``pad: true`` only where a gear sets a dim: batch rows are padded anyway, fixed dims never."""
    return [
        (
            ("inputs", index, "pad"),
            f"{tensor.name} has no -1 dim, so there is nothing to pad (batch rows are always padded up to a "
            "batch gear)",
        )
        for index, tensor in enumerate(spec.inputs)
        if tensor.pad and -1 not in tensor.dims
    ]


def _dims_gears_fit(spec: ModelSpec) -> list[Problem]:
    slots = spec.dynamic_dims
    if not spec.dims_gears:
        return [
            (
                ("inputs", i, "dims", d),
                "a -1 dim needs dims_gears: ATC compiles one gear per value it can take",
            )
            for i, d in slots
        ]
    if not slots:
        return [(("dims_gears",), "no input has a -1 dim, so there is nothing for dims_gears to set")]
    return [*_dims_gear_widths(spec, slots), *_atc_gear_count(spec)]


def _dims_gear_widths(spec: ModelSpec, slots: Sequence[tuple[int, int]]) -> list[Problem]:
    """Each dims gear lists one value per -1 input dim; one problem when every gear is off, else one each."""
    named = ", ".join(f"{spec.inputs[i].name} dims[{d}]" for i, d in slots)
    wrong = {
        i: len(gear)
        for i, gear in enumerate(spec.dims_gears)
        if not isinstance(gear, int) and len(gear) != len(slots)
    }
    expected = f"each gear lists one value per -1 input dim ({len(slots)}: {named})"
    if wrong and len(wrong) == len(spec.dims_gears):
        sizes = sorted(set(wrong.values()))
        return [(("dims_gears",), f"{expected}, but the gears list {' or '.join(map(str, sizes))}")]
    return [(("dims_gears", i), f"{expected}, got {size}") for i, size in wrong.items()]


def _atc_gear_count(spec: ModelSpec) -> list[Problem]:
    """Batch gears x dims gears are the ATC gears (one --dynamic_dims): MIN_GEARS to MAX_GEARS of them."""
    problems: list[Problem] = []
    batch = len(spec.batching.gears) if spec.batching is not None else 1
    total = batch * len(spec.dims_gears)
    if spec.batching is not None and total > MAX_GEARS:
        problems.append(
            (
                ("dims_gears",),
                f"{batch} batch gears x {len(spec.dims_gears)} dims gears make {total} ATC gears "
                f"(ATC has one dynamic mode per model, so batch and dims share --dynamic_dims); "
                f"ATC allows at most {MAX_GEARS}",
            )
        )
    if total < MIN_GEARS:
        problems.append((("dims_gears",), f"ATC takes {MIN_GEARS} to {MAX_GEARS} gears, got {total}"))
    return problems


def _ties(spec: ModelSpec) -> list[Problem]:
    problems: list[Problem] = []
    inputs = {tensor.name: tensor for tensor in spec.inputs}
    for index, output in enumerate(spec.outputs):
        for dim, ref in output.follows.items():
            where = ("outputs", index, "follows", dim)
            if not 0 <= dim < len(output.dims):
                problems.append(
                    (where, f"{output.name} has dims {_show(output.dims)}: there is no dim {dim}")
                )
            elif output.dims[dim] != -1:
                problems.append(
                    (
                        where,
                        f"{output.name} dims[{dim}] is {output.dims[dim]}; only a -1 dim can follow an input",
                    )
                )
            source = inputs.get(ref.input)
            if source is None:
                names = ", ".join(repr(t.name) for t in spec.inputs)
                problems.append((where, f"no input named {ref.input!r}; the inputs are {names}"))
            elif not 0 <= ref.dim < len(source.dims):
                problems.append(
                    (where, f"{source.name} has dims {_show(source.dims)}: there is no dim {ref.dim}")
                )
            elif source.dims[ref.dim] != -1:
                problems.append(
                    (
                        where,
                        f"{source.name} dims[{ref.dim}] is {source.dims[ref.dim]}; an output can only follow a -1 "
                        f"input dim",
                    )
                )
    return problems


def _integer_ranges(spec: ModelSpec) -> list[Problem]:
    return [
        (("inputs", index, "range", k), f"{tensor.dtype} holds integers, so its range does too: got {bound}")
        for index, tensor in enumerate(spec.inputs)
        if tensor.range is not None and not tensor.dtype.is_float
        for k, bound in enumerate(tensor.range)
        if isinstance(bound, (int, float)) and not float(bound).is_integer()
    ]


def _same_as(spec: ModelSpec) -> list[Problem]:
    problems: list[Problem] = []
    inputs = {tensor.name: tensor for tensor in spec.inputs}
    for index, tensor in enumerate(spec.inputs):
        if tensor.same_as is None:
            continue
        where = ("inputs", index, "same_as")
        other = inputs.get(tensor.same_as)
        if tensor.same_as == tensor.name:
            problems.append((where, "an input cannot be tied to itself; name another input"))
        elif other is None:
            names = ", ".join(repr(t.name) for t in spec.inputs if t.name != tensor.name)
            problems.append(
                (where, f"no input named {tensor.same_as!r}; the other inputs are {names or 'none'}")
            )
        elif len(other.dims) != len(tensor.dims) or any(
            a > 0 and b > 0 and a != b for a, b in zip(tensor.dims, other.dims)
        ):
            problems.append(
                (
                    where,
                    f"{tensor.name} dims {_show(tensor.dims)} and {other.name} dims {_show(other.dims)} can never "
                    "be the same shape",
                )
            )
    return problems


#: VPC writes the resized image straight into the model's input: its width stride (the input's width) is a
#: multiple of 16 and its height stride even; VPC writes 32 to 4096 pixels a side on every DVPP
VPC_WIDTH_ALIGN = 16
VPC_SIDES = (32, 4096)


def _preprocessed(spec: ModelSpec) -> list[Problem]:
    """An input with ``preprocess`` is one the OM's AIPP feeds from the images DVPP writes: [3, H, W] floats
    of a fixed size VPC can write, the only such input, not padded, ranged or tied."""
    problems: list[Problem] = []
    marked = [index for index, tensor in enumerate(spec.inputs) if tensor.preprocess is not None]
    for index in marked[1:]:
        problems.append(
            (
                ("inputs", index, "preprocess"),
                f"only one input may take images; {spec.inputs[marked[0]].name} does",
            )
        )
    for index in marked[:1]:
        tensor = spec.inputs[index]
        where = ("inputs", index)
        dims = tensor.dims
        if not tensor.dtype.is_float:
            problems.append(
                ((*where, "dtype"), f"the OM's AIPP feeds a float input; {tensor.name} is {tensor.dtype}")
            )
        if len(dims) != 3 or dims[0] != 3 or dims[1] <= 0 or dims[2] <= 0:
            problems.append(
                (
                    (*where, "dims"),
                    f"an input that takes images is [3, HEIGHT, WIDTH] (channels first, a fixed size), got {_show(dims)}",
                )
            )
        else:
            height, width = dims[1], dims[2]
            low, high = VPC_SIDES
            if width % VPC_WIDTH_ALIGN or height % 2 or not (low <= height <= high and low <= width <= high):
                problems.append(
                    (
                        (*where, "dims"),
                        f"DVPP's VPC writes each image into the input at {height}x{width}: its width must be a "
                        f"multiple of {VPC_WIDTH_ALIGN}, its height even, both within {low}..{high}",
                    )
                )
        for field, given in (("pad", tensor.pad), ("range", tensor.range), ("same_as", tensor.same_as)):
            if given:
                problems.append(
                    ((*where, field), f"an input that takes images has no {field}: its values are pixels")
                )
        if spec.image_sizes or spec.dims_gears:
            field = "image_sizes" if spec.image_sizes else "dims_gears"
            problems.append(
                (
                    (field,),
                    f"{tensor.name} takes images resized to one size: the OM's AIPP is compiled for it, with batch "
                    "gears or none (not image-size or dims gears)",
                )
            )
    return problems


def _input_format(spec: ModelSpec) -> list[Problem]:
    given = spec.atc_options.get("input_format")
    if spec.image_sizes and given is not None and given != "NCHW":
        return [
            (
                ("atc_options", "input_format"),
                f"a model with image_sizes is compiled with --dynamic_image_size, which needs NCHW inputs, "
                f"got {given!r}",
            )
        ]
    if spec.dims_gears and given is not None and given != "ND":
        return [
            (
                ("atc_options", "input_format"),
                f"a model with dims_gears is compiled with --dynamic_dims, which needs --input_format=ND, "
                f"got {given!r}",
            )
        ]
    return []
