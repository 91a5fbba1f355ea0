"""The Planner: a window of requests validated, grouped into chunks on the cheapest gear, gathered into
staging and answered, in one compiled call each. On random models (batch, image-size and dims gears, inputs
padded or matched exactly, casts including bf16, output dims tied to inputs) and random windows (bad requests
among good ones, requested-output subsets), the compiled module and the twin agree on every chunk, every
refusal and its message, every staged byte and every answer (its bytes, and whether it is a view of the
staging); and the plan keeps the planner's own promises whichever implementation makes it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ge_plugin.errors import RequestError

NUMPY = {
    "bool": np.bool_,
    "uint8": np.uint8,
    "int32": np.int32,
    "int64": np.int64,
    "fp16": np.float16,
    "fp32": np.float32,
    "bf16": np.uint16,
}
#: (config type, OM type): what a request brings and what the OM takes, or the other way round for outputs
PAIRS = [(t, t) for t in NUMPY] + [
    ("fp32", "fp16"),
    ("fp16", "fp32"),
    ("fp32", "bf16"),
    ("bf16", "fp32"),
    ("bf16", "fp16"),
    ("int64", "int32"),
    ("int32", "int64"),
]
#: request validation's limit for a dim a gear must match exactly (as the engine's binding sets it)
EXACT_LIMIT = 2**31 - 1

PLANNER_SETTINGS = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@dataclasses.dataclass(frozen=True)
class Input:
    """An input as the planner reads it (the engine's ``BoundTensor`` is one)."""

    spec: Any
    om_type: str


@dataclasses.dataclass(frozen=True)
class Output:
    """An output as the planner reads it (the engine's ``BoundTensor`` is one)."""

    name: str
    om_index: int
    type: str
    om_type: str
    ties: tuple[tuple[int, int, int], ...] = ()


@dataclasses.dataclass(frozen=True)
class GearDims:
    """A gear as the planner reads it (the engine's ``Gear`` is one)."""

    input_dims: Any
    output_dims: Any


def planner_of(
    fp: ModuleType, specs: list, om_types: list, gears: list, outputs: list, **options: Any
) -> Any:
    """A Planner of these specs and OM types (one input each), gears ((input dims, output dims) each) and
    outputs ((name, OM index, type, OM type, ties) each), handed over as records, as the engine does."""
    return fp.Planner(
        [Input(spec, om_type) for spec, om_type in zip(specs, om_types, strict=True)],
        [Output(*output) for output in outputs],
        [GearDims(*gear) for gear in gears],
        **options,
    )


@dataclasses.dataclass
class Model:
    """Everything a Planner is built from, as plain data, so that each implementation builds its own."""

    batched: bool
    inputs: list[tuple[str, str, str, tuple[int, ...], tuple[int, ...]]]  # name, type, OM type, dims, limits
    gears: list[tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]]
    exact: list[bool]
    outputs: list[tuple[str, int, str, str, tuple[tuple[int, int, int], ...]]]
    pad: float

    def planner(self, fp: ModuleType, refusal: Callable | None = None) -> Any:
        specs = [
            fp.TensorSpec(name, type_, dims, limits, batched=self.batched)
            for name, type_, _, dims, limits in self.inputs
        ]
        return planner_of(
            fp,
            specs,
            [om for _, _, om, _, _ in self.inputs],
            self.gears,
            self.outputs,
            batched=self.batched,
            exact=self.exact,
            pad_value=self.pad,
            refusal=refusal,
        )

    def staging_in(self) -> list[np.ndarray]:
        """One buffer per input, as large as its largest gear, never written before (0xAB)."""
        sizes = [
            max(int(np.prod(g[0][k])) for g in self.gears) * np.dtype(NUMPY[om]).itemsize
            for k, (_, _, om, _, _) in enumerate(self.inputs)
        ]
        return [np.full(size, 0xAB, np.uint8) for size in sizes]


def random_data(rng: np.random.Generator, shape: tuple[int, ...], type_name: str, om_type: str) -> np.ndarray:
    """Random values of a type: floats as raw bit patterns (NaNs, infinities and subnormals turn up), int64
    inside int32's range when an int32 OM takes it."""
    dtype = np.dtype(NUMPY[type_name])
    if type_name == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if type_name == "int64" and om_type == "int32":
        return rng.integers(-(2**31), 2**31 - 1, size=shape, dtype=np.int64)
    return np.frombuffer(rng.bytes(int(np.prod(shape)) * dtype.itemsize), dtype).reshape(shape).copy()


@st.composite
def models(draw: Callable) -> Model:
    """A model the way an OM and its config come: batch gears (rows add up), an image-size OM (a fixed batch,
    height and width set by the gear), or an unbatched dims-gear OM; every dim a gear sets is padded or must
    match exactly; outputs in any config order, some dims tied to an input's."""
    kind = draw(st.sampled_from(["batch", "image", "dims"]))
    batched = kind != "dims"
    n_in = 1 if kind == "image" else draw(st.integers(1, 2))
    n_gears = draw(st.integers(1, 4))
    fixed_rows = draw(st.sampled_from([2, 4]))
    rows = sorted(draw(st.sets(st.integers(1, 8), min_size=n_gears, max_size=n_gears)))
    ranks = [4] if kind == "image" else [draw(st.integers(1, 3)) for _ in range(n_in)]
    gear_dims: list[list[list[int]]] = [[] for _ in range(n_gears)]
    spec_dims: list[list[int]] = []
    dynamic: list[list[bool]] = []
    for k, rank in enumerate(ranks):
        spec, dyn = [], []
        for d in range(rank):
            if d == 0 and kind == "batch":
                values, is_dynamic = rows, True
            elif d == 0:  # an image-size OM's one batch (requests bring up to that many rows), or unbatched
                values, is_dynamic = [fixed_rows] * n_gears, batched
            elif kind == "image" and d == 1:
                values, is_dynamic = [3] * n_gears, False
            elif kind == "image" or draw(st.booleans()):  # lengths from a few, as gear lists are
                values, is_dynamic = [draw(st.sampled_from([2, 3, 5])) for _ in range(n_gears)], True
            else:
                fixed = draw(st.integers(1, 4))
                values, is_dynamic = [fixed] * n_gears, False
            for g in range(n_gears):
                if d == 0:
                    gear_dims[g].append([])
                gear_dims[g][k].append(values[g])
            spec.append(-1 if is_dynamic else values[0])
            dyn.append(is_dynamic)
        spec_dims.append(spec)
        dynamic.append(dyn)
    if n_gears > 1 and draw(st.booleans()):  # a last gear as large as the others together, as gear grids have
        for k, rank in enumerate(ranks):
            for d in range(rank):
                gear_dims[-1][k][d] = max(gear_dims[g][k][d] for g in range(n_gears))
    exact = [
        is_dynamic and not (d == 0 and batched) and draw(st.booleans())
        for dyn in dynamic
        for d, is_dynamic in enumerate(dyn)
    ]
    inputs = []
    flat_at = 0
    for k, spec in enumerate(spec_dims):
        type_, om = draw(st.sampled_from(PAIRS))
        limits = []
        for d, dim in enumerate(spec):
            if dim != -1:
                limits.append(dim)
            elif exact[flat_at + d]:
                limits.append(EXACT_LIMIT)
            else:
                limits.append(max(gear_dims[g][k][d] for g in range(n_gears)))
        flat_at += len(spec)
        inputs.append((f"in{k}", type_, om, tuple(spec), tuple(limits)))
    # OM outputs: dim 0 follows the gear's rows or is fixed, other dims follow an input dim, are fixed, or
    # change with the gear on their own
    n_om_out = draw(st.integers(1, 3))
    om_out_dims: list[list[tuple[int, ...]]] = [[] for _ in range(n_gears)]
    followed: list[dict[int, tuple[int, int]]] = []
    for _ in range(n_om_out):
        rank = draw(st.integers(1, 3))
        per_dim = []
        follows: dict[int, tuple[int, int]] = {}
        for d in range(rank):
            # a batched model's outputs carry the batch rows in dim 0 (as its config says)
            choice = (
                "rows" if d == 0 and batched else draw(st.sampled_from(["input", "input", "fixed", "gear"]))
            )
            if choice == "rows" and batched:
                per_dim.append([gear_dims[g][0][0] for g in range(n_gears)])
            elif choice == "input":
                k = draw(st.integers(0, n_in - 1))
                d_in = draw(st.integers(0, ranks[k] - 1))
                if d == 0 and batched:
                    d_in = 0
                per_dim.append([gear_dims[g][k][d_in] for g in range(n_gears)])
                follows[d] = (k, d_in)
            elif choice == "gear":
                per_dim.append([draw(st.integers(1, 4)) for _ in range(n_gears)])
            else:
                fixed = draw(st.integers(1, 4))
                per_dim.append([fixed] * n_gears)
        for g in range(n_gears):
            om_out_dims[g].append(tuple(values[g] for values in per_dim))
        followed.append(follows)
    order = draw(st.permutations(range(n_om_out)))
    outputs = []
    for position, j in enumerate(order[: draw(st.integers(1, n_om_out))]):
        type_, om = draw(st.sampled_from(PAIRS))
        ties = tuple(
            (d, k, d_in)
            for d, (k, d_in) in followed[j].items()
            if not (d == 0 and batched) and draw(st.integers(0, 3))  # most dims that follow an input are tied
        )
        outputs.append((f"out{position}", j, type_, om, ties))
    made = [(tuple(tuple(dims) for dims in gear_dims[g]), tuple(om_out_dims[g])) for g in range(n_gears)]
    # cheapest first, as the engine's gear table orders them
    gears = [
        gear for _, _, gear in sorted((sum(int(np.prod(d)) for d in g[0]), k, g) for k, g in enumerate(made))
    ]
    pad = draw(st.sampled_from([0, 1]))
    return Model(batched, inputs, gears, exact, outputs, pad)


@dataclasses.dataclass
class Window:
    requests: list[dict[str, np.ndarray]]
    wanted: list[Any] | None


@st.composite
def windows(draw: Callable, model: Model) -> Window:
    """Requests as clients send them: shapes that fit some gear, and now and then one that does not (a dim
    no gear takes exactly, too many rows, the wrong type, a missing or an unknown input)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    requests = []
    for _ in range(draw(st.integers(0, 7))):
        gear_inputs = draw(st.sampled_from(model.gears))[0]
        request = {}
        flat_at = 0
        for (name, type_, om, dims, _), gear in zip(model.inputs, gear_inputs):
            shape = []
            for d, (dim, top) in enumerate(zip(dims, gear)):
                if dim != -1:
                    shape.append(dim)
                elif model.exact[flat_at + d]:
                    shape.append(top)
                elif d == 0 and model.batched:  # a few rows each, so that requests share executes
                    shape.append(draw(st.integers(1, min(top, 2))))
                else:
                    shape.append(draw(st.integers(1, top)))
            flat_at += len(dims)
            array = random_data(rng, tuple(shape), type_, om)
            if array.ndim and draw(st.integers(0, 4)) == 0:  # a strided view: validation copies it
                array = np.repeat(array, 2, axis=-1)[..., ::2]
            request[name] = array
        fault = draw(st.integers(0, 15))  # one request in four is bad
        name, type_, om, _, _ = model.inputs[0]
        if fault == 1:
            request[name] = request[name].astype(np.complex64)
        elif fault == 2:
            del request[name]
        elif fault == 3:
            request["unknown"] = request[name]
        elif fault == 4:
            shape = list(request[name].shape)
            shape[-1] = shape[-1] + 7  # past any gear: refused by validation, or by the gears when exact
            request[name] = random_data(rng, tuple(shape), type_, om)
        requests.append(request)
    names = [name for name, _, _, _, _ in model.outputs]
    choice = draw(st.sampled_from(["none", "all", "subsets"]))
    if choice == "none":
        wanted = None
    elif choice == "all":
        wanted = [set(names) for _ in requests]
    else:
        wanted = [
            draw(st.one_of(st.none(), st.sets(st.sampled_from([*names, "not_an_output"])))) for _ in requests
        ]
    return Window(requests, wanted)


def chunk_fields(chunk: Any) -> tuple:
    return (
        chunk.indices,
        chunk.shapes,
        chunk.need,
        chunk.gear,
        chunk.rows,
        chunk.elements,
        chunk.in_bytes,
        chunk.outputs,
        chunk.out_index,
        chunk.out_bytes,
        chunk.wanted,
        chunk.staged,
    )


def answers(outputs: list[dict], staging: list[np.ndarray]) -> list:
    """Each request's outputs as comparable values: name, dtype, shape, bytes, and whether it is a view."""
    return [
        [
            (name, a.dtype.str, a.shape, a.tobytes(), any(np.shares_memory(a, s) for s in staging))
            for name, a in mine.items()
        ]
        for mine in outputs
    ]


def run(fp: ModuleType, model: Model, window: Window, views: bool, seed: int) -> tuple:
    """Plan the window, stage every chunk and split it from random output staging: everything the caller
    sees, as plain values."""
    planner = model.planner(fp)
    chunks, errors = planner.plan(window.requests, window.wanted)
    refused = [(i, type(e).__name__, str(e)) for i, e in errors]
    staged: list[list[bytes]] = []
    answered: list[tuple[Any, Any]] = []
    rng = np.random.default_rng(seed)
    n_om_out = len(model.gears[0][1])
    out_sizes = [max(int(np.prod(g[1][j])) for g in model.gears) * 8 for j in range(n_om_out)]
    for chunk in chunks:
        staging = model.staging_in()
        planner.stage(chunk, staging)
        planner.count(chunk)
        staged.append([s.tobytes() for s in staging])
        out = [np.frombuffer(rng.bytes(size), np.uint8).copy() for size in out_sizes]
        try:
            outputs, lent = planner.split(chunk, out, views)
        except ValueError as exc:  # an output that cannot be split: both say so alike
            answered.append(("ValueError", str(exc)))
        else:
            answered.append((answers(outputs, out), lent))
    extended: list[tuple[tuple[Any, ...], list[bytes]] | None] = []
    for more in chunks[1:]:  # the first chunk, staged and held open, taking each later chunk in turn
        merged = planner.extend(chunks[0], more)
        if merged is None:
            extended.append(None)
            continue
        staging = model.staging_in()
        planner.stage(chunks[0], staging)
        planner.stage(merged, staging, len(chunks[0].indices))
        extended.append((chunk_fields(merged), [s.tobytes() for s in staging]))
    return [chunk_fields(c) for c in chunks], refused, staged, answered, planner.tally(), extended


@settings(PLANNER_SETTINGS, max_examples=200)
@given(data=st.data())
def test_planner_twins_agree_on_plans_staging_and_answers(both: tuple[ModuleType, ModuleType], data) -> None:
    model = data.draw(models())
    window = data.draw(windows(model))
    views = data.draw(st.integers(0, 3)) > 0  # mostly as Triton's stub asks: views where they can be
    seed = data.draw(st.integers(0, 2**32 - 1))
    compiled, twin = (run(fp, model, window, views, seed) for fp in both)
    assert compiled == twin


@PLANNER_SETTINGS
@given(data=st.data())
def test_planner_places_every_good_request_once_on_a_gear_that_takes_its_chunk(fp: ModuleType, data) -> None:
    model = data.draw(models())
    window = data.draw(windows(model))
    planner = model.planner(fp)
    chunks, errors = planner.plan(window.requests, window.wanted)
    placed = [i for chunk in chunks for i in chunk.indices]
    refused = [i for i, _ in errors]
    assert sorted(placed + refused) == list(range(len(window.requests)))
    assert all(isinstance(e, RequestError) and e.__traceback__ is None for _, e in errors)
    for chunk in chunks:
        assert chunk.indices == sorted(chunk.indices)  # rows stacked in the order the requests came
        assert planner.choose(chunk.need) == chunk.gear
        assert model.batched or len(chunk.indices) == 1
        if model.batched:
            assert chunk.rows == sum(shape[0][0] for shape in chunk.shapes)
        again = planner.chunk(chunk.indices, chunk.arrays, chunk.wanted)
        assert chunk_fields(again) == chunk_fields(chunk)  # a re-run plans the same execute
    # a request that fits no chunk before its own cannot be put into an earlier one: first fit
    if model.batched:
        for later, chunk in enumerate(chunks):
            first = chunk.indices[0]
            for earlier in chunks[:later]:
                before = [i for i in earlier.indices if i < first]
                if before:
                    arrays = [earlier.arrays[earlier.indices.index(i)] for i in before]
                    together = [*arrays, chunk.arrays[0]]
                    with pytest.raises(ValueError, match="no gear takes"):
                        planner.chunk([*before, first], together)


def test_planner_groups_image_sizes_across_the_window(fp: ModuleType) -> None:
    # an image-size OM with a fixed batch of 2: 224, 448, 224 run as two executes, the 224s together
    spec = fp.TensorSpec("images", "fp32", (-1, 3, -1, -1), (2, 3, EXACT_LIMIT, EXACT_LIMIT))
    gears = [(((2, 3, s, s),), ((2, 10),)) for s in (224, 448)]
    planner = planner_of(
        fp, [spec], ["fp32"], gears, [("logits", 0, "fp32", "fp32", ())], exact=[False, False, True, True]
    )
    window = [{"images": np.zeros((1, 3, s, s), np.float32)} for s in (224, 448, 224)]
    chunks, errors = planner.plan(window)
    assert errors == []
    assert [(c.indices, c.gear, c.rows) for c in chunks] == [([0, 2], 0, 2), ([1], 1, 1)]
    assert chunks[0].out_bytes == [2 * 10 * 4] and chunks[1].out_bytes == [1 * 10 * 4]  # its row only


def test_planner_refuses_an_exact_size_no_gear_takes_with_the_callers_words(fp: ModuleType) -> None:
    spec = fp.TensorSpec("images", "fp32", (-1, 3, -1, -1), (2, 3, EXACT_LIMIT, EXACT_LIMIT))
    gears = [(((2, 3, s, s),), ((2, 10),)) for s in (224, 448)]

    def refusal(arrays: list) -> str:
        return f"{list(arrays[0].shape)}: resize the image"

    planner = planner_of(
        fp,
        [spec],
        ["fp32"],
        gears,
        [("logits", 0, "fp32", "fp32", ())],
        exact=[False, False, True, True],
        refusal=refusal,
    )
    window = [{"images": np.zeros((1, 3, s, s), np.float32)} for s in (224, 300, 448)]
    chunks, errors = planner.plan(window)
    assert [c.indices for c in chunks] == [[0], [2]]
    assert [(i, str(e)) for i, e in errors] == [(1, "[1, 3, 300, 300]: resize the image")]


def test_planner_bad_request_among_good_ones_is_refused_alone(fp: ModuleType) -> None:
    spec = fp.TensorSpec("INPUT0", "fp32", (-1, 16), (8, 16))
    gears = [(((b, 16),), ((b, 16),)) for b in (1, 2, 4, 8)]
    planner = planner_of(fp, [spec], ["fp32"], gears, [("OUTPUT0", 0, "fp32", "fp32", ())])
    good = np.ones((1, 16), np.float32)
    chunks, errors = planner.plan([{"INPUT0": good}, {"INPUT0": good.astype(np.int32)}, {"INPUT0": good}])
    assert [(c.indices, c.rows, c.gear) for c in chunks] == [([0, 2], 2, 1)]
    assert [(i, str(e)) for i, e in errors] == [(1, "input 'INPUT0': expected fp32 data, got int32")]


def test_planner_copies_back_only_the_outputs_its_requests_ask_for(fp: ModuleType) -> None:
    spec = fp.TensorSpec("x", "fp32", (-1, 4), (4, 4))
    gears = [(((b, 4),), ((b, 4), (b, 2))) for b in (1, 4)]
    outputs = [("a", 0, "fp32", "fp32", ()), ("b", 1, "fp32", "fp32", ())]
    planner = planner_of(fp, [spec], ["fp32"], gears, outputs)
    x = np.arange(4, dtype=np.float32)[None]
    (chunk,), _ = planner.plan([{"x": x}, {"x": x}], [{"b"}, {"b", "unknown"}])
    assert (chunk.outputs, chunk.out_index, chunk.out_bytes) == ([1], [1], [2 * 2 * 4])
    (chunk,), _ = planner.plan([{"x": x}, {"x": x}], [{"a"}, None])
    assert (chunk.outputs, chunk.wanted) == ([0, 1], [[0], [0, 1]])
    out = [np.zeros(4 * 4 * 4, np.uint8), np.zeros(4 * 2 * 4, np.uint8)]
    answered, _ = planner.split(chunk, out, True)
    assert [sorted(mine) for mine in answered] == [["a"], ["a", "b"]]
    (chunk,), _ = planner.plan([{"x": x}], [{"a", "b"}])
    assert chunk.wanted is None and chunk.outputs == [0, 1]  # everyone wants everything


def test_planner_answers_views_only_where_no_copy_is_needed(fp: ModuleType) -> None:
    # seq dim tied to the request's: two rows shorter than the gear are a trimmed, non-contiguous part, so
    # the whole output is copied; requests of the gear's length (or one short row) get views
    spec = fp.TensorSpec("ids", "int64", (-1, -1), (4, 8))
    gears = [(((b, s),), ((b, s, 3),)) for b in (1, 4) for s in (4, 8)]
    gears.sort(key=lambda g: int(np.prod(g[0][0])))
    planner = planner_of(fp, [spec], ["int64"], gears, [("logits", 0, "fp32", "fp32", ((1, 0, 1),))])
    out = [np.arange(4 * 8 * 3, dtype=np.float32).view(np.uint8)]
    full = [{"ids": np.zeros((1, 8), np.int64)}, {"ids": np.zeros((1, 8), np.int64)}]
    (chunk,), _ = planner.plan(full)
    answered, lent = planner.split(chunk, out, True)
    assert lent and all(np.shares_memory(a["logits"], out[0]) for a in answered)
    one_short = [{"ids": np.zeros((1, 8), np.int64)}, {"ids": np.zeros((1, 5), np.int64)}]
    (chunk,), _ = planner.plan(one_short)
    answered, lent = planner.split(chunk, out, True)
    assert lent and all(np.shares_memory(a["logits"], out[0]) for a in answered)
    mixed = [{"ids": np.zeros((1, 8), np.int64)}, {"ids": np.zeros((2, 5), np.int64)}]
    (chunk,), _ = planner.plan(mixed)
    answered, lent = planner.split(chunk, out, True)
    assert not lent and not any(np.shares_memory(a["logits"], out[0]) for a in answered)
    assert [a["logits"].shape for a in answered] == [(1, 8, 3), (2, 5, 3)]
    whole = out[0].view(np.float32).reshape(4, 8, 3)
    np.testing.assert_array_equal(answered[1]["logits"], whole[1:3, :5])


def test_planner_stage_refuses_a_chunk_whose_arrays_were_released(fp: ModuleType) -> None:
    spec = fp.TensorSpec("x", "fp32", (-1, 4), (1, 4))
    planner = planner_of(fp, [spec], ["fp32"], [(((1, 4),), ((1, 4),))], [("y", 0, "fp32", "fp32", ())])
    (chunk,), _ = planner.plan([{"x": np.ones((1, 4), np.float32)}])
    chunk.arrays = None
    with pytest.raises(ValueError, match="released"):
        planner.stage(chunk, [np.zeros(16, np.uint8)])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"om_types": ["int8"]}, "Planner: input 'x': cannot cast fp32 to int8"),
        ({"gears": []}, "Planner: a model has at least one gear"),
        ({"gears": [(((1, 4, 1),), ((1, 4),))]}, "Planner: gear 0: input ranks [3], the specs have [2]"),
        ({"outputs": [("y", 3, "fp32", "fp32", ())]}, "Planner: gear 0: output 'y' is OM output 3"),
        ({"outputs": [("y", 0, "fp32", "fp32", ((5, 0, 0),))]}, "output 'y' tie (5, 0, 0) names no dim"),
        ({"exact": [True]}, "Planner: exact lists 1 dims; the inputs have 2"),
        ({"pad_value": 1.5, "om_types": ["int32"]}, "Planner: input 'x': cannot cast fp32 to int32"),
    ],
)
def test_planner_refuses_tables_that_do_not_fit_with_the_same_words(both, change, message) -> None:
    for fp in both:
        arguments: dict[str, Any] = {
            "specs": [fp.TensorSpec("x", "fp32", (-1, 4), (1, 4))],
            "om_types": ["fp32"],
            "gears": [(((1, 4),), ((1, 4),))],
            "outputs": [("y", 0, "fp32", "fp32", ())],
        }
        arguments.update(change)
        with pytest.raises(ValueError) as caught:
            planner_of(fp, **arguments)
        assert message in str(caught.value)


def test_planner_tallies_what_the_engine_counts_as_launched(fp: ModuleType) -> None:
    spec = fp.TensorSpec("ids", "int64", (-1, -1), (4, 8))
    gears = [(((b, s),), ((b, s, 3),)) for b in (1, 4) for s in (4, 8)]
    gears.sort(key=lambda g: int(np.prod(g[0][0])))
    planner = planner_of(fp, [spec], ["int64"], gears, [("logits", 0, "fp32", "fp32", ((1, 0, 1),))])
    assert planner.tally() == ([0, 0, 0, 0], 0, 0, 0)
    window = [{"ids": np.zeros((1, 8), np.int64)}, {"ids": np.zeros((2, 5), np.int64)}]
    (chunk,), _ = planner.plan(window)
    assert planner.tally() == ([0, 0, 0, 0], 0, 0, 0)  # planned is not staged
    staging = [np.zeros(4 * 8 * 8, np.uint8)]
    planner.stage(chunk, staging)
    assert planner.tally() == ([0, 0, 0, 0], 0, 0, 0)  # staged is not launched
    gear, in_bytes, out_index, out_bytes = planner.launch_args(chunk)
    assert gear.input_dims == gears[3][0] and gear.output_dims == gears[3][1]  # its gear's own record
    assert (in_bytes, out_index, out_bytes) == (chunk.in_bytes, chunk.out_index, chunk.out_bytes)
    assert planner.tally() == ([0, 0, 0, 0], 0, 0, 0)  # asking what a launch copies counts nothing
    planner.count(chunk)
    planner.count(chunk)
    # gear 4x8 twice: 3 rows, 18 input elements and 3 rows of [8, 3] fp32 copied back each time
    assert chunk.gear == 3 and chunk.out_bytes == [3 * 8 * 3 * 4]
    assert planner.tally() == ([0, 0, 0, 2], 6, 36, 2 * 3 * 8 * 3 * 4)


@PLANNER_SETTINGS
@given(data=st.data())
def test_planner_extends_a_staged_chunk_as_if_it_had_planned_them_together(fp: ModuleType, data) -> None:
    # a chunk held open on a lane takes later requests: gathering only theirs after its own rows gives the
    # same staging, bytes for bytes, as gathering the merged chunk from scratch, and the chunk itself is the
    # one plan would have made of them (its rows in the same place: the gear differs at most in rows)
    model = data.draw(models())
    window = data.draw(windows(model))
    planner = model.planner(fp)
    chunks, _ = planner.plan(window.requests, window.wanted)
    for more in chunks[1:]:
        merged = planner.extend(chunks[0], more)
        if merged is None:
            continue
        assert model.batched and merged.indices == chunks[0].indices + more.indices
        assert merged.rows == chunks[0].rows + more.rows and planner.choose(merged.need) == merged.gear
        incremental, whole = model.staging_in(), model.staging_in()
        planner.stage(chunks[0], incremental)
        planner.stage(merged, incremental, len(chunks[0].indices))
        planner.stage(merged, whole)
        assert [s.tobytes() for s in incremental] == [s.tobytes() for s in whole]
        again = planner.chunk(
            list(range(len(merged.indices))), merged.arrays, merged.wanted
        )  # the same execute, planned from scratch
        assert chunk_fields(again)[1:] == chunk_fields(merged)[1:]


def test_planner_extends_an_open_chunk_only_without_moving_its_rows(fp: ModuleType) -> None:
    spec = fp.TensorSpec("ids", "int64", (-1, -1), (8, 32))
    gears = [(((b, s),), ((b, s, 3),)) for b in (1, 4, 8) for s in (16, 32)]
    gears.sort(key=lambda g: int(np.prod(g[0][0])))
    planner = planner_of(fp, [spec], ["int64"], gears, [("logits", 0, "fp32", "fp32", ((1, 0, 1),))])

    def chunk_of(rows: int, seq: int):
        (chunk,), _ = planner.plan([{"ids": np.ones((rows, seq), np.int64)}])
        return chunk

    open_chunk = chunk_of(1, 16)
    grown = planner.extend(open_chunk, chunk_of(2, 10))
    assert grown is not None and (grown.rows, grown.need) == (3, (3, 16))  # 1x16 -> 4x16: only rows grow
    assert planner.extend(open_chunk, chunk_of(1, 20)) is None  # seq 32 would move the staged row
    assert planner.extend(grown, chunk_of(6, 16)) is None  # 9 rows: no gear
    open_chunk.arrays = None  # released once staged: extending needs only the newcomers' arrays
    assert planner.extend(open_chunk, chunk_of(1, 16)) is not None
