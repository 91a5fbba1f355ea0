"""ATC's static AIPP: the ``--insert_op_conf`` file's ``aipp_op`` sections, read and checked, and written from a
spec's ``preprocess``.

AIPP (AI pre-processing) is compiled into an OM in front of one input: that input then takes images as DVPP
writes them (YUV420SP_U8, or RGB888_U8) and the device converts them before the graph runs: colour space
conversion (CSC: a 3x3 integer matrix applied to the input minus ``input_bias``, shifted right by 8, one row per
output channel in order), an optional swap of R and B (U and V for YUV input: ``rbuv_swap_switch``), then per
channel ``(x - mean_chn - min_chn) * var_reci_chn`` into the model's float type. The ATC guide's "AIPP
configuration" and "CSC configuration" pages give the file's keys and the matrices; its text is protobuf's
text format (``aipp_op { key : value ... }``, ``#`` comments), one section per input.

The simulator does what a static AIPP does with these keys. Cropping, padding and resizing inside AIPP, and
dynamic AIPP, are refused with ATC's E10001 naming them (their ``false`` values are accepted), as are CSC
without its matrix (ATC's defaults are not simulated) and other input formats. What an OM built with AIPP
reports through pyACL is the simulator's (``ge_plugin.sim.mdl``); how the pixels are converted is
``ge_plugin.sim._aipp``. Nothing here imports the simulator.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, TypeVar

import attrs

from ge_plugin.errors import AtcError

_N = TypeVar("_N", int, float)

YUV420SP_U8 = "YUV420SP_U8"
RGB888_U8 = "RGB888_U8"
INPUT_FORMATS = (YUV420SP_U8, RGB888_U8)

#: the full-range YUV (JPEG, JFIF) -> RGB matrix of the ATC guide's CSC table, and its input biases
JPEG_TO_RGB = ((256, 0, 359), (256, -88, -183), (256, 454, 0))
JPEG_INPUT_BIAS = (0, 128, 128)

_MATRIX = tuple(f"matrix_r{r}c{c}" for r in range(3) for c in range(3))
_INPUT_BIAS = tuple(f"input_bias_{i}" for i in range(3))
_OUTPUT_BIAS = tuple(f"output_bias_{i}" for i in range(3))
_MEAN = tuple(f"mean_chn_{i}" for i in range(4))
_MIN = tuple(f"min_chn_{i}" for i in range(4))
_VAR_RECI = tuple(f"var_reci_chn_{i}" for i in range(4))
#: keys of AIPP features the simulator does not carry out: accepted only when off
_OFF_ONLY = ("crop", "resize", "padding", "support_rotation", "ax_swap_switch", "single_line_mode")
#: keys that only shape those features: accepted with any value when the feature is off
_INERT = (
    "load_start_pos_w",
    "load_start_pos_h",
    "crop_size_w",
    "crop_size_h",
    "resize_output_w",
    "resize_output_h",
    "left_padding_size",
    "right_padding_size",
    "top_padding_size",
    "bottom_padding_size",
    "padding_value",
    "max_src_image_size",
)
_KEYS = frozenset(
    (
        "aipp_mode",
        "related_input_rank",
        "input_format",
        "src_image_size_w",
        "src_image_size_h",
        "csc_switch",
        "rbuv_swap_switch",
        *_MATRIX,
        *_INPUT_BIAS,
        *_OUTPUT_BIAS,
        *_MEAN,
        *_MIN,
        *_VAR_RECI,
        *_OFF_ONLY,
        *_INERT,
    )
)


@attrs.frozen
class Aipp:
    """One ``aipp_op`` section: a static AIPP in front of input ``related_input_rank``."""

    input_format: str
    related_input_rank: int = 0
    #: the image's width and height; 0: the model input's own
    src_image_size_w: int = 0
    src_image_size_h: int = 0
    csc_switch: bool = False
    rbuv_swap_switch: bool = False
    #: row-major; output channel ``r`` is row ``r``
    matrix: tuple[int, ...] = (0,) * 9
    input_bias: tuple[int, int, int] = (0, 0, 0)
    mean_chn: tuple[int, int, int, int] = (0, 0, 0, 0)
    min_chn: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    var_reci_chn: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0)

    def to_header(self) -> dict[str, Any]:
        """What the sim OM header records of it (``ge_plugin.sim._aipp`` reads it back)."""
        return attrs.asdict(
            self, recurse=False, value_serializer=lambda _, __, v: list(v) if isinstance(v, tuple) else v
        )

    def text(self) -> str:
        """The ``aipp_op`` section ATC reads, every key the simulator uses written out."""
        lines = [
            "aipp_op {",
            "    aipp_mode : static",
            f"    related_input_rank : {self.related_input_rank}",
            f"    input_format : {self.input_format}",
            f"    src_image_size_w : {self.src_image_size_w}",
            f"    src_image_size_h : {self.src_image_size_h}",
            f"    csc_switch : {str(self.csc_switch).lower()}",
            f"    rbuv_swap_switch : {str(self.rbuv_swap_switch).lower()}",
        ]
        if self.csc_switch:
            lines += [f"    {key} : {value}" for key, value in zip(_MATRIX, self.matrix)]
            lines += [f"    {key} : {value}" for key, value in zip(_INPUT_BIAS, self.input_bias)]
        lines += [f"    {key} : {value}" for key, value in zip(_MEAN, self.mean_chn)]
        lines += [f"    {key} : {_float(value)}" for key, value in zip(_MIN, self.min_chn)]
        lines += [f"    {key} : {_float(value)}" for key, value in zip(_VAR_RECI, self.var_reci_chn)]
        return "\n".join([*lines, "}"]) + "\n"


def _float(value: float) -> str:
    return repr(float(value))


def for_images(
    *, bgr: bool, mean: Sequence[float], std: Sequence[float], width: int = 0, height: int = 0
) -> Aipp:
    """The AIPP a spec's ``preprocess`` asks for: DVPP's YUV420SP (full-range, as JPEGD writes a JPEG) to RGB
    (or BGR: the matrix's rows swapped) and ``(x - mean) / std`` per channel; the mean split into AIPP's integer
    ``mean_chn`` and fractional ``min_chn``, 1/std as ``var_reci_chn``."""
    rows = JPEG_TO_RGB[::-1] if bgr else JPEG_TO_RGB
    means = tuple(float(m) for m in mean)
    return Aipp(
        input_format=YUV420SP_U8,
        src_image_size_w=width,
        src_image_size_h=height,
        csc_switch=True,
        matrix=tuple(v for row in rows for v in row),
        input_bias=JPEG_INPUT_BIAS,
        mean_chn=(*(math.floor(m) for m in means), 0),  # type: ignore[arg-type]
        min_chn=(*(round(m - math.floor(m), 6) for m in means), 0.0),  # type: ignore[arg-type]
        var_reci_chn=(*(1.0 / float(s) for s in std), 1.0),  # type: ignore[arg-type]
    )


_TOKEN = re.compile(
    r"\s*(?:(#[^\n]*)|([A-Za-z_][A-Za-z0-9_]*)|([{}:])|(-?[0-9][0-9.eE+-]*|-?\.[0-9][0-9eE+-]*)|(\S))"
)


def parse(text: str, source: str = "--insert_op_conf") -> list[Aipp]:
    """Every ``aipp_op`` section of an AIPP config file; AtcError (E10001) naming what is wrong."""
    tokens = [
        m.group(2) or m.group(3) or m.group(4) or m.group(5)
        for m in _TOKEN.finditer(text)
        if not m.group(1) and m.group(0).strip()
    ]
    sections: list[Aipp] = []
    at = 0
    while at < len(tokens):
        if tokens[at] != "aipp_op" or at + 1 >= len(tokens) or tokens[at + 1] != "{":
            raise _bad(source, f"expected 'aipp_op {{', found {tokens[at]!r}")
        at += 2
        values: dict[str, str] = {}
        while at < len(tokens) and tokens[at] != "}":
            key = tokens[at]
            if at + 2 >= len(tokens) or tokens[at + 1] != ":":
                raise _bad(source, f"expected 'key : value' after {key!r}")
            if key not in _KEYS:
                raise _bad(source, f"{key!r} is not a key of aipp_op")
            if key in values:
                raise _bad(source, f"{key!r} is given twice in one aipp_op")
            values[key] = tokens[at + 2]
            at += 3
        if at >= len(tokens):
            raise _bad(source, "an aipp_op section is not closed with '}'")
        at += 1
        sections.append(_section(values, source))
    if not sections:
        raise _bad(source, "the file holds no aipp_op section")
    ranks = [s.related_input_rank for s in sections]
    if len(set(ranks)) != len(ranks):
        raise _bad(source, f"two aipp_op sections are for the same input (related_input_rank {ranks})")
    return sections


def _bad(source: str, reason: str) -> AtcError:
    return AtcError(
        f"E10001: Value [{source}] for parameter [--insert_op_conf] is invalid. Reason: {reason}."
    )


def _section(values: dict[str, str], source: str) -> Aipp:
    def read(key: str, default: _N, low: _N, high: _N) -> _N:
        """The key's value, of ``default``'s type, within low..high; the default when it is not given."""
        text = values.get(key)
        if text is None:
            return default
        try:
            value = type(default)(text)
        except ValueError:
            raise _bad(
                source, f"{key} is {text!r}, not {'an integer' if isinstance(default, int) else 'a number'}"
            ) from None
        if not low <= value <= high:
            raise _bad(source, f"{key} is {value}, outside {low}..{high}")
        return value

    def switch(key: str) -> bool:
        text = values.get(key, "false")
        if text not in ("true", "false"):
            raise _bad(source, f"{key} is {text!r}, not true or false")
        return text == "true"

    mode = values.get("aipp_mode")
    if mode != "static":
        raise _bad(
            source,
            "aipp_mode must be static: dynamic AIPP is not simulated"
            if mode == "dynamic"
            else f"aipp_mode is {mode!r}; give aipp_mode : static",
        )
    fmt = values.get("input_format")
    if fmt not in INPUT_FORMATS:
        raise _bad(source, f"input_format {fmt!r} is not simulated (it takes {', '.join(INPUT_FORMATS)})")
    for key in _OFF_ONLY:
        if switch(key):
            raise _bad(source, f"{key} : true is an AIPP feature the ge-plugin simulator does not carry out")
    csc = switch("csc_switch")
    if csc and not all(key in values for key in _MATRIX):
        missing = [key for key in _MATRIX if key not in values]
        raise _bad(
            source,
            f"csc_switch is true but {', '.join(missing)} not given (ATC's defaults are not simulated)",
        )
    return Aipp(
        input_format=fmt,
        related_input_rank=read("related_input_rank", 0, 0, 1 << 20),
        src_image_size_w=read("src_image_size_w", 0, 0, 4096),
        src_image_size_h=read("src_image_size_h", 0, 0, 4096),
        csc_switch=csc,
        rbuv_swap_switch=switch("rbuv_swap_switch"),
        matrix=tuple(read(key, 0, -32768, 32767) for key in _MATRIX),
        input_bias=tuple(read(key, 0, 0, 255) for key in _INPUT_BIAS),  # type: ignore[arg-type]
        mean_chn=tuple(read(key, 0, 0, 255) for key in _MEAN),  # type: ignore[arg-type]
        min_chn=tuple(read(key, 0.0, 0.0, 255.0) for key in _MIN),  # type: ignore[arg-type]
        var_reci_chn=tuple(read(key, 1.0, -65504.0, 65504.0) for key in _VAR_RECI),  # type: ignore[arg-type]
    )


def input_dims(aipp: Aipp, graph_dims: Sequence[int], name: str) -> tuple[int, int]:
    """The image's (height, width) for an NCHW graph input of 3 channels; AtcError when AIPP cannot feed it."""
    if len(graph_dims) != 4 or graph_dims[1] != 3 or graph_dims[2] <= 0 or graph_dims[3] <= 0:
        raise _bad(
            "--insert_op_conf",
            f"input {name} is {list(graph_dims)}; the simulator's AIPP feeds NCHW inputs of 3 channels with a fixed "
            "height and width",
        )
    height, width = graph_dims[2], graph_dims[3]
    for key, given, own in (
        ("src_image_size_h", aipp.src_image_size_h, height),
        ("src_image_size_w", aipp.src_image_size_w, width),
    ):
        if given and given != own:
            raise _bad(
                "--insert_op_conf",
                f"{key} is {given} but input {name} is {own} there, and AIPP cropping and resizing are not simulated",
            )
    if aipp.input_format == YUV420SP_U8 and (height % 2 or width % 2):
        raise _bad(
            "--insert_op_conf", f"YUV420SP_U8 images have even sides; input {name} is {height}x{width}"
        )
    return height, width


def om_dims(aipp: Aipp, batch: int, height: int, width: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """What pyACL reports of the input: ``get_input_dims`` (NHWC, the image's own: n, h, w, c) and
    ``get_input_dims_v2`` (n, h x 1.5, w, 1 for YUV420SP_U8; their product is the input's size in bytes)."""
    if aipp.input_format == YUV420SP_U8:
        return (batch, height, width, 3), (batch, height * 3 // 2, width, 1)
    return (batch, height, width, 3), (batch, height, width, 3)
