"""The gears a spec compiles, labelled as the simulator and its profiles label them, with the work each does.

A device-time profile is a table by gear label (``GearSet.label``: ``"4"`` for batch gear 4, ``"4,32"`` for a
``--dynamic_dims`` gear, ``"224,224"`` for an image size, ``"static"``), the labels the simulator counts
executes under; ``ge-plugin tune-profile`` writes them and ``GearSet.parse_label`` reads them (the engine's
names, ``"4x32"``, too). Tuning changes the gears, so each candidate's labels come from the gears its spec
compiles (``ModelSpec.gear_set``, the ATC flags its OM is built with), never guessed. ``units`` is how much
the gear computes on: the element count of the model's first input at that gear (rows × sequence, rows ×
pixels), what a fitted ``base + k·units`` line interpolates over.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ge_plugin.gears import GearSet, label_of
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
    gears = spec.gear_set
    return [_info(spec, gears, values) for values in gears.values or [()]]


def parse_label(spec: ModelSpec, label: str) -> GearInfo:
    """The gear ``label`` names for a model shaped like ``spec`` (its gears may differ): ValueError saying
    what a label of this model looks like when it is not one."""
    gears = spec.gear_set
    return _info(spec, gears, gears.parse_label(label))


def _info(spec: ModelSpec, gears: GearSet, values: Sequence[int]) -> GearInfo:
    shapes = spec.input_shapes
    first = gears.dims_at(values, shapes[:1])[0] if values else tuple(shapes[0][1])
    return GearInfo(label_of(values), first)
