"""A Planner's constant tables, worked out once from the records of a model, for both fast paths.

``ge_plugin._fastpath`` (compiled) and ``ge_plugin._fastpath_py`` (its pure-Python twin) each build a
Planner from the same records (the model's inputs, outputs and gears) and check them with the same words;
what is worked out of them once per model (ranks, which dims are rows, each gear's bytes per tensor) is here,
so that neither implementation imports the other. Each passes its own type checks (``TypeChecks``): the type
names and casts are each implementation's own, as its gather and scatter use them. Nothing here runs per
request.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, Protocol

from ge_plugin import _fastpath_messages as messages

#: numpy's own limit on the number of dims, which the compiled module uses for its fixed-size arrays
MAX_DIMS = 32


class PlannedInput(Protocol):
    """What the planner reads of an input (``engine.tensors.BoundTensor`` is one): its request
    validation and the OM's type for it."""

    @property
    def spec(self) -> Any: ...
    @property
    def om_type(self) -> str: ...


class PlannedOutput(Protocol):
    """What the planner reads of an output (``engine.tensors.BoundTensor`` is one): its config name, its
    OM index, the config's and the OM's types, and the dims that follow an input's (output dim, input, input
    dim)."""

    @property
    def name(self) -> str: ...
    @property
    def om_index(self) -> int: ...
    @property
    def type(self) -> str: ...
    @property
    def om_type(self) -> str: ...
    @property
    def ties(self) -> Sequence[tuple[int, int, int]]: ...


class PlannedGear(Protocol):
    """What the planner reads of a gear (``engine.gear_table.Gear`` is one): the OM's input dims per input and
    output dims per OM output at that gear."""

    @property
    def input_dims(self) -> Sequence[Sequence[int]]: ...
    @property
    def output_dims(self) -> Sequence[Sequence[int]]: ...


class TypeChecks(Protocol):
    """An implementation's own words on type names: each raises ValueError saying what does not fit."""

    def itemsize(self, type_name: object, what: str) -> int: ...
    def cast(self, src_type: str, dst_type: str, what: str) -> None: ...
    def pad(self, value: float, type_name: str, what: str) -> None: ...


def nbytes(shape: Sequence[int], itemsize: int) -> int:
    total = itemsize
    for d in shape:
        total *= d
    return total


def dims_of(value: object, what: str) -> tuple[int, ...]:
    dims = tuple(operator.index(d) for d in value)  # type: ignore[attr-defined]
    if not dims or len(dims) > MAX_DIMS or any(d < 1 for d in dims):
        raise ValueError(f"{what} {list(dims)}: 1 to {MAX_DIMS} dims, each at least 1")
    return dims


class GearTables:
    """What the planner keeps of one gear: dims, rows, and bytes per tensor."""

    __slots__ = ("flat", "in_bytes", "input_dims", "out_bytes", "out_rows", "output_dims", "rows")

    def __init__(
        self,
        flat: tuple[int, ...],
        input_dims: tuple[tuple[int, ...], ...],
        output_dims: tuple[tuple[int, ...], ...],
        rows: int,
        in_bytes: list[int],
        out_bytes: list[int],
        out_rows: list[bool],
    ) -> None:
        self.flat = flat
        self.input_dims = input_dims
        self.output_dims = output_dims
        self.rows = rows
        self.in_bytes = in_bytes
        self.out_bytes = out_bytes
        self.out_rows = out_rows


class PlannerTables:
    """A Planner's constant tables, checked once (the compiled Planner builds its C arrays from them).

    ``gears`` keeps the records as given, for what a launch copies (``Planner.launch_args``)."""

    def __init__(
        self,
        inputs: Sequence[PlannedInput],
        outputs: Sequence[PlannedOutput],
        gears: Sequence[PlannedGear],
        batched: bool,
        exact: Sequence[bool],
        pad_value: float,
        spec_class: type,
        types: TypeChecks,
    ) -> None:
        inputs = list(inputs)
        if not inputs:
            raise ValueError("Planner: a model has at least one input")
        specs = [tensor.spec for tensor in inputs]
        for k, spec in enumerate(specs):
            if not isinstance(spec, spec_class):
                raise ValueError(f"Planner: inputs[{k}].spec is {type(spec).__name__}, not a TensorSpec")
        om = [str(tensor.om_type) for tensor in inputs]
        for spec, om_type in zip(specs, om):
            types.itemsize(om_type, f"Planner: input {spec.name!r} OM type")
            types.cast(spec.type, om_type, f"Planner: input {spec.name!r}")
        self.specs = specs
        self.om_types = om
        self.pad = messages.number(pad_value, "Planner: pad_value")
        for om_type in om:
            types.pad(self.pad, om_type, "Planner: pad_value")
        self.batched = bool(batched)
        self.ranks = [len(spec.dims) for spec in specs]
        self.width = sum(self.ranks)
        flags = [bool(e) for e in exact]
        if flags and len(flags) != self.width:
            raise ValueError(f"Planner: exact lists {len(flags)} dims; the inputs have {self.width}")
        self.exact = flags or [False] * self.width
        self.rows_at = [self.batched and d == 0 for rank in self.ranks for d in range(rank)]
        self.outputs: list[tuple[str, int, str, str, tuple[tuple[int, int, int], ...]]] = []
        for output in outputs:
            name, out_type, out_om_type = output.name, output.type, output.om_type
            types.itemsize(out_type, f"Planner: output {name!r} type")
            types.itemsize(out_om_type, f"Planner: output {name!r} OM type")
            types.cast(out_om_type, out_type, f"Planner: output {name!r}")
            tied = tuple((operator.index(a), operator.index(b), operator.index(c)) for a, b, c in output.ties)
            self.outputs.append((str(name), operator.index(output.om_index), out_type, out_om_type, tied))
        self.names = [o[0] for o in self.outputs]
        self.every = list(range(len(self.outputs)))
        self.every_index = [o[1] for o in self.outputs]
        self.records = list(gears)
        self.gears = [self._gear(g, k, types) for k, g in enumerate(self.records)]
        if not self.gears:
            raise ValueError("Planner: a model has at least one gear")

    def _gear(self, gear: PlannedGear, position: int, types: TypeChecks) -> GearTables:
        where = f"Planner: gear {position}"
        input_dims = tuple(dims_of(d, f"{where} input {k}") for k, d in enumerate(gear.input_dims))
        output_dims = tuple(dims_of(d, f"{where} output {j}") for j, d in enumerate(gear.output_dims))
        if [len(d) for d in input_dims] != self.ranks:
            raise ValueError(
                f"{where}: input ranks {[len(d) for d in input_dims]}, the specs have {self.ranks}"
            )
        rows = input_dims[0][0]
        in_bytes = [nbytes(d, types.itemsize(t, where)) for d, t in zip(input_dims, self.om_types)]
        out_bytes, out_rows = [], []
        for name, j, _, om_type, ties in self.outputs:
            if not 0 <= j < len(output_dims):
                raise ValueError(
                    f"{where}: output {name!r} is OM output {j}, the gear has {len(output_dims)}"
                )
            dims = output_dims[j]
            for out_d, in_k, in_d in ties:
                if not (
                    0 <= out_d < len(dims) and 0 <= in_k < len(self.ranks) and 0 <= in_d < self.ranks[in_k]
                ):
                    raise ValueError(f"{where}: output {name!r} tie {(out_d, in_k, in_d)} names no dim")
            out_bytes.append(nbytes(dims, types.itemsize(om_type, where)))
            out_rows.append(dims[0] == rows)
        flat = tuple(d for dims in input_dims for d in dims)
        return GearTables(flat, input_dims, output_dims, rows, in_bytes, out_bytes, out_rows)
