"""Property tests: on random shapes, types, gears and request mixes, each implementation agrees with a naive
numpy reference (np.pad + np.concatenate + astype), the two implementations agree with each other byte for
byte (NaN payloads and error messages included), and gather followed by scatter gives the inputs back."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import ModuleType
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

BF16 = ml_dtypes.bfloat16

NUMPY = {
    "bool": np.bool_,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "fp16": np.float16,
    "fp32": np.float32,
    "fp64": np.float64,
    "bf16": np.uint16,
}
FLOATS = {"fp16": np.uint16, "fp32": np.uint32, "fp64": np.uint64, "bf16": np.uint16}  # -> their bit patterns
CASTS = [
    ("fp32", "fp16"),
    ("fp16", "fp32"),
    ("fp32", "bf16"),
    ("bf16", "fp32"),
    ("fp16", "bf16"),
    ("bf16", "fp16"),
    ("int64", "int32"),
    ("int32", "int64"),
]
TYPE_PAIRS = [(name, name) for name in NUMPY] + CASTS
FLOAT_PADS = [0.0, -0.0, 1.0, -1.5, 0.1, 1e30, float("inf"), float("nan"), 65504.0, 6e-8]

PROPERTY_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def random_tensor(
    rng: np.random.Generator, shape: tuple[int, ...], type_name: str, cast_to: str
) -> np.ndarray:
    """Random data of a type: float types as raw bit patterns (so NaNs, infinities and subnormals turn up),
    int64 kept inside int32 when it is about to be cast there."""
    dtype: Any = np.dtype(NUMPY[type_name])
    if type_name == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if type_name in FLOATS:
        if rng.random() < 0.5:  # ordinary numbers over many magnitudes, not only bit soup
            numbers = rng.standard_normal(size=shape) * 10.0 ** rng.integers(-9, 9, size=shape)
            return (
                reference_cast(numbers.astype(np.float32), "fp32", type_name)
                if type_name != "fp64"
                else numbers
            )
        bits = rng.integers(0, 2**64 - 1, size=shape, dtype=np.uint64, endpoint=True)
        return bits.astype(FLOATS[type_name]).view(dtype)
    info = np.iinfo(dtype)
    low, high = int(info.min), int(info.max)
    if type_name == "int64" and cast_to == "int32":
        low, high = -(2**31), 2**31 - 1
    return rng.integers(low, high, size=shape, dtype=dtype, endpoint=True)


def pad_for(draw: Callable, type_name: str) -> float:
    if type_name in FLOATS:
        return draw(st.sampled_from(FLOAT_PADS))
    if type_name == "bool":
        return draw(st.sampled_from([0, 1]))
    if type_name.startswith("u"):
        return draw(st.integers(0, 255))
    return draw(st.integers(-128, 127))


@dataclasses.dataclass
class GatherCase:
    src_type: str
    dst_type: str
    gear: tuple[int, ...]
    srcs: list[np.ndarray]
    pad: float


@st.composite
def gather_cases(draw: Callable, valid: bool = True) -> GatherCase:
    src_type, dst_type = draw(st.sampled_from(TYPE_PAIRS))
    ndim = draw(st.integers(1, 4))
    gear = (draw(st.integers(1, 8)), *(draw(st.integers(1, 6)) for _ in range(ndim - 1)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    srcs = []
    free_rows = gear[0]
    for _ in range(draw(st.integers(0, 5))):
        if valid and free_rows == 0:
            break
        rows = draw(st.integers(1, max(free_rows, 1) if valid else gear[0] + 1))
        free_rows -= rows
        slack = 0 if valid else 1
        shape = (rows, *(draw(st.integers(1, g + slack)) for g in gear[1:]))
        tensor = random_tensor(rng, shape, src_type, dst_type)
        if draw(st.booleans()):  # a strided view: the copy has to follow the strides
            wide = np.concatenate([tensor, tensor], axis=-1)
            tensor = wide[..., ::2]
        srcs.append(tensor)
    return GatherCase(src_type, dst_type, gear, srcs, pad_for(draw, dst_type))


def reference_cast(values: np.ndarray, src_type: str, dst_type: str) -> np.ndarray:
    """The cast done by numpy and ml_dtypes, independently of both implementations."""
    with np.errstate(over="ignore", invalid="ignore"):
        if src_type == dst_type:
            return values
        if src_type == "bf16":
            values = values.view(BF16).astype(np.float32)
        if dst_type == "bf16":
            return values.astype(np.float32).astype(BF16).view(np.uint16)
        return values.astype(NUMPY[dst_type])


def reference_pad(pad: float, dst_type: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        if dst_type == "fp64":
            return np.array(pad, np.float64)
        if dst_type in FLOATS:
            return reference_cast(np.array(pad, np.float32), "fp32", dst_type)
        return np.array(int(pad), NUMPY[dst_type])


def reference_gather(case: GatherCase) -> np.ndarray:
    pad = reference_pad(case.pad, case.dst_type)
    parts = []
    for source in case.srcs:
        cast = reference_cast(source, case.src_type, case.dst_type)
        widths = [(0, 0)] + [(0, g - n) for g, n in zip(case.gear[1:], source.shape[1:])]
        parts.append(np.pad(cast, widths, constant_values=pad))
    rows = sum(source.shape[0] for source in case.srcs)
    parts.append(np.full((case.gear[0] - rows, *case.gear[1:]), pad, dtype=NUMPY[case.dst_type]))
    return np.concatenate(parts)


def as_floats(tensor: np.ndarray, type_name: str) -> np.ndarray:
    return tensor.view(BF16) if type_name == "bf16" else tensor


def run_gather(fp: ModuleType, case: GatherCase) -> np.ndarray:
    itemsize = np.dtype(NUMPY[case.dst_type]).itemsize
    dst = np.full(int(np.prod(case.gear)) * itemsize, 0xAB, np.uint8)
    written = fp.gather(dst, case.gear, case.dst_type, case.srcs, case.src_type, case.pad)
    assert written == dst.size
    return dst.view(NUMPY[case.dst_type]).reshape(case.gear)


@PROPERTY_SETTINGS
@given(case=gather_cases())
def test_gather_matches_numpy_reference(
    fp: ModuleType, assert_same_floats: Callable, case: GatherCase
) -> None:
    got = run_gather(fp, case)
    expected = reference_gather(case)
    if case.dst_type in FLOATS:
        bits = FLOATS[case.dst_type]
        assert_same_floats(as_floats(got, case.dst_type), as_floats(expected, case.dst_type), bits)
    else:
        np.testing.assert_array_equal(got, expected)


def outcome(func: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """What a call did: ("ok", its result), or the exception's type name and message."""
    try:
        return "ok", func(*args)
    except (ValueError, TypeError) as exc:
        return type(exc).__name__, str(exc)


@PROPERTY_SETTINGS
@given(case=gather_cases(valid=False))
def test_gather_twins_agree_byte_for_byte(both: tuple[ModuleType, ModuleType], case: GatherCase) -> None:
    results = []
    for fp in both:
        itemsize = np.dtype(NUMPY[case.dst_type]).itemsize
        dst = np.full(int(np.prod(case.gear)) * itemsize, 0xAB, np.uint8)
        kind, value = outcome(fp.gather, dst, case.gear, case.dst_type, case.srcs, case.src_type, case.pad)
        results.append((kind, value, dst.tobytes()))
    assert results[0] == results[1]


@dataclasses.dataclass
class ScatterCase:
    src_type: str
    out_type: str
    tensor: np.ndarray
    rows: list[int]
    shapes: list[tuple[int, ...]]


@st.composite
def scatter_cases(draw: Callable) -> ScatterCase:
    src_type, out_type = draw(st.sampled_from(TYPE_PAIRS))
    ndim = draw(st.integers(1, 4))
    gear = (draw(st.integers(1, 8)), *(draw(st.integers(1, 6)) for _ in range(ndim - 1)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    tensor = random_tensor(rng, gear, src_type, out_type)
    rows, shapes, free_rows = [], [], gear[0]
    while free_rows and draw(st.integers(0, 3)):
        count = draw(st.integers(1, free_rows))
        free_rows -= count
        rows.append(count)
        shapes.append(tuple(draw(st.integers(0, g)) for g in gear[1:]))
    return ScatterCase(src_type, out_type, tensor, rows, shapes)


def run_scatter(fp: ModuleType, case: ScatterCase) -> list[np.ndarray]:
    staged = np.frombuffer(case.tensor.tobytes(), np.uint8)
    return fp.scatter(staged, case.tensor.shape, case.src_type, case.out_type, case.rows, case.shapes)


@PROPERTY_SETTINGS
@given(case=scatter_cases())
def test_scatter_matches_numpy_reference(
    fp: ModuleType, assert_same_floats: Callable, case: ScatterCase
) -> None:
    outs = run_scatter(fp, case)
    assert len(outs) == len(case.rows)
    row = 0
    for out, count, shape in zip(outs, case.rows, case.shapes):
        part = case.tensor[(slice(row, row + count), *(slice(0, n) for n in shape))]
        expected = reference_cast(part, case.src_type, case.out_type)
        assert out.shape == (count, *shape)
        assert out.dtype == np.dtype(NUMPY[case.out_type])
        assert out.flags.c_contiguous
        if case.out_type in FLOATS:
            assert_same_floats(
                as_floats(out, case.out_type), as_floats(expected, case.out_type), FLOATS[case.out_type]
            )
        else:
            np.testing.assert_array_equal(out, expected)
        row += count


@PROPERTY_SETTINGS
@given(case=scatter_cases())
def test_scatter_twins_agree_byte_for_byte(both: tuple[ModuleType, ModuleType], case: ScatterCase) -> None:
    compiled, twin = (run_scatter(fp, case) for fp in both)
    assert [(o.shape, o.dtype, o.tobytes()) for o in compiled] == [
        (o.shape, o.dtype, o.tobytes()) for o in twin
    ]


ROUND_TRIPS = [(name, name) for name in NUMPY] + [("fp16", "fp32"), ("bf16", "fp32"), ("int32", "int64")]


@PROPERTY_SETTINGS
@given(case=gather_cases(), pair=st.sampled_from(ROUND_TRIPS))
def test_gather_then_scatter_gives_the_inputs_back(
    fp: ModuleType, assert_same_floats: Callable, case: GatherCase, pair: tuple[str, str]
) -> None:
    # Only casts that lose nothing on the way in can round-trip; the sources are regenerated for the pair.
    outer, inner = pair
    rng = np.random.default_rng(len(case.srcs))
    srcs = [np.ascontiguousarray(random_tensor(rng, s.shape, outer, inner)) for s in case.srcs]
    pad = 0.0 if inner != "bool" else 0
    trip = GatherCase(outer, inner, case.gear, srcs, pad)
    staged = run_gather(fp, trip)
    rows = [s.shape[0] for s in srcs]
    shapes = [s.shape[1:] for s in srcs]
    outs = fp.scatter(staged.reshape(-1).view(np.uint8), case.gear, inner, outer, rows, shapes)
    for out, source in zip(outs, srcs):
        if outer in FLOATS:
            assert_same_floats(as_floats(out, outer), as_floats(source, outer), FLOATS[outer])
        else:
            np.testing.assert_array_equal(out, source)


@st.composite
def validate_cases(draw: Callable) -> tuple[tuple, dict[str, Any], np.ndarray]:
    spec_type = draw(st.sampled_from(list(NUMPY)))
    ndim = draw(st.integers(0, 3))
    dims = tuple(draw(st.sampled_from([-1, 1, 2, 3])) for _ in range(ndim))
    limits = tuple(draw(st.integers(1, 4)) if d == -1 else d for d in dims)
    batched = draw(st.booleans())
    shape = tuple(draw(st.integers(0, 5)) for _ in range(draw(st.integers(max(ndim - 1, 0), ndim + 1))))
    dtype = draw(st.sampled_from([*NUMPY.values(), np.float16, ">i4", ">f4", np.complex64]))
    array = np.zeros(shape, dtype)
    if array.ndim and draw(st.booleans()):
        array = np.repeat(array, 2, axis=-1)[..., ::2]
    names = draw(st.sampled_from([["x"], ["x", "y"], []]))
    request = {name: array for name in names}
    return (spec_type, dims, limits, batched), request, array


@PROPERTY_SETTINGS
@given(case=validate_cases())
def test_validate_twins_agree(both: tuple[ModuleType, ModuleType], case: tuple) -> None:
    (spec_type, dims, limits, batched), request, _ = case
    results = []
    for fp in both:
        spec = fp.TensorSpec("x", spec_type, dims, limits, batched=batched)
        kind, value = outcome(fp.validate, [spec], request)
        if kind == "ok":
            value = [(a.shape, a.dtype.str, a.flags.c_contiguous, a.tobytes()) for a in value]
        results.append((kind, value))
    assert results[0] == results[1]


@st.composite
def range_cases(draw: Callable) -> tuple[str, tuple, np.ndarray]:
    """A value range of any type (bounds that may be empty, or wider than the type) and a random request."""
    type_name = draw(st.sampled_from(list(NUMPY)))
    if type_name in FLOATS:
        bound = st.sampled_from([-1e30, -2.5, -1.0, 0.0, 0.5, 1.0, 3.0, 65504.0, float("inf"), float("-inf")])
    else:
        bound = st.integers(-(2**65), 2**65)
    low, high = sorted((draw(bound), draw(bound)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 40)))
    return type_name, (low, high), random_tensor(rng, shape, type_name, type_name)


@PROPERTY_SETTINGS
@given(case=range_cases())
def test_range_twins_agree(both: tuple[ModuleType, ModuleType], case: tuple) -> None:
    type_name, value_range, array = case
    results = []
    for fp in both:
        spec = fp.TensorSpec("x", type_name, (-1, -1), (3, 40), value_range=value_range)
        kind, value = outcome(fp.validate, [spec], {"x": array})
        results.append((kind, None if kind == "ok" else value))
    assert results[0] == results[1]


pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


#: argument values a caller may get wrong: each twin must refuse the same ones with the same exception
ODD_COUNTS = st.one_of(
    st.lists(st.sampled_from([1, 2, 0, -1, 1.5, "1", None, True]), max_size=3),
    st.sampled_from([None, 1, "12", (1,)]),
)
ODD_SHAPES = st.one_of(
    st.lists(
        st.one_of(
            st.tuples(st.sampled_from([1, 4, 0, 5, 1.5, None])),
            st.sampled_from([4, None, "4", ()]),
        ),
        max_size=3,
    ),
    st.sampled_from([None, 4, "4"]),
)


@PROPERTY_SETTINGS
@given(
    rows=ODD_COUNTS,
    shapes=ODD_SHAPES,
    src_shape=st.sampled_from([(2, 4), (2,), (), (2, 4.0), None, (0, 4)]),
    types=st.sampled_from(
        [("fp32", "fp32"), ("fp32", "fp16"), ("fp32", "int8"), ("xx", "fp32"), (None, "fp32")]
    ),
    src=st.sampled_from(["buffer", "small", "none", "readonly"]),
)
def test_scatter_twins_refuse_bad_arguments_alike(both, rows, shapes, src_shape, types, src) -> None:
    buffers = {
        "buffer": np.zeros(64, np.uint8),
        "small": np.zeros(4, np.uint8),
        "none": None,
        "readonly": np.frombuffer(bytes(64), np.uint8),
    }
    results = []
    for fp in both:
        kind, value = outcome_any(fp.scatter, buffers[src], src_shape, types[0], types[1], rows, shapes)
        results.append((kind, value if kind != "ok" else [a.tobytes() for a in value]))
    assert results[0] == results[1]


@PROPERTY_SETTINGS
@given(
    dst_shape=st.sampled_from([(2, 4), (2,), (), (2, 4.5), None, (1, 0)]),
    types=st.sampled_from(
        [("fp32", "fp32"), ("fp16", "fp32"), ("int8", "fp32"), ("xx", "fp32"), ("fp32", None)]
    ),
    srcs=st.sampled_from(["one", "two", "wrong-dtype", "none", "list", "too-long"]),
    pad=st.sampled_from([0, 1.5, "0", None, float("nan"), 1e40]),
    dst=st.sampled_from(["buffer", "small", "none", "readonly"]),
)
def test_gather_twins_refuse_bad_arguments_alike(both, dst_shape, types, srcs, pad, dst) -> None:
    sources = {
        "one": [np.ones((1, 4), np.float32)],
        "two": [np.ones((1, 4), np.float32), np.ones((1, 2), np.float32)],
        "wrong-dtype": [np.ones((1, 4), np.float64)],
        "none": None,
        "list": [[1.0, 2.0]],
        "too-long": [np.ones((3, 4), np.float32)],
    }
    results = []
    for fp in both:
        buffers = {
            "buffer": np.zeros(64, np.uint8),
            "small": np.zeros(4, np.uint8),
            "none": None,
            "readonly": np.frombuffer(bytes(64), np.uint8),
        }
        kind, value = outcome_any(fp.gather, buffers[dst], dst_shape, types[0], sources[srcs], types[1], pad)
        results.append((kind, value))
    assert results[0] == results[1]


def outcome_any(func: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """What a call did: ("ok", its result), or any exception's type name and message."""
    try:
        return "ok", func(*args)
    except Exception as exc:
        return type(exc).__name__, str(exc)
