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

from ge_plugin.errors import ConfigError
from ge_plugin.precision import PRECISIONS

OM_MODEL_PATH = "om_model_path"
DEVICE_IDS = "device_ids"
GEARS = "gears"
DIMS_GEARS = "dims_gears"
IMAGE_SIZES = "image_sizes"
PAD_INPUTS = "pad_inputs"
OUTPUT_DIM_TIES = "output_dim_ties"
PAD_VALUE = "pad_value"
PRECISION = "precision"
STREAMS_PER_INSTANCE = "streams_per_instance"
ACL_JSON = "acl_json"
WARMUP = "warmup"
METRICS_INTERVAL_MS = "metrics_interval_ms"
INPUT_RANGES = "input_ranges"
SAME_SHAPE = "same_shape"
VERSION_OM_MODEL_PATHS = "version_om_model_paths"


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


@attrs.frozen
class ModelParams:
    """Typed view of the ``ge`` parameters of one model."""

    om_model_path: str
    device_ids: tuple[int, ...] = (0,)
    #: batch gears (ATC --dynamic_batch_size); empty for a model without dynamic batch
    gears: tuple[int, ...] = ()
    #: sequence gears: per gear, the values of every -1 dim of every input, in order (ATC --dynamic_dims
    #: without the batch dim)
    dims_gears: tuple[tuple[int, ...], ...] = ()
    #: image-size gears (ATC --dynamic_image_size), (height, width) each; checked against the OM's
    image_sizes: tuple[tuple[int, int], ...] = ()
    output_dim_ties: tuple[DimTie, ...] = ()
    #: inputs a request may send shorter than a gear along a dim the gears set (padded with pad_value); every
    #: other input must match a gear exactly there. Batch rows are padded whatever this says.
    pad_inputs: tuple[str, ...] = ()
    pad_value: float = 0.0
    #: the precision the OM was built with, as the config declares it; None: not declared (the engine
    #: warns when the OM computes in reduced precision), else checked against the OM where it can tell
    precision: str | None = None
    streams_per_instance: int = 1
    #: acl.init configuration as inline JSON ("" = defaults)
    acl_json: str = ""
    #: executes per gear at start-up, so that the first real request does not pay for first-run costs
    warmup: int = 1
    #: how often the backend flushes its custom metrics to Triton
    metrics_interval_ms: int = 1000
    input_ranges: tuple[InputRange, ...] = ()
    same_shape: tuple[ShapeTie, ...] = ()
    #: (version, OM path) for the versions whose OM is not ``om_model_path``; relative to their own folder
    version_om_model_paths: tuple[tuple[int, str], ...] = ()

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
        for key, param in _PARAMS.items():
            value = getattr(self, key)
            if value is not None and value != () and value != "":
                out[key] = param.encode(value)
        return dict(sorted(out.items()))

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, object]) -> ModelParams:
        """Parse config ``parameters``.

        Accepts both plain strings and the ``{"string_value": ...}`` form of the model-config JSON that
        Triton passes to ``initialize``. Unknown keys are ignored (other tools put their own keys there);
        every malformed value raises ConfigError naming the key and what was expected.
        """
        raw = {key: _string_value(key, value) for key, value in parameters.items()}
        raw.setdefault(OM_MODEL_PATH, "")
        kwargs: dict[str, Any] = {}
        for key, param in _PARAMS.items():
            text = raw.get(key)
            if text is not None and (text.strip() or not param.blank_is_unset):
                kwargs[key] = param.parse(text)
        return cls(**kwargs)


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


def _device_ids(text: str) -> tuple[int, ...]:
    ids = _int_list(DEVICE_IDS, text, minimum=0)
    if len(set(ids)) != len(ids):
        raise ConfigError(f"parameters.{DEVICE_IDS}: device ids must be unique, got {text!r}")
    return ids


def _dims_gears(text: str) -> tuple[tuple[int, ...], ...]:
    """``1,16;1,32``: per gear, comma-separated dims; every gear lists as many."""
    gears = tuple(_int_list(DIMS_GEARS, part, minimum=1, whole=text) for part in text.split(";"))
    if len({len(g) for g in gears}) != 1:
        raise ConfigError(
            f"parameters.{DIMS_GEARS}: every gear must list the same number of dims, got {text!r}"
        )
    return gears


def _image_sizes(text: str) -> tuple[tuple[int, int], ...]:
    """``224,224;448,448``: per gear, height and width."""
    sizes = tuple(_int_list(IMAGE_SIZES, part, minimum=1, whole=text) for part in text.split(";"))
    if any(len(size) != 2 for size in sizes):
        raise ConfigError(
            f"parameters.{IMAGE_SIZES}: expected HEIGHT,WIDTH pairs separated by ';' (e.g. 224,224;448,448), "
            f"got {text!r}"
        )
    return tuple((h, w) for h, w in sizes)


def _pad_inputs(text: str) -> tuple[str, ...]:
    """``input_ids,attention_mask``: input names, each once."""
    names = tuple(part.strip() for part in text.split(","))
    if not all(names):
        raise ConfigError(f"parameters.{PAD_INPUTS}: expected comma-separated input names, got {text!r}")
    if len(set(names)) != len(names):
        raise ConfigError(f"parameters.{PAD_INPUTS}: an input is listed twice in {text!r}")
    return names


def _pad_value(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"parameters.{PAD_VALUE}: expected a number, got {text!r}") from None


def _precision(text: str) -> str:
    if text not in PRECISIONS:
        raise ConfigError(f"parameters.{PRECISION}: expected one of {', '.join(PRECISIONS)}, got {text!r}")
    return text


def _acl_json(text: str) -> str:
    try:
        if not isinstance(json.loads(text), dict):
            raise ValueError("not an object")
    except ValueError as exc:
        raise ConfigError(f"parameters.{ACL_JSON}: expected a JSON object, got {text!r} ({exc})") from None
    return text


class _Encodable(Protocol):
    def encode(self) -> str: ...


class _OfInput(Protocol):
    @property
    def input(self) -> str: ...


_Item = TypeVar("_Item", bound=_OfInput)


def _items(key: str, parse: Callable[[str], _Item], *, unique: bool) -> Callable[[str], tuple[_Item, ...]]:
    """A reader of ``;``-separated items; ``unique``: no input may be listed twice."""

    def read(text: str) -> tuple[_Item, ...]:
        items = tuple(parse(part) for part in text.split(";"))
        names = [item.input for item in items]
        if unique and len(set(names)) != len(names):
            raise ConfigError(f"parameters.{key}: an input is listed twice in {text!r}")
        return items

    return read


def _dim_tie(text: str) -> DimTie:
    """``logits:0=input_ids:0`` -> DimTie."""
    try:
        out, inp = text.split("=")
        out_name, out_dim = out.rsplit(":", 1)
        in_name, in_dim = inp.rsplit(":", 1)
        tie = DimTie(out_name.strip(), int(out_dim), in_name.strip(), int(in_dim))
    except ValueError:
        raise ConfigError(
            f"parameters.{OUTPUT_DIM_TIES}: expected OUTPUT:DIM=INPUT:DIM (e.g. logits:0=input_ids:0), got {text!r}"
        ) from None
    if tie.output_dim < 0 or tie.input_dim < 0 or not tie.output or not tie.input:
        raise ConfigError(
            f"parameters.{OUTPUT_DIM_TIES}: names must be non-empty and dims >= 0, got {text!r}"
        )
    return tie


def _input_range(text: str) -> InputRange:
    """``input_ids=0:31999`` -> InputRange; integers stay integers, so int64 bounds are exact."""
    try:
        name, bounds = text.split("=")
        low_text, high_text = bounds.split(":")
        low, high = _bound(low_text), _bound(high_text)
    except ValueError:
        raise ConfigError(
            f"parameters.{INPUT_RANGES}: expected INPUT=LOW:HIGH (e.g. input_ids=0:31999), got {text!r}"
        ) from None
    if not name.strip():
        raise ConfigError(f"parameters.{INPUT_RANGES}: the input name is empty in {text!r}")
    if not low <= high:
        raise ConfigError(f"parameters.{INPUT_RANGES}: low {low} is above high {high} in {text!r}")
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


def _shape_tie(text: str) -> ShapeTie:
    """``attention_mask=input_ids`` -> ShapeTie."""
    try:
        name, other = (part.strip() for part in text.split("="))
    except ValueError:
        raise ConfigError(
            f"parameters.{SAME_SHAPE}: expected INPUT=OTHER_INPUT (e.g. attention_mask=input_ids), got {text!r}"
        ) from None
    if not name or not other or name == other:
        raise ConfigError(f"parameters.{SAME_SHAPE}: two different input names are needed, got {text!r}")
    return ShapeTie(name, other)


def _version_paths(text: str) -> tuple[tuple[int, str], ...]:
    """``{"2":"llama_v2.om"}`` -> ((2, "llama_v2.om"),)."""
    expected = (
        f"parameters.{VERSION_OM_MODEL_PATHS}: expected a JSON object of version -> OM path, e.g. "
        f'{{"2":"llama_v2.om"}}, got {text!r}'
    )
    try:
        mapping = json.loads(text)
    except ValueError:
        raise ConfigError(expected) from None
    if not isinstance(mapping, dict):
        raise ConfigError(expected)
    out = []
    for key, path in mapping.items():
        if not (key.isdigit() and not key.startswith("0")) or not isinstance(path, str) or not path.strip():
            raise ConfigError(f"{expected} ({key!r}: {path!r} is not a version >= 1 and a path)")
        out.append((int(key), path.strip()))
    return tuple(sorted(out))


def _format_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _om_model_path(text: str) -> str:
    if not text.strip():
        raise ConfigError(f"parameters.{OM_MODEL_PATH} is required: the path of the .om file to serve")
    return text.strip()


def _ints(values: Iterable[int]) -> str:
    return ",".join(str(v) for v in values)


def _encoded(items: Iterable[_Encodable]) -> str:
    return ";".join(item.encode() for item in items)


def _encode_version_paths(paths: tuple[tuple[int, str], ...]) -> str:
    return json.dumps({str(v): path for v, path in paths}, separators=(",", ":"))


@attrs.frozen
class _Param:
    """One parameter: its parser (raising ConfigError with the key and what was expected), its encoder, and
    whether an empty value means "not set" (else it is parsed, and refused, like any other)."""

    parse: Callable[[str], Any]
    encode: Callable[[Any], str]
    blank_is_unset: bool = True


#: every parameter, in the order they are checked
_PARAMS: dict[str, _Param] = {
    OM_MODEL_PATH: _Param(_om_model_path, str, blank_is_unset=False),
    DEVICE_IDS: _Param(_device_ids, _ints, blank_is_unset=False),
    GEARS: _Param(functools.partial(_int_list, GEARS, minimum=1), _ints),
    DIMS_GEARS: _Param(_dims_gears, lambda gears: ";".join(_ints(gear) for gear in gears)),
    IMAGE_SIZES: _Param(_image_sizes, lambda sizes: ";".join(_ints(size) for size in sizes)),
    OUTPUT_DIM_TIES: _Param(_items(OUTPUT_DIM_TIES, _dim_tie, unique=False), _encoded),
    PAD_INPUTS: _Param(_pad_inputs, ",".join),
    PAD_VALUE: _Param(_pad_value, _format_number, blank_is_unset=False),
    PRECISION: _Param(_precision, str, blank_is_unset=False),
    INPUT_RANGES: _Param(_items(INPUT_RANGES, _input_range, unique=True), _encoded),
    SAME_SHAPE: _Param(_items(SAME_SHAPE, _shape_tie, unique=True), _encoded),
    STREAMS_PER_INSTANCE: _Param(
        functools.partial(_int, STREAMS_PER_INSTANCE, minimum=1), str, blank_is_unset=False
    ),
    WARMUP: _Param(functools.partial(_int, WARMUP, minimum=0), str, blank_is_unset=False),
    METRICS_INTERVAL_MS: _Param(
        functools.partial(_int, METRICS_INTERVAL_MS, minimum=1), str, blank_is_unset=False
    ),
    ACL_JSON: _Param(_acl_json, str),
    VERSION_OM_MODEL_PATHS: _Param(_version_paths, _encode_version_paths),
}

#: every parameter's key
KEYS = tuple(_PARAMS)
