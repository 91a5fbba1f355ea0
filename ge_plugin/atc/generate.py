"""The ATC flags of a generating LLaMA (docs/generate.md): its shapes and its (batch, seq) gears.

Every -1 dim is a gear dim of ``--dynamic_dims``: ``b`` and ``s`` of ``input_ids`` / ``position_ids``,
``b`` and ``context + s`` of ``attention_mask``, ``b`` of each past key/value. The gears are the decode gears
``(b, 1)`` and the prefill gears ``(1, s)``, not their grid: decode never runs more than one token a
sequence and prefill runs one sequence at a time, so the grid's other points would only cost compile time.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

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


def input_shape(shapes: GenerateShapes) -> str:
    cache = [shapes.heads, shapes.context, shapes.head_dim]
    past = [shapes.layers, 2, -1, *cache] if shapes.form == "stacked" else [-1, *cache]
    parts = [f"{name}:-1,-1" for name in (shapes.input_ids, shapes.attention_mask, shapes.position_ids)]
    parts += [f"{name}:{','.join(map(str, past))}" for name in shapes.past_names()]
    return ";".join(parts)


def dynamic_dims(shapes: GenerateShapes) -> str:
    rows = []
    pasts = len(shapes.past_names())
    for b, s in shapes.gears():
        rows.append(",".join(map(str, [b, s, b, shapes.context + s, b, s] + [b] * pasts)))
    return ";".join(rows)


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
