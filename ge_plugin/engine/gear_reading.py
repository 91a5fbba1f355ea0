"""Reading an OM's gears: which concrete input dims each compiled shape has, and its outputs' dims.

ATC compiles gears in one of three ways, and pyACL reports each differently: ``--dynamic_batch_size`` as
batch sizes (``get_dynamic_batch``), ``--dynamic_image_size`` as (height, width) pairs (``get_dynamic_hw``),
``--dynamic_dims`` as flat lists of dims (``get_input_dynamic_dims``: either every dim of every input, or only
the -1 ones); a static OM has its one shape. Each gear's output dims are whatever the OM reports once the gear
is selected. (A shape-range OM, built from ``--input_shape`` ranges with no gear flag, has no gears to read:
the lane refuses it when it loads it, ``shape_range.refusal``.)
"""

from __future__ import annotations

import attrs

from ge_plugin import device
from ge_plugin.engine.gear_table import Gear, GearTable
from ge_plugin.engine.lane import Lane
from ge_plugin.errors import ConfigError


@attrs.frozen
class GearSetting:
    label: str
    #: what selects the gear on the device (see ``Gear.setting``)
    setting: int | tuple[int, ...] | None
    input_dims: tuple[tuple[int, ...], ...]


def read_gear_table(lane: Lane, where: str) -> GearTable:
    """Every gear of the lane's OM, its output dims read with the gear selected."""
    model = lane.loaded_model
    gears = []
    for index, gear in enumerate(gear_settings(model, where)):
        lane.select(Gear(index, gear.input_dims, (), gear.setting, gear.label))
        out_dims = tuple(model.cur_output_dims(info.index) for info in model.outputs)
        gears.append(Gear(index, gear.input_dims, out_dims, gear.setting, gear.label))
    return GearTable(gears, mode=model.mode)


def gear_settings(model: device.OmModel, where: str) -> list[GearSetting]:
    if model.mode == "batch":
        return _batch_settings(model)
    if model.mode == "hw":
        return _hw_settings(model, where)
    if model.mode == "dims":
        return _dims_settings(model, where)
    return [GearSetting("static", None, tuple(tuple(info.dims) for info in model.inputs))]


def _batch_settings(model: device.OmModel) -> list[GearSetting]:
    """A batch gear sets every input's -1 dim 0 to the batch size."""
    return [
        GearSetting(
            str(b),
            b,
            tuple(
                tuple(b if (d == 0 and n < 0) else n for d, n in enumerate(info.dims))
                for info in model.inputs
            ),
        )
        for b in model.batch_gears
    ]


def _hw_settings(model: device.OmModel, where: str) -> list[GearSetting]:
    """An image-size gear sets the height and width (dims 2 and 3) of every NCHW input that has them at -1;
    the batch dim is whatever ``--input_shape`` fixed (ATC takes no batch gears with image sizes)."""
    for info in model.inputs:
        marked = list(info.dynamic)
        if marked and (len(info.dims) != 4 or marked != [2, 3]):
            raise ConfigError(
                f"{where}: the OM has image-size gears but input {info.name!r} has dims {list(info.dims)}; "
                "--dynamic_image_size sets only the height and width (dims 2 and 3) of an NCHW input"
            )
    return [
        GearSetting(
            f"{h}x{w}",
            (h, w),
            tuple(
                tuple((h, w)[d - 2] if n < 0 else n for d, n in enumerate(info.dims)) for info in model.inputs
            ),
        )
        for h, w in model.hw_gears
    ]


def _dims_settings(model: device.OmModel, where: str) -> list[GearSetting]:
    """A dims gear lists every dim of every input, or the -1 dims only; labelled by its -1 values (one
    input's when every input takes the same ones, as a shared sequence length does)."""
    ranks = [len(info.dims) for info in model.inputs]
    dynamic = [(k, d) for k, info in enumerate(model.inputs) for d in info.dynamic]
    settings = []
    for flat in model.dims_gears:
        dims = [list(info.dims) for info in model.inputs]
        if len(flat) == sum(ranks):
            values = iter(flat)
            dims = [[next(values) for _ in range(rank)] for rank in ranks]
        elif len(flat) == len(dynamic):
            for (k, d), value in zip(dynamic, flat):
                dims[k][d] = value
        else:
            raise ConfigError(f"{where}: the OM reports a dims gear {list(flat)} that fits no input layout")
        per_input = {tuple(dims[k][d] for k2, d in dynamic if k2 == k) for k in {k for k, _ in dynamic}}
        shown = per_input.pop() if len(per_input) == 1 else tuple(dims[k][d] for k, d in dynamic)
        settings.append(
            GearSetting(
                "x".join(map(str, shown)),
                tuple(v for ds in dims for v in ds),
                tuple(tuple(ds) for ds in dims),
            )
        )
    return settings
