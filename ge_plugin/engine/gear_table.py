"""An OM's gears: the compiled shapes a batch can run on, and what each costs.

An OM compiled with gears is a set of static graphs. A batch of requests runs on the cheapest gear that
covers it: at least as many rows as the batch and, for each dim a gear sets, at least the longest request —
or exactly the request's length where padding would change the answer (an image, a sequence the model does
not mask). That choice is made per execute by the fast path (``fastpath.Planner``), from these gears in this
order. Cost is the number of input elements the gear computes on (padding included), which is what the
device pays for.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ge_plugin.gears import GearSet


@attrs.frozen
class Gear:
    """One compiled shape. Dims are full model dims (batch first when batched), one tuple per tensor."""

    index: int
    input_dims: tuple[tuple[int, ...], ...]
    output_dims: tuple[tuple[int, ...], ...]
    #: what selects this gear on the device: a batch size (set_dynamic_batch_size), (height, width)
    #: (set_dynamic_hw_size), the concatenated dims of all inputs (set_input_dynamic_dims), or None for a
    #: static model
    setting: int | tuple[int, ...] | None
    #: the gear's name in statistics and metrics (``GearSet.name``: ``"4"``, ``"1x16"``, ``"224x224"``)
    label: str
    cost: int = attrs.field(init=False)
    flat: tuple[int, ...] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        cost = 0
        for dims in self.input_dims:
            n = 1
            for d in dims:
                n *= d
            cost += n
        object.__setattr__(self, "cost", cost)
        object.__setattr__(self, "flat", tuple(d for dims in self.input_dims for d in dims))

    @property
    def rows(self) -> int:
        """The batch (dim 0) this gear runs."""
        return self.input_dims[0][0] if self.input_dims and self.input_dims[0] else 1


class GearTable:
    """All gears of one model, cheapest first, with the limits request validation needs.

    ``mode`` is the OM's (``OmModel.mode``), ``gear_set`` its gears as ATC compiled them (a gear's ``index``
    is its place there). Which gear runs a batch is the fast path's choice (``fastpath.Planner``, built from
    these gears in this order): the first that covers it."""

    def __init__(self, gears: Sequence[Gear], *, mode: str = "static", gear_set: GearSet | None = None):
        if not gears:
            raise ValueError("a model has at least one gear")
        self.mode = mode
        self.gear_set = gear_set if gear_set is not None else GearSet()
        self.gears: tuple[Gear, ...] = tuple(sorted(gears, key=lambda g: (g.cost, g.index)))
        ranks = {tuple(len(d) for d in g.input_dims) for g in self.gears}
        if len(ranks) != 1:
            raise ValueError("every gear must have the same input ranks")
        #: per input, per dim: the largest length any gear accepts
        self.limits: tuple[tuple[int, ...], ...] = tuple(
            tuple(max(g.input_dims[i][d] for g in self.gears) for d in range(len(dims)))
            for i, dims in enumerate(self.gears[0].input_dims)
        )
        self.max_rows = max(g.rows for g in self.gears)

    def __len__(self) -> int:
        return len(self.gears)
