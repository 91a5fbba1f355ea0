"""The gears of an OM: the compiled shapes ATC makes, in one record, parsed once from wherever they are said.

ATC compiles a model's varying dims into a set of static graphs, the *gears*, in one of three ways (a model
takes one): ``--dynamic_batch_size="1,2,4,8"`` (batch sizes: dim 0 of every input), ``--dynamic_image_size=
"224,224;448,448"`` (height and width of NCHW inputs) or ``--dynamic_dims="1,16;1,32"`` (one value per -1
dim of ``--input_shape``, in order, the batch dims among them); without one the model is static. The same
gears are said in five places, and each is read here into one :class:`GearSet`:

- ATC's flags (``ge-plugin atc``, ``ge_plugin.atc.flags``) and GE's ``ge.dynamicDims`` (``ge-plugin migrate``),
  which is the same text: :func:`parse_values`, then ATC's own rules on counts in ATC's words;
- what an OM reports through pyACL (``get_dynamic_batch``, ``get_dynamic_hw``, ``get_input_dynamic_dims``;
  the device layer, and the simulator that answers those calls): :meth:`GearSet.from_acl`;
- a spec and a config.pbtxt, which say them as batch gears, dims gears without the batch and image sizes
  (``batching.gears`` / ``dims_gears`` / ``image_sizes``, the parameters ``gears`` / ``dims_gears`` /
  ``image_sizes``): :meth:`GearSet.compose`, the grid ATC compiles from them;
- a device-time profile's labels: :meth:`GearSet.parse_label`.

One text form: a gear set's text is ATC's (:meth:`GearSet.flag_value`; a config's keys use the same, with
``parse_values`` / ``format_values``), a gear's *label* is its item of that text (``"4"``, ``"1,16,1,16"``,
``"224,224"``, ``"static"``: what the simulator counts and a profile lists), and its *name* the engine's
short form for statistics and metrics (``"4"``, ``"1x16"``: one input's values when every input takes the
same, ``"224x224"``). Which gear runs a batch is the fast path's rule (``fastpath.Planner``), not this
module's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

import attrs

from ge_plugin.errors import GearTextError

#: how ATC compiled the gears: no gears, ``--dynamic_batch_size``, ``--dynamic_image_size``, ``--dynamic_dims``
KINDS = ("static", "batch", "hw", "dims")
#: each kind's ATC flag
FLAGS = {"batch": "dynamic_batch_size", "hw": "dynamic_image_size", "dims": "dynamic_dims"}
#: each ATC flag's kind
FLAG_KINDS = {flag: kind for kind, flag in FLAGS.items()}
#: ATC's gear flags; a model takes at most one of them
GEAR_FLAGS = tuple(FLAGS.values())
#: what each kind's gears are called in messages: a list of them, and that they are missing
KIND_NAMES = {"static": "gears", "batch": "batch gears", "hw": "image sizes", "dims": "dims gears"}
KIND_GEARS = {"static": "gears", "batch": "batch gears", "hw": "image-size gears", "dims": "dims gears"}
#: gears per model (any of the three flags)
MIN_GEARS = 2
MAX_GEARS = 100
#: the largest batch gear
MAX_BATCH = 2048

#: what a value of a dims gear sets: (input name, dim index in the input's full dims)
Slot = tuple[str, int]
#: an input as a gear set fills it: its name and its full dims, -1 where a gear sets the length
Shape = tuple[str, Sequence[int]]


def parse_values(text: str, *, kind: str) -> tuple[tuple[int, ...], ...]:
    """Gears in ATC's text: ``"1,2,4"`` for batch gears (one value each, ``,`` between them), ``"224,224;448,448"``
    or ``"1,16;1,32"`` for the others (``;`` between gears, ``,`` between a gear's values). GearTextError
    names the first rule broken: no gear, an item that is not an integer, a value below 1, an image size
    that is not two values, gears of different widths."""
    if kind == "batch":
        profiles = [[item] for item in text.split(",") if item.strip()]
    else:
        profiles = [p.split(",") for p in text.split(";") if p.strip()]
    if not profiles:
        raise GearTextError("empty", text)
    gears = []
    for profile in profiles:
        values = []
        for item in profile:
            try:
                value = int(item.strip())
            except ValueError:
                raise GearTextError("not_integer", text, item=item.strip()) from None
            if value < 1:
                raise GearTextError("below_one", text, item=item.strip(), value=value)
            values.append(value)
        gears.append(tuple(values))
    if kind == "hw" and any(len(g) != 2 for g in gears):
        raise GearTextError("not_pairs", text)
    widths = sorted({len(g) for g in gears})
    if len(widths) > 1:
        raise GearTextError("widths", text, widths=tuple(widths))
    return tuple(gears)


def format_values(values: Iterable[Sequence[int]], *, kind: str) -> str:
    """ATC's text of ``values`` (the inverse of :func:`parse_values`)."""
    if kind == "batch":
        return ",".join(str(v) for gear in values for v in gear)
    return ";".join(",".join(map(str, gear)) for gear in values)


def dims_slots(inputs: Iterable[Shape]) -> tuple[Slot, ...]:
    """Every -1 dim of ``inputs``, in order: the slots of a dims gear over them."""
    return tuple((name, d) for name, dims in inputs for d, dim in enumerate(dims) if dim < 0)


@attrs.frozen
class GearSet:
    """The gears of one OM, as ATC compiles them.

    ``values`` holds, per gear in ATC's order, what selects it: ``(batch,)``, ``(height, width)``, or one
    value per slot (``--dynamic_dims``: ``slots`` says which dim of which input each sets, batch dims
    included); a static model has no gears (its one shape is its inputs' own).
    """

    kind: str = "static"
    values: tuple[tuple[int, ...], ...] = ()
    slots: tuple[Slot, ...] = ()

    def __attrs_post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"gear kind {self.kind!r}: expected one of {', '.join(KINDS)}")
        if (self.kind == "static") != (not self.values):
            raise ValueError("a static model has no gears, and only a static model")
        width = {"batch": 1, "hw": 2, "dims": len(self.slots)}.get(self.kind, 0)
        wrong = [list(g) for g in self.values if len(g) != width]
        if wrong:
            raise ValueError(f"{KIND_NAMES[self.kind]} of {width} values each, got {wrong[0]}")

    # -- from what says them ---------------------------------------------------------------------------

    @classmethod
    def from_acl(
        cls,
        batch: Mapping[str, Any],
        hw: Optional[Mapping[str, Any]],
        dims: Optional[Sequence[Mapping[str, Any]]],
        inputs: Sequence[Shape],
    ) -> GearSet:
        """The gears an OM reports: ``get_dynamic_batch``'s dict, ``get_dynamic_hw``'s (None: not asked),
        ``get_input_dynamic_dims``' list (None: not asked), over the OM's data ``inputs``. A dims gear comes
        as every dim of every input concatenated, or as the -1 dims only; ValueError for one that fits
        neither."""
        sizes = tuple(int(b) for b in batch.get("batch", ())[: batch.get("batchCount", 0)])
        if sizes:
            return cls("batch", tuple((b,) for b in sizes))
        hw = hw or {}
        pairs = tuple((int(h), int(w)) for h, w in hw.get("hw", ())[: hw.get("hwCount", 0)])
        if pairs:
            return cls("hw", pairs)
        if not dims:
            return cls()
        slots = dims_slots(inputs)
        ranks = [len(shape) for _, shape in inputs]
        starts = [sum(ranks[:k]) for k in range(len(ranks))]
        where = {name: start for (name, _), start in zip(inputs, starts)}
        gears = []
        for gear in dims:
            flat = tuple(int(d) for d in gear["dims"][: gear["dimCount"]])
            if len(flat) == sum(ranks) and len(flat) != len(slots):
                flat = tuple(flat[where[name] + d] for name, d in slots)
            elif len(flat) != len(slots):
                raise ValueError(f"the OM reports a dims gear {list(flat)} that fits no input layout")
            gears.append(flat)
        return cls("dims", tuple(gears), slots)

    @classmethod
    def compose(
        cls,
        *,
        batch: Sequence[int] = (),
        dims: Sequence[Sequence[int]] = (),
        image_sizes: Sequence[Sequence[int]] = (),
        inputs: Sequence[Shape] = (),
        batched: bool = False,
    ) -> GearSet:
        """What ATC compiles from a spec's (or a config's) gears: ``image_sizes`` (the batch then is the OM's
        one fixed batch, not a gear), else ``dims`` (each a value per -1 dim of ``inputs``, without the batch)
        over the batch gears as ``--dynamic_dims``' grid, batch-major, each gear listing every -1 dim in
        input order with each input's batch first; else the batch gears; else static. ``inputs``: names and
        dims without the batch dim, which ``batched`` adds. ValueError for a dims gear of another width than
        the -1 dims of ``inputs``."""
        if image_sizes:
            return cls("hw", tuple((int(h), int(w)) for h, w in image_sizes))
        if dims:
            extra = 1 if batched else 0
            batches: tuple[int | None, ...] = tuple(batch) if batched and batch else (None,)
            slots: list[Slot] = []
            for name, shape in inputs:
                if batches[0] is not None:
                    slots.append((name, 0))
                slots.extend((name, d + extra) for d, dim in enumerate(shape) if dim < 0)
            grid = []
            for b in batches:
                for gear in dims:
                    values = iter(gear)
                    row: list[int] = []
                    for _, shape in inputs:
                        if b is not None:
                            row.append(b)
                        row.extend(next(values, 0) for dim in shape if dim < 0)
                    if len(gear) != sum(1 for _, shape in inputs for dim in shape if dim < 0):
                        raise ValueError(f"a dims gear {list(gear)} does not give every -1 dim one value")
                    grid.append(tuple(row))
            return cls("dims", tuple(grid), tuple(slots))
        if batch:
            return cls("batch", tuple((int(b),) for b in batch))
        return cls()

    # -- what it says --------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.values)

    @property
    def flag(self) -> str | None:
        """ATC's flag for these gears (None: static)."""
        return FLAGS.get(self.kind)

    def flag_value(self) -> str:
        """ATC's text of these gears: ``1,2,4,8``, ``224,224;448,448``, ``1,16,1,16;1,32,1,32``."""
        return format_values(self.values, kind=self.kind)

    def label(self, n: int) -> str:
        """Gear ``n`` as its item of ATC's text (``"4"``, ``"1,16,1,16"``, ``"224,224"``; ``"static"``): what
        the simulator counts an execute under and a device-time profile lists."""
        return label_of(self.values[n]) if self.values else "static"

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(self.label(n) for n in range(len(self.values))) or ("static",)

    def name(self, n: int) -> str:
        """Gear ``n`` as the engine names it in statistics, metrics and messages: ``"4"``, ``"224x224"``, or a
        dims gear's values joined by ``x``, one input's only when every input takes the same (``"1x16"``
        for ids and mask of 1 x 16); ``"static"``."""
        return self.name_of(self.values[n]) if self.values else "static"

    def name_of(self, values: Sequence[int]) -> str:
        if self.kind == "dims":
            groups: dict[str, list[int]] = {}
            for (name, _), value in zip(self.slots, values):
                groups.setdefault(name, []).append(value)
            distinct = {tuple(group) for group in groups.values()}
            if len(distinct) == 1:
                values = distinct.pop()
        return "x".join(map(str, values))

    def describe(self) -> str:
        """``batch gears 1,2,4,8``, ``image sizes 224,224;448,448``, ``dims gears 1,16;1,32``, ``no gears``."""
        if not self.values:
            return "no gears (a static OM)"
        return f"{KIND_NAMES[self.kind]} {';'.join(self.labels)}"

    def against(self, declared: GearSet) -> str:
        """What these (an OM's) gears are, said to a reader who ``declared`` others."""
        if declared.kind != self.kind:
            return f"no {KIND_GEARS[declared.kind]} (a {self.kind} OM)"
        return self.describe()

    def same_gears(self, other: GearSet) -> bool:
        """The same compiled shapes, whatever the order the gears or a dims gear's slots are listed in."""
        return self.kind == other.kind and self._assignments() == other._assignments()

    def _assignments(self) -> frozenset[Any]:
        if self.kind != "dims":
            return frozenset(self.values)
        return frozenset(frozenset(zip(self.slots, values)) for values in self.values)

    # -- gears as shapes -------------------------------------------------------------------------------

    def dims_at(self, values: Sequence[int], inputs: Sequence[Shape]) -> tuple[tuple[int, ...], ...]:
        """Each input's full dims at the gear ``values`` selects: every -1 dim takes the batch (``batch``:
        ATC allows -1 only in dim 0), dims 2 and 3 the height and width (``hw``), or the value of its slot
        (``dims``); a static model's inputs keep their own."""
        out = []
        fill = dict(zip(self.slots, values))
        for name, shape in inputs:
            dims = list(shape)
            for d, dim in enumerate(shape):
                if dim >= 0:
                    continue
                if self.kind == "batch":
                    dims[d] = values[0]
                elif self.kind == "hw" and d in (2, 3):
                    dims[d] = values[d - 2]
                elif self.kind == "dims" and (name, d) in fill:
                    dims[d] = fill[(name, d)]
            out.append(tuple(dims))
        return tuple(out)

    def shapes(self, inputs: Sequence[Shape]) -> tuple[tuple[tuple[int, ...], ...], ...]:
        """Per gear, each input's full dims (a static model: its one shape)."""
        if not self.values:
            return (tuple(tuple(shape) for _, shape in inputs),)
        return tuple(self.dims_at(values, inputs) for values in self.values)

    def values_at(self, slots: Sequence[Slot]) -> tuple[tuple[int, ...], ...]:
        """Per gear, the values of ``slots`` (a dims gear set); KeyError for a slot no gear sets."""
        return tuple(tuple(dict(zip(self.slots, values))[slot] for slot in slots) for values in self.values)

    # -- labels ----------------------------------------------------------------------------------------

    def parse_label(self, text: str) -> tuple[int, ...]:
        """The values of the gear ``text`` names, in this gear set's layout (the gear need not be one of this
        set: a profile may have measured others): its label (``"1,16,1,16"``) or its name (``"1x16"``).
        ValueError saying what a label of this model looks like."""
        width = {"batch": 1, "hw": 2, "dims": len(self.slots)}.get(self.kind, 0)
        label = text.replace(" ", "")
        if width == 0:
            if label != "static":
                raise ValueError(f"gear {text!r}: this model is static; its one gear is 'static'")
            return ()
        parts = label.replace("x", ",").split(",")
        if all(p.isascii() and p.isdigit() and int(p) >= 1 for p in parts):
            values = tuple(int(p) for p in parts)
            if len(values) == width:
                return values
            if len(values) == self._short_width():
                return self._expand(values)
        raise ValueError(f"gear {text!r} is not a gear of this model: a label is {self._label_form()}")

    def _short_width(self) -> int:
        """How many values a dims gear's short name has when every input takes the same (0: never)."""
        if self.kind != "dims":
            return 0
        counts: dict[str, int] = {}
        for name, _ in self.slots:
            counts[name] = counts.get(name, 0) + 1
        widths = set(counts.values())
        return widths.pop() if len(widths) == 1 and len(counts) > 1 else 0

    def _expand(self, short: Sequence[int]) -> tuple[int, ...]:
        """A short name's values (one input's) as every slot's: each input takes the same."""
        seen: dict[str, int] = {}
        out = []
        for name, _ in self.slots:
            out.append(short[seen.get(name, 0)])
            seen[name] = seen.get(name, 0) + 1
        return tuple(out)

    def _label_form(self) -> str:
        if self.kind == "batch":
            return "a batch size (as '4')"
        if self.kind == "hw":
            return "height,width (as '224,224')"
        example = self.values[0] if self.values else tuple(range(1, len(self.slots) + 1))
        batch = "the batch and " if any(d == 0 for _, d in self.slots) else ""
        form = f"{len(self.slots)} values, {batch}each -1 dim of every input (as {label_of(example)!r})"
        if self._short_width():
            form += f", or one input's as the engine names the gear (as {self.name_of(example)!r})"
        return form


def label_of(values: Sequence[int]) -> str:
    """A gear's label: its values as an item of ATC's text."""
    return ",".join(map(str, values)) or "static"
