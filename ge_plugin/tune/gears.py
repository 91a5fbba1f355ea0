"""The gears a spec compiles, named as the simulator and its profiles name them, with the work each one does.

A device-time profile is a table by gear label (``"4"`` for batch gear 4, ``"4,32"`` for a ``--dynamic_dims``
gear, ``"224,224"`` for an image size, ``"static"``), the labels ``executes_by_gear`` counts. Tuning changes the
gears, so each candidate's labels are derived here from the same ATC flags the OM is built with
(``ge_plugin.atc.command``), never guessed. ``units`` is how much the gear computes on: the element count of
the model's first input at that gear (rows × sequence, rows × pixels), what a fitted ``base + k·units`` line
interpolates over.
"""

from __future__ import annotations

import attrs

from ge_plugin.atc.command import dynamic_dims_gears
from ge_plugin.spec.model import ModelSpec


@attrs.frozen
class GearInfo:
    label: str
    #: the first input's full shape at this gear (batch first when the model batches)
    first_shape: tuple[int, ...]

    @property
    def rows(self) -> int:
        """What the simulator's ``a + b·rows`` reads: the first dim of the first input."""
        return self.first_shape[0] if self.first_shape else 1

    @property
    def units(self) -> int:
        n = 1
        for d in self.first_shape:
            n *= d
        return n


def spec_gears(spec: ModelSpec) -> list[GearInfo]:
    """Every gear ATC compiles for ``spec``, in ATC's order."""
    if spec.dims_gears:
        labels = [",".join(map(str, values)) for values in dynamic_dims_gears(spec)]
    elif spec.image_sizes:
        labels = [f"{h},{w}" for h, w in spec.image_sizes]
    elif spec.batching is not None:
        labels = [str(b) for b in spec.gears]
    else:
        labels = ["static"]
    return [parse_label(spec, label) for label in labels]


def parse_label(spec: ModelSpec, label: str) -> GearInfo:
    """The gear ``label`` names for a model shaped like ``spec`` (its gears may differ): ValueError saying
    what a label of this model looks like when it is not one."""
    first = spec.inputs[0]
    batched = spec.batching is not None
    if spec.dims_gears:
        width = sum(1 for t in spec.inputs for d in t.dims if d == -1) + (len(spec.inputs) if batched else 0)
        example = ",".join(map(str, dynamic_dims_gears(spec)[0]))
        what = f"{width} values, the batch and each -1 dim of every input (as {example!r})"
    elif spec.image_sizes:
        width, what = 2, "height,width (as '224,224')"
    elif batched:
        width, what = 1, "a batch size (as '4')"
    else:
        width, what = 0, "'static'"
    text = label.replace(" ", "")
    if width == 0:
        if text != "static":
            raise ValueError(f"gear {label!r}: this model is static; its one gear is {what}")
        return GearInfo("static", tuple(first.dims))
    parts = text.split(",")
    if len(parts) != width or not all(p.isdigit() and int(p) >= 1 for p in parts):
        raise ValueError(f"gear {label!r} is not a gear of this model: a label is {what}")
    values = [int(p) for p in parts]
    if spec.dims_gears:
        fill = iter(values)
        dims: tuple[int, ...] = (next(fill),) if batched else ()
        dims += tuple(next(fill) if d == -1 else d for d in first.dims)
    elif spec.image_sizes:
        hw = iter(values)
        dims = ((spec.gears[0],) if batched else ()) + tuple(
            next(hw, d) if d == -1 else d for d in first.dims
        )
    else:
        dims = (values[0], *first.dims)
    return GearInfo(",".join(map(str, values)), dims)
