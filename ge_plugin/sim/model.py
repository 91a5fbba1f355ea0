"""What a loaded OM knows about itself: inputs, outputs and gears, read from a sim OM header.

The ``ascend_mbatch_shape_data`` input that ATC adds to gear models is added here, last, as on real OMs:
int64, ND, one element per value that picks a gear (1 for a batch gear, 2 for an image-size gear, one per -1
dim for a dims gear), so its size is that count times 8 bytes.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from ge_plugin import acl_constants as C
from ge_plugin.dtypes import by_acl
from ge_plugin.errors import ModelFileError
from ge_plugin.gears import KINDS, GearSet, dims_slots, label_of
from ge_plugin.precision import ROUNDING

MODES = KINDS
PRECISIONS = tuple(ROUNDING.values())


class IoDesc:
    """One model input or output as the model description reports it."""

    __slots__ = (
        "aipp",
        "dims",
        "dims_v2",
        "dtype",
        "format",
        "graph_dtype",
        "graph_np",
        "name",
        "np",
        "onnx_name",
        "size",
    )

    def __init__(
        self,
        name: str,
        dtype: int,
        fmt: int,
        dims: tuple[int, ...],
        size: int,
        graph_dtype: int,
        onnx_name: str,
        dims_v2: tuple[int, ...] | None = None,
        aipp: dict[str, Any] | None = None,
    ):
        self.name = name
        self.dtype = dtype
        self.format = fmt
        self.dims = dims
        #: get_input_dims_v2's dims: an AIPP input's in bytes' shape, else ``dims``
        self.dims_v2 = dims if dims_v2 is None else dims_v2
        #: the static AIPP in front of an input (the header's section, ``ge_plugin.atc.aipp.Aipp``), or None
        self.aipp = aipp
        self.size = size  #: bytes at the largest gear
        self.np = _numpy(dtype)
        self.graph_dtype = graph_dtype  #: the ONNX graph's side, as aclDataType
        self.graph_np = _numpy(graph_dtype)
        self.onnx_name = onnx_name


class OmGear:
    """One gear as the sim OM records it: the values that select it (as ATC was given them: what the
    ``ascend_mbatch_shape_data`` buffer holds), its label (``GearSet.label``) and the concrete dims of every
    data input and output. (``ge_plugin.engine.gear_table.Gear`` is the engine's view of a gear, read through
    pyACL.)"""

    __slots__ = (
        "index",
        "input_dims",
        "input_sizes",
        "label",
        "output_dims",
        "output_sizes",
        "packed",
        "rows",
        "values",
    )

    def __init__(
        self,
        index: int,
        values: tuple[int, ...],
        input_dims: Sequence[Sequence[int]],
        output_dims: Sequence[Sequence[int]],
        in_np: Sequence[np.dtype[Any]],
        out_np: Sequence[np.dtype[Any]],
    ):
        self.index = index
        self.values = values
        #: the values as the ascend_mbatch_shape_data buffer holds them: native int64s
        self.packed = struct.pack(f"={len(values)}q", *values)
        self.label = label_of(values)  # the gear set's label once the model's gears are read (``_gears``)
        self.input_dims = tuple(tuple(d) for d in input_dims)
        self.output_dims = tuple(tuple(d) for d in output_dims)
        self.input_sizes = tuple(math.prod(d) * t.itemsize for d, t in zip(self.input_dims, in_np))
        self.output_sizes = tuple(math.prod(d) * t.itemsize for d, t in zip(self.output_dims, out_np))
        #: the first dim of the first input: the ``rows`` of an ``a + b*rows`` device-time profile
        self.rows = int(self.input_dims[0][0]) if self.input_dims and self.input_dims[0] else 1


def _numpy(acl_dtype: int) -> np.dtype[Any]:
    try:
        return by_acl(acl_dtype).numpy
    except KeyError as exc:
        raise ModelFileError(str(exc)) from None


def _one_of(value: str, allowed: Sequence[str], what: str) -> str:
    if value not in allowed:
        raise ValueError(f"{what} {value!r}")
    return value


def _gears(
    mode: str, raw_gears: list[dict[str, Any]], raw_in: list[dict[str, Any]], raw_out: list[dict[str, Any]]
) -> tuple[list[OmGear], GearSet]:
    """The header's gears (a static model: one, at the inputs' and outputs' own dims), each listing every
    input and output, and the model's gear set, which names them (``GearSet.label``)."""
    in_np = [_numpy(int(i["dtype"])) for i in raw_in]
    out_np = [_numpy(int(o["dtype"])) for o in raw_out]
    if mode == "static":
        raw_gears = [
            {
                "values": [],
                "inputs": [i.get("dims_v2", i["dims"]) for i in raw_in],
                "outputs": [o["dims"] for o in raw_out],
            }
        ]
    gears = [
        OmGear(n, tuple(int(v) for v in g["values"]), g["inputs"], g["outputs"], in_np, out_np)
        for n, g in enumerate(raw_gears)
    ]
    if not gears:
        raise ValueError("no gears")
    for gear in gears:
        if len(gear.input_dims) != len(raw_in) or len(gear.output_dims) != len(raw_out):
            raise ValueError(f"gear {gear.label} does not list every input and output")
    gear_set = _gear_set(mode, gears, [(i["name"], tuple(int(d) for d in i["dims"])) for i in raw_in])
    for gear in gears:
        gear.label = gear_set.label(gear.index)
    return gears, gear_set


def _gear_set(mode: str, gears: Sequence[OmGear], inputs: Sequence[tuple[str, tuple[int, ...]]]) -> GearSet:
    """What get_dynamic_batch, get_dynamic_hw and get_input_dynamic_dims report, as a gear set: a dims gear's
    value of every -1 dim in the model's input order (``GearSet.from_acl`` reads the same from pyACL)."""
    if mode == "static":
        return GearSet()
    if mode != "dims":
        return GearSet(mode, tuple(g.values for g in gears))
    slots = dims_slots(inputs)
    index = {name: k for k, (name, _) in enumerate(inputs)}
    return GearSet(
        "dims", tuple(tuple(g.input_dims[index[name]][d] for name, d in slots) for g in gears), slots
    )


def _input_desc(n: int, raw: dict[str, Any], gears: Sequence[OmGear]) -> IoDesc:
    """Data input ``n``: its header dims (-1 where gears differ), its size at the largest gear."""
    return IoDesc(
        raw["name"],
        int(raw["dtype"]),
        int(raw["format"]),
        tuple(int(d) for d in raw["dims"]),
        max(g.input_sizes[n] for g in gears),
        int(raw.get("graph_dtype", raw["dtype"])),
        raw["name"],
        tuple(int(d) for d in raw["dims_v2"]) if "dims_v2" in raw else None,
        raw.get("aipp"),
    )


def _output_desc(n: int, raw: dict[str, Any], gears: Sequence[OmGear]) -> IoDesc:
    """Output ``n`` at the gear where it is largest: its dims and size there."""
    biggest = max(gears, key=lambda g: (g.output_sizes[n], g.index))
    return IoDesc(
        raw["name"],
        int(raw["dtype"]),
        int(raw["format"]),
        biggest.output_dims[n],
        biggest.output_sizes[n],
        int(raw.get("graph_dtype", raw["dtype"])),
        raw.get("onnx_name", raw["name"]),
    )


def _mbatch_desc(gears: Sequence[OmGear]) -> IoDesc:
    """``ascend_mbatch_shape_data``: int64, ND, one element per value that selects a gear."""
    count = len(gears[0].values)
    if count == 0 or any(len(g.values) != count for g in gears):
        raise ValueError("gears select with different numbers of values")
    return IoDesc(
        C.ACL_DYNAMIC_TENSOR_NAME, C.ACL_INT64, C.ACL_FORMAT_ND, (count,), count * 8, C.ACL_INT64, ""
    )


class ModelInfo:
    """Everything get_desc exposes, plus the gear table execute needs."""

    def __init__(self, header: dict[str, Any]):
        try:
            self._parse(header)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ModelFileError):
                raise
            raise ModelFileError(f"sim OM header is invalid: {exc!r}") from None

    def _parse(self, header: dict[str, Any]) -> None:
        self.header = header
        self.precision = _one_of(header["precision"], PRECISIONS, "precision")
        dynamic = header["dynamic"]
        self.mode = _one_of(dynamic["mode"], MODES, "dynamic mode")
        raw_in, raw_out = header["inputs"], header["outputs"]
        self.gears, self.gear_set = _gears(self.mode, dynamic["gears"], raw_in, raw_out)
        self.gear_by_values = {g.values: g for g in self.gears}
        self.gear_by_packed = {g.packed: g for g in self.gears}
        self.n_data = len(raw_in)
        self.inputs = [_input_desc(n, i, self.gears) for n, i in enumerate(raw_in)]
        self.outputs = [_output_desc(n, o, self.gears) for n, o in enumerate(raw_out)]
        self.mbatch_index: int | None = None
        if self.mode != "static":
            self.mbatch_index = len(self.inputs)
            self.inputs.append(_mbatch_desc(self.gears))
        self.input_index = {d.name: n for n, d in enumerate(self.inputs)}
        self.output_index = {d.name: n for n, d in enumerate(self.outputs)}

    def concatenated_dims(self, gear: OmGear) -> list[int]:
        """All data inputs' dims at ``gear``, concatenated: what get_input_dynamic_dims reports."""
        return [v for dims in gear.input_dims for v in dims]

    def gear_for_dims(self, dims: Sequence[int]) -> OmGear | None:
        """The gear whose concatenated input dims are ``dims``."""
        for gear in self.gears:
            if self.concatenated_dims(gear) == list(dims):
                return gear
        return None
