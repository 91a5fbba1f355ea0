"""Requests to chunks: which requests run together, on which gear, and what each launch copies.

The planner knows the model's tensors and gears and nothing of a device: it validates a window of requests,
groups them into chunks (one execute each), gathers a chunk into staging memory it is handed and splits an
execute's outputs back to the requests. The work per request is the compiled fast path's
(``fastpath.Planner``, which this is, built from the engine's own records: the bound tensors and the gears);
this adds what the engine knows once (warm-up launches, bytes per gear, a failed chunk taken back out of
its staging, the refusal a request that no gear takes gets), so that it can be built and tested from plain
records.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import numpy.typing as npt

from ge_plugin import dtypes
from ge_plugin import fastpath as fp
from ge_plugin.engine.gear_table import Gear, GearTable
from ge_plugin.engine.tensors import BoundTensor

#: one request of a chunk: its place in the chunk, and its arrays in the OM's input order
Entry = tuple[int, Sequence[npt.NDArray[Any]]]

#: why padding along a gear dim is the config's decision (in the refusal a request gets)
PADDING_IS_OPT_IN = (
    "ge-plugin pads a dim that gears set only for inputs listed in parameters.pad_inputs (a spec's pad: true): "
    "zero padding changes the answer of a model that does not mask it"
)


class Planner(fp.Planner):
    """The model's tensors (``inputs`` in the OM's order, each with its ``spec``; ``outputs`` in the
    config's) on its ``gears``; ``exact`` marks, per flat dim, the dims a request must match exactly.

    ``plan``, ``chunk``, ``extend``, ``stage``, ``launch_args``, ``count``, ``split`` and ``tally`` are the
    compiled planner's own (``fastpath.Planner``): the request path calls them with no Python layer in
    between, and ``launch_args`` hands back the chunk's ``Gear`` with what its copies move."""

    def __init__(
        self,
        inputs: Sequence[BoundTensor],
        outputs: Sequence[BoundTensor],
        gears: GearTable,
        *,
        batched: bool,
        exact: Sequence[bool],
        pad_value: float = 0,
    ):
        specs = [tensor.spec for tensor in inputs]
        if any(spec is None for spec in specs):
            missing = [tensor.name for tensor in inputs if tensor.spec is None]
            raise ValueError(f"inputs {missing} have no spec: the planner validates every input")
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.gears = gears
        self.batched = batched
        self.exact = tuple(exact)
        super().__init__(
            self.inputs,
            self.outputs,
            gears.gears,
            batched=batched,
            exact=self.exact,
            pad_value=pad_value,
            refusal=self.refusal,
        )

    def launch_of(self, position: int) -> tuple[Gear, list[int], list[int], list[int]]:
        """What a launch of the gear at ``position`` copies when every output is wanted at its full size
        (warm-up runs that): the gear, each input's bytes, each output's OM index and bytes."""
        return (
            self.gears.gears[position],
            [tensor.nbytes[position] for tensor in self.inputs],
            [tensor.om_index for tensor in self.outputs],
            [tensor.nbytes[position] for tensor in self.outputs],
        )

    def h2d_bytes(self) -> list[int]:
        """Per gear (in the table's order), the bytes its launch copies to the device."""
        return [sum(tensor.nbytes[g] for tensor in self.inputs) for g in range(len(self.gears))]

    def unstage(self, chunk: fp.Chunk, staging: Sequence[npt.NDArray[Any]]) -> list[Entry]:
        """Each request of a staged ``chunk`` (by its place in the chunk) as copies of its rows of
        ``staging`` (each input's bytes, as the chunk was staged), in the OM's types: what a failed execute
        runs again with once the request memory may be gone."""
        gear = self.gears.gears[chunk.gear]
        wholes = [
            _typed(buffer, dims, tensor.om_type)
            for buffer, dims, tensor in zip(staging, gear.input_dims, self.inputs)
        ]
        entries: list[Entry] = []
        row = 0
        for member, shapes in enumerate(chunk.shapes):
            arrays = [
                whole[(slice(row, row + shape[0]), *(slice(0, d) for d in shape[1:]))].copy()
                for whole, shape in zip(wholes, shapes)
            ]
            entries.append((member, arrays))
            row += shapes[0][0]
        return entries

    def refusal(self, arrays: Sequence[npt.NDArray[Any]]) -> str:
        """Why no gear takes a request that passed validation: a dim it must match exactly that no gear has
        (with the lengths the gears take there), else the shapes against the gears."""
        shapes = ", ".join(f"{tensor.name} {list(a.shape)}" for tensor, a in zip(self.inputs, arrays))
        gears = self.gears
        first = 0
        for k, (tensor, array) in enumerate(zip(self.inputs, arrays)):
            exact = [d for d in range(array.ndim) if self.exact[first + d]]
            first += array.ndim
            if not exact:
                continue
            mine = tuple(array.shape[d] for d in exact)
            taken = sorted({tuple(g.input_dims[k][d] for d in exact) for g in gears.gears})
            if mine in taken:
                continue
            if gears.mode == "hw":
                return (
                    f"input {tensor.name!r} {list(array.shape)}: its height x width {mine[0]}x{mine[1]} is not "
                    f"one of the model's image sizes ({', '.join(f'{h}x{w}' for h, w in taken)}); resize the "
                    f"image to one of them. {PADDING_IS_OPT_IN}, such as a CNN near an image's border"
                )
            extra = 1 if self.batched else 0
            dims = ", ".join(str(d - extra) for d in exact)
            where = f"dims {dims} are" if len(exact) > 1 else f"dim {dims} is"
            return (
                f"input {tensor.name!r} {list(array.shape)}: {where} {'x'.join(map(str, mine))}, which no gear "
                f"of the model takes exactly (its gears take {', '.join('x'.join(map(str, t)) for t in taken)}). "
                f"{PADDING_IS_OPT_IN}"
            )
        labels = "; ".join(g.label for g in gears.gears)
        return f"no gear of the model fits this request ({shapes}); the model's gears: {labels}"


def _typed(staging: npt.NDArray[Any], dims: Sequence[int], type_name: str) -> npt.NDArray[Any]:
    """The head of a staging buffer's bytes as a ``dims`` array of ``type_name``: a view, no copy."""
    dtype = dtypes.by_name(type_name).numpy
    return staging[: math.prod(dims) * dtype.itemsize].view(dtype).reshape(tuple(dims))


def gear_fit(gears: Sequence[Sequence[int]], exact: Sequence[bool]) -> Callable[[Sequence[int]], int | None]:
    """The fast path's gear-fit rule for a caller with no OM (tune checks requests against a candidate's
    gears): ``gears`` are the values each gear gives a request's variable dims (one tuple per gear, the same
    width as a request's ``need``), ``exact`` marks the dims a request must match rather than be padded to.
    The returned function gives the position of the first gear that fits ``need``, or None; it is the
    compiled planner's own ``choose``, so that the rule exists once per language."""
    width = len(exact)
    spec = fp.TensorSpec("dims", "uint8", (-1,) * width, (max(max(g) for g in gears),) * width, batched=False)
    planner = fp.Planner(
        [SimpleNamespace(spec=spec, om_type="uint8")],
        [],
        [SimpleNamespace(input_dims=(tuple(gear),), output_dims=()) for gear in gears],
        batched=False,
        exact=exact,
    )
    return planner.choose
