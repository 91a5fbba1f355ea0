"""The ``parameters`` of a ``backend: "ge"`` config.pbtxt: their names, encodings and defaults.

This is the contract between the renderer (which writes them from a spec) and the backend (which reads them
from the config Triton hands to ``initialize``), so that a hand-written config.pbtxt works with no spec at
all. Config parameters are strings; every key is documented in docs/config.md. Keys that mean the same as in
CANN's GE backend keep its names (``device_ids``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

import attrs

from ge_plugin.errors import ConfigError, GearTextError
from ge_plugin.gears import format_values, parse_values
from ge_plugin.precision import PRECISIONS


@attrs.frozen
class DimTie:
    """Output ``output`` dim ``output_dim`` has the length of input ``input`` dim ``input_dim``.

    Dims are counted as in config.pbtxt ``dims``: without the batch dim when max_batch_size > 0. The engine
    uses ties to trim an output back to each request's own length after padding to a sequence gear.
    """

    output: str
    output_dim: int
    input: str
    input_dim: int

    def encode(self) -> str:
        return f"{self.output}:{self.output_dim}={self.input}:{self.input_dim}"


@attrs.frozen
class InputRange:
    """Input ``input`` accepts only values in [low, high] (ints for integer inputs): token ids within the
    vocabulary, a mask of 0 and 1. Checked per request before the device sees it."""

    input: str
    low: float
    high: float

    def encode(self) -> str:
        return f"{self.input}={_format_number(self.low)}:{_format_number(self.high)}"


@attrs.frozen
class ShapeTie:
    """Input ``input`` must come with the same shape as input ``other`` (a mask and its ids)."""

    input: str
    other: str

    def encode(self) -> str:
        return f"{self.input}={self.other}"


#: what a preprocessed input's requests may carry: JPEGs (decoded by DVPP's JPEGD)
IMAGE_FORMATS = ("jpeg",)
#: how a request carries its encoded images -> the Triton tensor the input is (data type, dims without the
#: batch dim): the bytes of one image per row (ragged when batched), or one BYTES element per image
REQUEST_TENSORS = {"uint8": ("TYPE_UINT8", (-1,)), "bytes": ("TYPE_STRING", (1,))}
#: how a decoded image becomes the model's height x width: stretched, or scaled to fit with its aspect kept
RESIZES = ("stretch", "letterbox")
#: the bounds of ``max_bytes`` and ``max_side`` (JPEGD decodes 32 to 8192 pixels a side)
MAX_IMAGE_BYTES = 64 << 20
IMAGE_SIDES = (32, 8192)


@attrs.frozen
class Preprocessing:
    """Input ``input`` carries encoded images: the backend decodes and resizes them with DVPP into the OM's
    AIPP input (docs/spec.md ``preprocess``). ``max_bytes`` and ``max_side`` bound one image (and size the
    memory each lane allocates once for them)."""

    input: str
    format: str = "jpeg"
    request: str = "uint8"
    resize: str = "stretch"
    max_bytes: int = 4 << 20
    max_side: int = 4096

    @property
    def triton_tensor(self) -> tuple[str, tuple[int, ...]]:
        """The input's Triton data type and dims (without the batch dim)."""
        return REQUEST_TENSORS[self.request]

    def encode(self) -> str:
        return json.dumps(attrs.asdict(self), sort_keys=True, separators=(",", ":"))


def _json_object(text: str, expected: str) -> dict[str, Any]:
    """``text`` as a JSON object; ConfigError ``expected`` (which says what the parameter takes) otherwise."""
    try:
        value = json.loads(text)
    except ValueError:
        raise ConfigError(expected) from None
    if not isinstance(value, dict):
        raise ConfigError(expected)
    return value


def _preprocessing(key: str, text: str) -> Preprocessing:
    """``{"input":"images","format":"jpeg",...}`` -> Preprocessing; every field checked, none unknown."""
    expected = (
        f"parameters.{key}: expected a JSON object such as "
        '{"input":"images","format":"jpeg","request":"uint8","resize":"stretch","max_bytes":4194304,'
        f'"max_side":4096}}, got {text!r}'
    )
    raw = _json_object(text, expected)
    fields = {f.name: f for f in attrs.fields(Preprocessing)}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise ConfigError(
            f"parameters.{key}: unknown field(s) {', '.join(unknown)}; the fields are {', '.join(fields)}"
        )
    name = raw.get("input")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(
            f"parameters.{key}: input must name the input that carries the images, got {name!r}"
        )
    choices = {"format": IMAGE_FORMATS, "request": tuple(REQUEST_TENSORS), "resize": RESIZES}
    for field, allowed in choices.items():
        if field in raw and raw[field] not in allowed:
            raise ConfigError(
                f"parameters.{key}: {field} must be one of {', '.join(allowed)}, got {raw[field]!r}"
            )
    bounds = {"max_bytes": (1, MAX_IMAGE_BYTES), "max_side": IMAGE_SIDES}
    for field, (low, high) in bounds.items():
        value = raw.get(field, fields[field].default)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(f"parameters.{key}: {field} must be an integer in {low}..{high}, got {value!r}")
    return Preprocessing(**raw)


def _string_value(key: str, value: object) -> str:
    if isinstance(value, Mapping):
        value = value.get("string_value", "")
    if not isinstance(value, str):
        raise ConfigError(f"parameters.{key}: expected a string value, got {value!r}")
    return value


def _int_list(key: str, text: str, *, minimum: int, whole: str | None = None) -> tuple[int, ...]:
    """Comma-separated integers >= ``minimum`` (``whole``: the full value, when ``text`` is part of it)."""
    shown = whole if whole is not None else text
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ConfigError(f"parameters.{key}: expected comma-separated integers, got {shown!r}") from None
    _check_minimum(key, values, minimum, shown)
    return values


def _int(key: str, text: str, *, minimum: int) -> int:
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ConfigError(f"parameters.{key}: expected an integer, got {text!r}") from None
    if len(values) != 1:
        raise ConfigError(f"parameters.{key}: expected one integer, got {text!r}")
    _check_minimum(key, values, minimum, text)
    return values[0]


def _check_minimum(key: str, values: tuple[int, ...], minimum: int, shown: str) -> None:
    bad = [v for v in values if v < minimum]
    if bad:
        raise ConfigError(f"parameters.{key}: values must be >= {minimum}, got {bad[0]} in {shown!r}")


def _device_ids(key: str, text: str) -> tuple[int, ...]:
    ids = _int_list(key, text, minimum=0)
    if len(set(ids)) != len(ids):
        raise ConfigError(f"parameters.{key}: device ids must be unique, got {text!r}")
    return ids


#: a config's gear text's faults (``GearTextError.problem``), in the config's words
_GEAR_WORDS = {
    "below_one": "values must be >= 1, got {value} in {text!r}",
    "not_pairs": "expected HEIGHT,WIDTH pairs separated by ';' (e.g. 224,224;448,448), got {text!r}",
    "widths": "every gear must list the same number of dims, got {text!r}",
}


def _gears(kind: str) -> Callable[[str, str], tuple[tuple[int, ...], ...]]:
    """A reader of gears in ATC's text (``ge_plugin.gears.parse_values``): ``1,4,8`` (batch), ``16,16;32,32``
    (dims: per gear, comma-separated dims, every gear as many), ``224,224;448,448`` (height, width)."""

    def read(key: str, text: str) -> tuple[tuple[int, ...], ...]:
        try:
            return parse_values(text, kind=kind)
        except GearTextError as exc:
            wrong = exc.said(_GEAR_WORDS, "expected comma-separated integers, got {text!r}")
            raise ConfigError(f"parameters.{key}: {wrong}") from None

    return read


def _batch_gears(key: str, text: str) -> tuple[int, ...]:
    """``1,4,8``: the batch gears."""
    return tuple(gear[0] for gear in _gears("batch")(key, text))


def _image_sizes(key: str, text: str) -> tuple[tuple[int, int], ...]:
    """``224,224;448,448``: per gear, height and width."""
    return tuple((h, w) for h, w in _gears("hw")(key, text))


def _pad_inputs(key: str, text: str) -> tuple[str, ...]:
    """``input_ids,attention_mask``: input names, each once."""
    names = tuple(part.strip() for part in text.split(","))
    if not all(names):
        raise ConfigError(f"parameters.{key}: expected comma-separated input names, got {text!r}")
    if len(set(names)) != len(names):
        raise ConfigError(f"parameters.{key}: an input is listed twice in {text!r}")
    return names


def _pad_value(key: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"parameters.{key}: expected a number, got {text!r}") from None


def _precision(key: str, text: str) -> str:
    if text not in PRECISIONS:
        raise ConfigError(f"parameters.{key}: expected one of {', '.join(PRECISIONS)}, got {text!r}")
    return text


def _acl_json(key: str, text: str) -> str:
    try:
        if not isinstance(json.loads(text), dict):
            raise ValueError("not an object")
    except ValueError as exc:
        raise ConfigError(f"parameters.{key}: expected a JSON object, got {text!r} ({exc})") from None
    return text


class _Encodable(Protocol):
    def encode(self) -> str: ...


class _OfInput(Protocol):
    @property
    def input(self) -> str: ...


_Item = TypeVar("_Item", bound=_OfInput)


def _items(parse: Callable[[str, str], _Item], *, unique: bool) -> Callable[[str, str], tuple[_Item, ...]]:
    """A reader of ``;``-separated items; ``unique``: no input may be listed twice."""

    def read(key: str, text: str) -> tuple[_Item, ...]:
        items = tuple(parse(key, part) for part in text.split(";"))
        names = [item.input for item in items]
        if unique and len(set(names)) != len(names):
            raise ConfigError(f"parameters.{key}: an input is listed twice in {text!r}")
        return items

    return read


def _dim_tie(key: str, text: str) -> DimTie:
    """``logits:0=input_ids:0`` -> DimTie."""
    try:
        out, inp = text.split("=")
        out_name, out_dim = out.rsplit(":", 1)
        in_name, in_dim = inp.rsplit(":", 1)
        tie = DimTie(out_name.strip(), int(out_dim), in_name.strip(), int(in_dim))
    except ValueError:
        raise ConfigError(
            f"parameters.{key}: expected OUTPUT:DIM=INPUT:DIM (e.g. logits:0=input_ids:0), got {text!r}"
        ) from None
    if tie.output_dim < 0 or tie.input_dim < 0 or not tie.output or not tie.input:
        raise ConfigError(f"parameters.{key}: names must be non-empty and dims >= 0, got {text!r}")
    return tie


def _input_range(key: str, text: str) -> InputRange:
    """``input_ids=0:31999`` -> InputRange; integers stay integers, so int64 bounds are exact."""
    try:
        name, bounds = text.split("=")
        low_text, high_text = bounds.split(":")
        low, high = _bound(low_text), _bound(high_text)
    except ValueError:
        raise ConfigError(
            f"parameters.{key}: expected INPUT=LOW:HIGH (e.g. input_ids=0:31999), got {text!r}"
        ) from None
    if not name.strip():
        raise ConfigError(f"parameters.{key}: the input name is empty in {text!r}")
    if not low <= high:
        raise ConfigError(f"parameters.{key}: low {low} is above high {high} in {text!r}")
    return InputRange(name.strip(), low, high)


def _bound(text: str) -> float:
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        value = float(text)
        if value != value:
            raise ValueError("NaN") from None
        return value


def _shape_tie(key: str, text: str) -> ShapeTie:
    """``attention_mask=input_ids`` -> ShapeTie."""
    try:
        name, other = (part.strip() for part in text.split("="))
    except ValueError:
        raise ConfigError(
            f"parameters.{key}: expected INPUT=OTHER_INPUT (e.g. attention_mask=input_ids), got {text!r}"
        ) from None
    if not name or not other or name == other:
        raise ConfigError(f"parameters.{key}: two different input names are needed, got {text!r}")
    return ShapeTie(name, other)


def _version_paths(key: str, text: str) -> tuple[tuple[int, str], ...]:
    """``{"2":"llama_v2.om"}`` -> ((2, "llama_v2.om"),)."""
    expected = (
        f"parameters.{key}: expected a JSON object of version -> OM path, e.g. "
        f'{{"2":"llama_v2.om"}}, got {text!r}'
    )
    mapping = _json_object(text, expected)
    out = []
    for version, path in mapping.items():
        # str.isdigit() is also true of "²" and other digits int() refuses or reads as another number
        number = version.isascii() and version.isdigit() and not version.startswith("0")
        if not number or not isinstance(path, str) or not path.strip():
            raise ConfigError(f"{expected} ({version!r}: {path!r} is not a version >= 1 and a path)")
        out.append((int(version), path.strip()))
    return tuple(sorted(out))


def _format_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _om_model_path(key: str, text: str) -> str:
    if not text.strip():
        raise ConfigError(f"parameters.{key} is required: the path of the .om file to serve")
    return text.strip()


def _ints(values: Iterable[int]) -> str:
    return ",".join(str(v) for v in values)


def _encoded(items: Iterable[_Encodable]) -> str:
    return ";".join(item.encode() for item in items)


def _encode_version_paths(paths: tuple[tuple[int, str], ...]) -> str:
    return json.dumps({str(v): path for v, path in paths}, separators=(",", ":"))


#: field metadata key of a parameter's _Param
_PARAM = "ge_plugin.param"


@attrs.frozen
class _Param:
    """One parameter: its parser (``parse(key, text)``, raising ConfigError with the key and what was
    expected), its encoder, and whether an empty value means "not set" (else it is parsed, and refused, like
    any other)."""

    parse: Callable[[str, str], Any]
    encode: Callable[[Any], str]
    blank_is_unset: bool = True


def _param(
    parse: Callable[[str, str], Any],
    encode: Callable[[Any], str],
    *,
    default: Any = attrs.NOTHING,
    blank_is_unset: bool = True,
) -> Any:
    """A ModelParams field that is the config parameter of its name."""
    return attrs.field(default=default, metadata={_PARAM: _Param(parse, encode, blank_is_unset)})


@attrs.frozen
class ModelParams:
    """Typed view of the ``ge`` parameters of one model: each field is the parameter of its name, declared
    with its parser and encoder, in the order they are checked."""

    om_model_path: str = _param(_om_model_path, str, blank_is_unset=False)
    device_ids: tuple[int, ...] = _param(_device_ids, _ints, default=(0,), blank_is_unset=False)
    #: The OM's gears as a spec says them (``ge_plugin.gears``, ``ServingConfig.declared_gears``), each in
    #: ATC's text; when any is set, the backend compares them with the OM's.
    #: batch gears (ATC --dynamic_batch_size, or the batch dims of --dynamic_dims; beside image sizes the
    #: OM's one fixed batch); empty for a model without dynamic batch
    gears: tuple[int, ...] = _param(_batch_gears, _ints, default=())
    #: sequence gears: per gear, the values of every -1 dim of every input, in order (ATC --dynamic_dims
    #: without the batch dim)
    dims_gears: tuple[tuple[int, ...], ...] = _param(
        _gears("dims"), functools.partial(format_values, kind="dims"), default=()
    )
    #: image-size gears (ATC --dynamic_image_size), (height, width) each
    image_sizes: tuple[tuple[int, int], ...] = _param(
        _image_sizes, functools.partial(format_values, kind="hw"), default=()
    )
    output_dim_ties: tuple[DimTie, ...] = _param(_items(_dim_tie, unique=False), _encoded, default=())
    #: inputs a request may send shorter than a gear along a dim the gears set (padded with pad_value); every
    #: other input must match a gear exactly there. Batch rows are padded whatever this says.
    pad_inputs: tuple[str, ...] = _param(_pad_inputs, ",".join, default=())
    pad_value: float = _param(_pad_value, _format_number, default=0.0, blank_is_unset=False)
    #: the precision the OM was built with, as the config declares it; None: not declared (the engine
    #: warns when the OM computes in reduced precision), else checked against the OM where it can tell
    precision: str | None = _param(_precision, str, default=None, blank_is_unset=False)
    input_ranges: tuple[InputRange, ...] = _param(_items(_input_range, unique=True), _encoded, default=())
    same_shape: tuple[ShapeTie, ...] = _param(_items(_shape_tie, unique=True), _encoded, default=())
    streams_per_instance: int = _param(
        functools.partial(_int, minimum=1), str, default=1, blank_is_unset=False
    )
    #: executes per gear at start-up, so that the first real request does not pay for first-run costs
    warmup: int = _param(functools.partial(_int, minimum=0), str, default=1, blank_is_unset=False)
    #: how often the backend flushes its custom metrics to Triton
    metrics_interval_ms: int = _param(
        functools.partial(_int, minimum=1), str, default=1000, blank_is_unset=False
    )
    #: acl.init configuration as inline JSON ("" = defaults)
    acl_json: str = _param(_acl_json, str, default="")
    #: the generation engine's configuration as inline JSON ("" = a forward-pass model); docs/generate.md
    generate: str = _param(_acl_json, str, default="")
    #: the input whose requests carry encoded images, decoded and resized with DVPP (None: no such input)
    preprocess: Preprocessing | None = _param(_preprocessing, Preprocessing.encode, default=None)  # noqa: RUF009
    #: (version, OM path) for the versions whose OM is not ``om_model_path``; relative to their own folder
    version_om_model_paths: tuple[tuple[int, str], ...] = _param(
        _version_paths, _encode_version_paths, default=()
    )

    def om_model_path_for(self, version: str) -> str:
        """The OM of Triton version ``version`` (a version folder's name): its own path or ``om_model_path``."""
        for number, path in self.version_om_model_paths:
            if str(number) == version:
                return path
        return self.om_model_path

    def to_parameters(self) -> dict[str, str]:
        """The config.pbtxt ``parameters``, as strings, defaults included, in a stable order; a parameter
        that is not set (None, empty) is left out."""
        out = {}
        for field in attrs.fields(ModelParams):
            value = getattr(self, field.name)
            if value is not None and value != () and value != "":
                out[field.name] = field.metadata[_PARAM].encode(value)
        return dict(sorted(out.items()))

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, object]) -> ModelParams:
        """Parse config ``parameters``.

        Accepts both plain strings and the ``{"string_value": ...}`` form of the model-config JSON that
        Triton passes to ``initialize``. Unknown keys are ignored (other tools put their own keys there);
        every malformed value raises ConfigError naming the key and what was expected.
        """
        raw = {key: _string_value(key, value) for key, value in parameters.items()}
        raw.setdefault("om_model_path", "")
        kwargs: dict[str, Any] = {}
        for field in attrs.fields(ModelParams):
            param: _Param = field.metadata[_PARAM]
            text = raw.get(field.name)
            if text is not None and (text.strip() or not param.blank_is_unset):
                kwargs[field.name] = param.parse(field.name, text)
        return cls(**kwargs)


#: every parameter's key, in the order they are checked
KEYS = tuple(field.name for field in attrs.fields(ModelParams))
