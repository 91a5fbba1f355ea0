"""Reading an OM's gears: which concrete input dims each compiled shape has, and its outputs' dims.

The device layer reads the gears once, as pyACL reports them, into the OM's ``GearSet`` (``ge_plugin.gears``:
batch sizes, (height, width) pairs, or a dims gear's value of every -1 dim); here each becomes the engine's
``Gear``: every input's dims at that gear, what selects it on the device, its name, and the output dims the
OM reports once the gear is selected. (A shape-range OM, built from ``--input_shape`` ranges with no gear
flag, has no gears to read: the lane refuses it when it loads it, ``shape_range.refusal``.)
"""

from __future__ import annotations

from ge_plugin import device
from ge_plugin.engine.gear_table import Gear, GearTable
from ge_plugin.engine.lane import Lane
from ge_plugin.errors import ConfigError


def read_gear_table(lane: Lane, where: str) -> GearTable:
    """Every gear of the lane's OM, its output dims read with the gear selected."""
    model = lane.loaded_model
    gears = []
    for gear in _gears(model, where):
        lane.select(gear)
        out_dims = tuple(model.cur_output_dims(info.index) for info in model.outputs)
        gears.append(Gear(gear.index, gear.input_dims, out_dims, gear.setting, gear.label))
    return GearTable(gears, mode=model.mode, gear_set=model.gear_set)


def _gears(model: device.OmModel, where: str) -> list[Gear]:
    """The OM's gears without their output dims. What selects one on the device is the mode's setter's
    argument (``OmModel.set_gear``): the batch size, (height, width), or every input's dims concatenated."""
    gear_set = model.gear_set
    if gear_set.kind == "hw":
        _check_image_inputs(model, where)
    inputs = [(info.name, info.dims) for info in model.inputs]
    gears = []
    for index, dims in enumerate(gear_set.shapes(inputs)):
        setting: int | tuple[int, ...] | None = None
        if gear_set.kind == "batch":
            setting = gear_set.values[index][0]
        elif gear_set.kind == "hw":
            setting = gear_set.values[index]
        elif gear_set.kind == "dims":
            setting = tuple(d for shape in dims for d in shape)
        gears.append(Gear(index, dims, (), setting, gear_set.name(index)))
    return gears


def _check_image_inputs(model: device.OmModel, where: str) -> None:
    """An image-size gear sets the height and width (dims 2 and 3) of every NCHW input that has them at -1;
    the batch dim is whatever ``--input_shape`` fixed (ATC takes no batch gears with image sizes)."""
    for info in model.inputs:
        marked = list(info.dynamic)
        if marked and (len(info.dims) != 4 or marked != [2, 3]):
            raise ConfigError(
                f"{where}: the OM has image-size gears but input {info.name!r} has dims {list(info.dims)}; "
                "--dynamic_image_size sets only the height and width (dims 2 and 3) of an NCHW input"
            )
