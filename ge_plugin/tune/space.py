"""What a sweep may change in a spec, and in which order each knob's values are tried.

A configuration is the value of every knob the spec controls: batch gears, the preferred batch sizes, the
queue delay, instances per device, streams per instance, and the sequence (``dims_gears``) or image gears.
Each knob has a *ladder*: its values in an order where a step is a small change (one more instance, twice
the queue delay, one more batch gear), so that a search can walk a knob one step at a time from the best
configuration so far and stop a direction once a step makes things worse. Values outside the spec's rules
or ATC's (two to 100 gears, the 100-gear grid, a device's 1024 streams) are left on the ladder: the spec
validator refuses them when the candidate is written, and the search records why.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Union

import attrs

from ge_plugin.errors import GearTextError
from ge_plugin.gears import parse_values
from ge_plugin.spec.model import ModelSpec

Gears = tuple[int, ...]
DimsGears = tuple[tuple[int, ...], ...]
Value = Union[int, str, Gears, DimsGears]

#: knob names, in the order a search pass walks them: the cheap ones (no new OM) first
KNOBS = (
    "instances",
    "streams",
    "max_queue_delay_us",
    "preferred_batch_sizes",
    "batch_gears",
    "dims_gears",
    "image_sizes",
)
#: what each knob is in the spec, for messages and the written spec's comments
SPEC_KEYS = {
    "instances": "placement.instances_per_device",
    "streams": "placement.streams_per_instance",
    "max_queue_delay_us": "batching.max_queue_delay_us",
    "preferred_batch_sizes": "batching.preferred_batch_sizes",
    "batch_gears": "batching.gears",
    "dims_gears": "dims_gears",
    "image_sizes": "image_sizes",
}
#: preferred_batch_sizes policies: the largest gear only (Triton's default as rendered), every gear, or the
#: input spec's own list (kept to the gears a candidate has)
LARGEST, EVERY, AS_GIVEN = "largest", "every gear", "as given"

DEFAULT_INSTANCES = (1, 2, 3, 4)
DEFAULT_STREAMS = (1, 2, 3)
DEFAULT_DELAYS_US = (0, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000)
#: the largest batch a default batch-gear ladder goes to, as a multiple of the spec's own largest gear
BATCH_HEADROOM = 4


@attrs.frozen(order=False)
class Config:
    """One point of the space: every knob's value. Hashable, so a search measures each one once."""

    instances: int
    streams: int
    max_queue_delay_us: int
    preferred_batch_sizes: str
    batch_gears: Gears
    dims_gears: DimsGears
    image_sizes: DimsGears

    def get(self, knob: str) -> Any:
        return getattr(self, knob)

    def with_(self, knob: str, value: Any) -> Config:
        return attrs.evolve(self, **{knob: value})

    def preferred_list(self, spec: ModelSpec) -> Gears | None:
        """The preferred_batch_sizes this configuration writes (None: leave the spec's key as Triton's
        default, the largest gear)."""
        gears = self.batch_gears
        if not gears:
            return None
        if self.preferred_batch_sizes == EVERY:
            return gears
        if self.preferred_batch_sizes == AS_GIVEN and spec.batching is not None:
            kept = tuple(b for b in spec.batching.preferred if b in gears)
            return kept or gears[-1:]
        given = spec.batching is not None and spec.batching.preferred_batch_sizes is not None
        return gears[-1:] if given else None

    def describe(self, knobs: Sequence[str] = KNOBS) -> str:
        return ", ".join(f"{k}={show(self.get(k))}" for k in knobs if self.get(k) != ())


def show(value: Any) -> str:
    if isinstance(value, tuple):
        if value and isinstance(value[0], tuple):
            return "[" + " ".join("x".join(map(str, g)) for g in value) + "]"
        return "[" + ",".join(map(str, value)) + "]"
    return str(value)


def start_config(spec: ModelSpec) -> Config:
    """The input spec's own configuration: where a search starts."""
    batching = spec.batching
    return Config(
        instances=spec.placement.instances_per_device,
        streams=spec.placement.streams_per_instance,
        max_queue_delay_us=batching.max_queue_delay_us if batching else 0,
        preferred_batch_sizes=AS_GIVEN
        if batching and batching.preferred_batch_sizes is not None
        else LARGEST,
        batch_gears=spec.gears,
        dims_gears=spec.dims_gear_values,
        image_sizes=tuple(tuple(s) for s in spec.image_sizes),
    )


@attrs.frozen
class Space:
    """Each knob's ladder, and the configuration a search starts from (on every ladder)."""

    ladders: Mapping[str, tuple[Any, ...]]
    start: Config

    @property
    def varying(self) -> tuple[str, ...]:
        return tuple(k for k in KNOBS if len(self.ladders[k]) > 1)

    def step(self, config: Config, knob: str, direction: int) -> Config | None:
        """``config`` with ``knob`` one rung up (+1) or down (-1) its ladder; None past either end."""
        ladder = self.ladders[knob]
        index = ladder.index(config.get(knob)) + direction
        if not 0 <= index < len(ladder):
            return None
        return config.with_(knob, ladder[index])

    def size(self) -> int:
        n = 1
        for ladder in self.ladders.values():
            n *= len(ladder)
        return n


def build_space(
    spec: ModelSpec,
    *,
    knobs: Sequence[str] = KNOBS,
    overrides: Mapping[str, Sequence[Any]] | None = None,
    pad_ok: bool | None = None,
) -> Space:
    """The ladders for ``spec``: each knob in ``knobs`` that the spec has gets the default ladder or the
    values given in ``overrides`` (ordered as given, the spec's own value added); the others stay fixed.

    ``pad_ok``: whether requests may be padded up to a coarser dims gear (every input with a -1 dim has
    ``pad: true``). Without it, removing a dims gear would refuse requests of that length, so the default
    dims ladder only adds gears."""
    overrides = dict(overrides or {})
    start = start_config(spec)
    if pad_ok is None:
        pad_ok = all(i.pad for i in spec.inputs if -1 in i.dims)
    defaults: dict[str, tuple[Any, ...]] = {
        "instances": DEFAULT_INSTANCES,
        "streams": DEFAULT_STREAMS,
        "max_queue_delay_us": DEFAULT_DELAYS_US,
        "preferred_batch_sizes": (LARGEST, EVERY)
        + ((AS_GIVEN,) if start.preferred_batch_sizes == AS_GIVEN else ()),
        "batch_gears": batch_gear_ladder(spec),
        "dims_gears": dims_gear_ladder(spec.dims_gear_values, pad_ok=pad_ok),
        "image_sizes": (start.image_sizes,),
    }
    has = {
        "instances": True,
        "streams": True,
        "max_queue_delay_us": spec.batching is not None,
        "preferred_batch_sizes": spec.batching is not None and len(spec.gears) > 1,
        "batch_gears": spec.batching is not None,
        "dims_gears": bool(spec.dims_gears),
        "image_sizes": bool(spec.image_sizes),
    }
    ladders: dict[str, tuple[Any, ...]] = {}
    for knob in KNOBS:
        own = start.get(knob)
        if knob not in knobs or not has[knob]:
            ladders[knob] = (own,)
            continue
        values = tuple(overrides[knob]) if knob in overrides else defaults[knob]
        ladders[knob] = _with(values, own, knob)
    return Space(ladders, start)


def _with(values: Sequence[Any], own: Any, knob: str) -> tuple[Any, ...]:
    """``values`` without repeats and with the spec's own value in its place (sorted ladders) or first."""
    unique = tuple(dict.fromkeys(values))
    if own in unique:
        return unique
    if knob in ("instances", "streams", "max_queue_delay_us"):
        return tuple(sorted((*unique, own)))
    if knob in ("batch_gears", "dims_gears", "image_sizes"):
        return tuple(sorted((*unique, own), key=_gear_order))
    return (own, *unique)


def _gear_order(gears: tuple[Any, ...]) -> tuple[Any, ...]:
    flat = [g if isinstance(g, int) else max(g) for g in gears]
    return (max(flat, default=0), len(gears), gears)


def batch_gear_ladder(spec: ModelSpec) -> tuple[Gears, ...]:
    """Powers of two from 1 up to each largest batch from 2 to ``BATCH_HEADROOM`` × the spec's largest
    gear (at most 2048), with the spec's own set in its place; beside image sizes, the one fixed batch."""
    if spec.batching is None:
        return ((),)
    top = min(2048, BATCH_HEADROOM * spec.max_batch_size)
    tops = []
    b = 2
    while b <= top:
        tops.append(b)
        b *= 2
    if spec.image_sizes:
        return tuple(sorted({(t,) for t in tops} | {spec.gears}, key=_gear_order))
    sets = {tuple(2**k for k in range(t.bit_length())) for t in tops}
    return tuple(sorted(sets | {spec.gears}, key=_gear_order))


def dims_gear_ladder(gears: DimsGears, *, pad_ok: bool) -> tuple[DimsGears, ...]:
    """From sparse to dense around ``gears`` (ascending): halvings that keep every other gear and always the
    largest (when requests may be padded), the gears as given, and the gears with a midpoint between each
    neighbouring pair."""
    if not gears:
        return ((),)
    rungs: list[DimsGears] = [gears]
    if pad_ok:
        current = gears
        while len(current) > 2:
            current = current[::-1][::2][::-1]
            rungs.insert(0, current)
    dense = [gears[0]]
    for low, high in itertools.pairwise(gears):
        mid = tuple((a + b) // 2 for a, b in zip(low, high))
        if all(lo < m < hi for lo, m, hi in zip(low, mid, high)):
            dense.append(mid)
        dense.append(high)
    if len(dense) > len(gears):
        rungs.append(tuple(dense))
    return tuple(rungs)


def parse_gear_sets(text: str, *, pairs: bool) -> tuple[tuple[Any, ...], ...]:
    """``--batch-gears 1,4,8;1,2,4,8,16`` or ``--dims-gears 16,64;16,32,64`` (``pairs``: ``224x224,448x448``
    per set, also for multi-value dims gears; each gear as the engine names it): ValueError naming the item
    that is not one. Each gear is read by ``ge_plugin.gears.parse_values``."""
    sets = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        items: list[Any] = []
        for item in (i.strip() for i in part.split(",")):
            try:
                ((*values,),) = parse_values(item.replace("x", ",") if pairs else item, kind="dims")
            except (GearTextError, ValueError):
                raise ValueError(
                    f"{item!r} in {part!r} is not a gear (integers >= 1{', joined by x' if pairs else ''})"
                ) from None
            items.append(tuple(values) if pairs else values[0])
        sets.append(tuple(items))
    if not sets:
        raise ValueError("no gear set given")
    return tuple(sets)


def parse_ints(text: str, *, minimum: int) -> tuple[int, ...]:
    """``1,2,4``; ValueError naming the item below ``minimum`` or not an integer."""
    values = []
    for item in (i.strip() for i in text.split(",")):
        if not item.isdigit() or int(item) < minimum:
            raise ValueError(f"{item!r} is not an integer >= {minimum}")
        values.append(int(item))
    return tuple(values)
