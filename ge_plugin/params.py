"""The ``parameters`` of a ``backend: "ge"`` config.pbtxt: their names, encodings and defaults.

This is the contract between the renderer (which writes them from a spec) and the backend (which reads them
from the config Triton hands to ``initialize``), so that a hand-written config.pbtxt works with no spec at
all. Config parameters are strings; every key is documented in docs/config.md. Keys that mean the same as in
CANN's GE backend keep its names (``device_ids``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import attrs

from ge_plugin.errors import ConfigError

OM_MODEL_PATH = "om_model_path"
DEVICE_IDS = "device_ids"
GEARS = "gears"
DIMS_GEARS = "dims_gears"
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

KEYS = (
    OM_MODEL_PATH,
    DEVICE_IDS,
    GEARS,
    DIMS_GEARS,
    OUTPUT_DIM_TIES,
    PAD_VALUE,
    PRECISION,
    STREAMS_PER_INSTANCE,
    ACL_JSON,
    WARMUP,
    METRICS_INTERVAL_MS,
    INPUT_RANGES,
    SAME_SHAPE,
    VERSION_OM_MODEL_PATHS,
)

PRECISIONS = ("origin", "fp16", "bf16")


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
    output_dim_ties: tuple[DimTie, ...] = ()
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
        """The config.pbtxt ``parameters``, as strings, defaults included, in a stable order."""
        out = {
            OM_MODEL_PATH: self.om_model_path,
            DEVICE_IDS: ",".join(str(d) for d in self.device_ids),
            STREAMS_PER_INSTANCE: str(self.streams_per_instance),
            PAD_VALUE: _format_number(self.pad_value),
            WARMUP: str(self.warmup),
            METRICS_INTERVAL_MS: str(self.metrics_interval_ms),
        }
        if self.gears:
            out[GEARS] = ",".join(str(g) for g in self.gears)
        if self.dims_gears:
            out[DIMS_GEARS] = ";".join(",".join(str(v) for v in gear) for gear in self.dims_gears)
        if self.output_dim_ties:
            out[OUTPUT_DIM_TIES] = ";".join(t.encode() for t in self.output_dim_ties)
        if self.acl_json:
            out[ACL_JSON] = self.acl_json
        if self.precision is not None:
            out[PRECISION] = self.precision
        if self.input_ranges:
            out[INPUT_RANGES] = ";".join(r.encode() for r in self.input_ranges)
        if self.same_shape:
            out[SAME_SHAPE] = ";".join(t.encode() for t in self.same_shape)
        if self.version_om_model_paths:
            out[VERSION_OM_MODEL_PATHS] = json.dumps(
                {str(v): path for v, path in self.version_om_model_paths}, separators=(",", ":")
            )
        return dict(sorted(out.items()))

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, object]) -> ModelParams:
        """Parse config ``parameters``.

        Accepts both plain strings and the ``{"string_value": ...}`` form of the model-config JSON that
        Triton passes to ``initialize``. Unknown keys are ignored (other tools put their own keys there);
        every malformed value raises ConfigError naming the key and what was expected.
        """
        raw = {key: _string_value(key, value) for key, value in parameters.items()}
        if not raw.get(OM_MODEL_PATH, "").strip():
            raise ConfigError(f"parameters.{OM_MODEL_PATH} is required: the path of the .om file to serve")
        kwargs: dict[str, object] = {OM_MODEL_PATH: raw[OM_MODEL_PATH].strip()}
        if DEVICE_IDS in raw:
            kwargs[DEVICE_IDS] = _int_list(raw, DEVICE_IDS, minimum=0)
            if len(set(kwargs[DEVICE_IDS])) != len(kwargs[DEVICE_IDS]):
                raise ConfigError(
                    f"parameters.{DEVICE_IDS}: device ids must be unique, got {raw[DEVICE_IDS]!r}"
                )
        if raw.get(GEARS, "").strip():
            kwargs[GEARS] = _int_list(raw, GEARS, minimum=1)
        if raw.get(DIMS_GEARS, "").strip():
            kwargs[DIMS_GEARS] = tuple(
                _int_list({DIMS_GEARS: part}, DIMS_GEARS, minimum=1, whole=raw[DIMS_GEARS])
                for part in raw[DIMS_GEARS].split(";")
            )
            if len({len(g) for g in kwargs[DIMS_GEARS]}) != 1:
                raise ConfigError(
                    f"parameters.{DIMS_GEARS}: every gear must list the same number of dims, "
                    f"got {raw[DIMS_GEARS]!r}"
                )
        if raw.get(OUTPUT_DIM_TIES, "").strip():
            kwargs[OUTPUT_DIM_TIES] = tuple(_dim_tie(part) for part in raw[OUTPUT_DIM_TIES].split(";"))
        if PAD_VALUE in raw:
            try:
                kwargs[PAD_VALUE] = float(raw[PAD_VALUE])
            except ValueError:
                raise ConfigError(
                    f"parameters.{PAD_VALUE}: expected a number, got {raw[PAD_VALUE]!r}"
                ) from None
        if PRECISION in raw:
            if raw[PRECISION] not in PRECISIONS:
                raise ConfigError(
                    f"parameters.{PRECISION}: expected one of {', '.join(PRECISIONS)}, got {raw[PRECISION]!r}"
                )
            kwargs[PRECISION] = raw[PRECISION]
        if raw.get(INPUT_RANGES, "").strip():
            kwargs[INPUT_RANGES] = tuple(_input_range(part) for part in raw[INPUT_RANGES].split(";"))
        if raw.get(SAME_SHAPE, "").strip():
            kwargs[SAME_SHAPE] = tuple(_shape_tie(part) for part in raw[SAME_SHAPE].split(";"))
        for key in (INPUT_RANGES, SAME_SHAPE):
            names = [item.input for item in kwargs.get(key, ())]
            if len(set(names)) != len(names):
                raise ConfigError(f"parameters.{key}: an input is listed twice in {raw[key]!r}")
        for key, minimum in ((STREAMS_PER_INSTANCE, 1), (WARMUP, 0), (METRICS_INTERVAL_MS, 1)):
            if key in raw:
                (kwargs[key],) = _int_list(raw, key, minimum=minimum, single=True)
        if raw.get(ACL_JSON, "").strip():
            try:
                if not isinstance(json.loads(raw[ACL_JSON]), dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                raise ConfigError(
                    f"parameters.{ACL_JSON}: expected a JSON object, got {raw[ACL_JSON]!r} ({exc})"
                ) from None
            kwargs[ACL_JSON] = raw[ACL_JSON]
        if raw.get(VERSION_OM_MODEL_PATHS, "").strip():
            kwargs[VERSION_OM_MODEL_PATHS] = _version_paths(raw[VERSION_OM_MODEL_PATHS])
        return cls(**kwargs)


def _string_value(key: str, value: object) -> str:
    if isinstance(value, Mapping):
        value = value.get("string_value", "")
    if not isinstance(value, str):
        raise ConfigError(f"parameters.{key}: expected a string value, got {value!r}")
    return value


def _int_list(
    raw: Mapping[str, str], key: str, *, minimum: int, single: bool = False, whole: str | None = None
) -> tuple[int, ...]:
    text = raw[key]
    shown = whole if whole is not None else text
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        what = "an integer" if single else "comma-separated integers"
        raise ConfigError(f"parameters.{key}: expected {what}, got {shown!r}") from None
    if single and len(values) != 1:
        raise ConfigError(f"parameters.{key}: expected one integer, got {shown!r}")
    bad = [v for v in values if v < minimum]
    if bad:
        raise ConfigError(f"parameters.{key}: values must be >= {minimum}, got {bad[0]} in {shown!r}")
    return values


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
