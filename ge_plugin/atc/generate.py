"""The ATC flags of a generating LLaMA (docs/generate.md): its shapes and its (batch, seq) gears.

Every -1 dim is a gear dim of ``--dynamic_dims``: ``b`` and ``s`` of ``input_ids`` / ``position_ids``,
``b`` and ``context + s`` of ``attention_mask``, ``b`` of each past key/value. The gears are the decode gears
``(b, 1)`` and the prefill gears ``(1, s)``, not their grid: decode never runs more than one token a
sequence and prefill runs one sequence at a time, so the grid's other points would only cost compile time.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ge_plugin.gears import GearSet, dims_slots

KINDS = ("key", "value")


@attrs.frozen
class GenerateShapes:
    """What ATC must know of a generating model; the names are the OM's tensors."""

    form: str  #: "stacked" or "per_layer"
    layers: int
    heads: int
    head_dim: int
    context: int
    batch_gears: tuple[int, ...]
    seq_gears: tuple[int, ...]
    input_ids: str = "input_ids"
    attention_mask: str = "attention_mask"
    position_ids: str = "position_ids"
    past: str = "past_key_values"  #: per_layer: a pattern with {layer} and {kind}

    def past_names(self) -> list[str]:
        if self.form == "stacked":
            return [self.past]
        return [self.past.format(layer=n, kind=k) for n in range(self.layers) for k in KINDS]

    def gears(self) -> list[tuple[int, int]]:
        """``(b, s)`` of every gear: decode gears first, then the prefill gears not already among them."""
        decode = [(b, 1) for b in self.batch_gears]
        return decode + [(1, s) for s in self.seq_gears if (1, s) not in decode]


def inputs(shapes: GenerateShapes) -> list[tuple[str, tuple[int, ...]]]:
    """Every input's name and dims, -1 where a gear sets the length."""
    cache = (shapes.heads, shapes.context, shapes.head_dim)
    past = (shapes.layers, 2, -1, *cache) if shapes.form == "stacked" else (-1, *cache)
    out = [(name, (-1, -1)) for name in (shapes.input_ids, shapes.attention_mask, shapes.position_ids)]
    return out + [(name, past) for name in shapes.past_names()]


def input_shape(shapes: GenerateShapes) -> str:
    return ";".join(f"{name}:{','.join(map(str, dims))}" for name, dims in inputs(shapes))


def gear_set(shapes: GenerateShapes) -> GearSet:
    """The decode and prefill gears as ``--dynamic_dims`` gears over every -1 dim of ``inputs``."""
    pasts = len(shapes.past_names())
    values = [(b, s, b, shapes.context + s, b, s) + (b,) * pasts for b, s in shapes.gears()]
    return GearSet("dims", tuple(values), dims_slots(inputs(shapes)))


def dynamic_dims(shapes: GenerateShapes) -> str:
    return gear_set(shapes).flag_value()


def atc_flags(shapes: GenerateShapes) -> list[str]:
    """``--input_shape``, ``--input_format=ND`` and ``--dynamic_dims`` for ``shapes``."""
    return [
        f"--input_shape={input_shape(shapes)}",
        "--input_format=ND",
        f"--dynamic_dims={dynamic_dims(shapes)}",
    ]


def gear_count(batch_gears: Sequence[int], seq_gears: Sequence[int]) -> int:
    """How many ATC gears (at most 100 for --dynamic_dims)."""
    return len(set(batch_gears)) + len([s for s in seq_gears if s != 1])
