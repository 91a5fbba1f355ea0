"""The engine's planner alone, built from plain records: no device, no OM, no lane.

Staging memory here is ordinary numpy bytes and the "device" is a copy from the input staging to the output
staging, so what is checked is the planner's own work: grouping, gear choice, the bytes each launch copies,
the gather, the split, taking requests back out of staging, and the refusals."""

from __future__ import annotations

import numpy as np
import pytest

from ge_plugin import dtypes
from ge_plugin import fastpath as fp
from ge_plugin.engine.config import IOConfig
from ge_plugin.engine.gear_table import Gear, GearTable
from ge_plugin.engine.planner import Planner, gear_fit
from ge_plugin.engine.tensors import BoundTensor
from ge_plugin.errors import RequestError

ROWS = (1, 2, 4, 8)
EXACT_LIMIT = 2**31 - 1


def identity_planner() -> Planner:
    """INPUT0 [-1, 16] fp32 to OUTPUT0 [-1, 16] fp32, on batch gears of 1, 2, 4 and 8 rows."""
    fp32 = dtypes.by_name("fp32")
    gears = GearTable(
        [Gear(k, ((n, 16),), ((n, 16),), n, f"batch {n}") for k, n in enumerate(ROWS)], mode="batch"
    )
    nbytes = tuple(n * 16 * 4 for n in ROWS)
    spec = fp.TensorSpec("INPUT0", "fp32", (-1, 16), (8, 16), batched=True)
    source = BoundTensor("INPUT0", 0, "fp32", "fp32", IOConfig("INPUT0", fp32, (16,)), nbytes, spec=spec)
    sink = BoundTensor("OUTPUT0", 0, "fp32", "fp32", IOConfig("OUTPUT0", fp32, (16,)), nbytes)
    return Planner([source], [sink], gears, batched=True, exact=(False, False))


def sequence_planner() -> Planner:
    """tokens [1, -1] int32, whose length must be one of the gears' (8 or 16) exactly: it is not padded."""
    int32 = dtypes.by_name("int32")
    gears = GearTable(
        [Gear(k, ((1, n),), ((1, n),), (1, n), f"{n} tokens") for k, n in enumerate((8, 16))], mode="dims"
    )
    nbytes = (8 * 4, 16 * 4)
    spec = fp.TensorSpec("tokens", "int32", (1, -1), (1, EXACT_LIMIT), batched=False)
    source = BoundTensor("tokens", 0, "int32", "int32", IOConfig("tokens", int32, (1, -1)), nbytes, spec=spec)
    sink = BoundTensor(
        "scores", 0, "int32", "int32", IOConfig("scores", int32, (1, -1)), nbytes, ties=((1, 0, 1),)
    )
    return Planner([source], [sink], gears, batched=False, exact=(False, True))


def staging(planner: Planner) -> list[np.ndarray]:
    return [np.zeros(max(tensor.nbytes), np.uint8) for tensor in planner.inputs]


def rows(*values: float) -> list[dict[str, np.ndarray]]:
    return [{"INPUT0": np.full((1, 16), v, np.float32)} for v in values]


def test_planner_puts_a_window_on_the_cheapest_gear_that_takes_it():
    planner = identity_planner()
    chunks, refused = planner.plan(rows(1, 2, 3))
    assert refused == []
    (chunk,) = chunks
    assert chunk.indices == [0, 1, 2]
    assert planner.gears.gears[chunk.gear].rows == 4
    assert chunk.rows == 3
    assert chunk.in_bytes == [4 * 16 * 4]  # the whole gear goes to the device, padding included
    assert chunk.out_index == [0] and chunk.out_bytes == [3 * 16 * 4]  # only the rows the requests brought


def test_planner_refuses_a_bad_request_alone_naming_its_input():
    planner = identity_planner()
    window = [*rows(1), {"INPUT0": np.ones((1, 15), np.float32)}, *rows(3)]
    chunks, refused = planner.plan(window)
    assert [chunk.indices for chunk in chunks] == [[0, 2]]
    ((index, error),) = refused
    assert index == 1
    assert isinstance(error, RequestError)
    assert "'INPUT0'" in str(error) and "15" in str(error)


def test_planner_splits_what_it_staged_back_to_each_request():
    planner = identity_planner()
    (chunk,), _ = planner.plan(rows(1, 2, 3))
    inputs = staging(planner)
    planner.stage(chunk, inputs)
    outputs = [inputs[0].copy()]  # an identity "device"
    answers, lent = planner.split(chunk, outputs)
    assert not lent
    for value, answer in zip((1, 2, 3), answers):
        np.testing.assert_array_equal(answer["OUTPUT0"], np.full((1, 16), value, np.float32))


def test_planner_takes_each_request_back_out_of_the_staging():
    # what a failed execute reruns with once the request memory is gone: each request's own rows, copied
    planner = identity_planner()
    window = [{"INPUT0": np.full((2, 16), 7, np.float32)}, *rows(9)]
    (chunk,), _ = planner.plan(window)
    inputs = staging(planner)
    planner.stage(chunk, inputs)
    entries = planner.unstage(chunk, inputs)
    assert [member for member, _ in entries] == [0, 1]
    for (_, arrays), request in zip(entries, window):
        (array,) = arrays
        np.testing.assert_array_equal(array, request["INPUT0"])
        assert not np.shares_memory(array, inputs[0])
    rerun = planner.chunk([0, 1], [arrays for _, arrays in entries], staged=True)
    assert rerun.rows == 3 and planner.gears.gears[rerun.gear].rows == 4


def test_planner_refusal_names_the_lengths_a_dim_must_match_exactly():
    planner = sequence_planner()
    chunks, refused = planner.plan(
        [{"tokens": np.ones((1, 8), np.int32)}, {"tokens": np.ones((1, 9), np.int32)}]
    )
    assert [chunk.indices for chunk in chunks] == [[0]]
    ((index, error),) = refused
    assert index == 1
    assert str(error).startswith(
        "input 'tokens' [1, 9]: dim 1 is 9, which no gear of the model takes exactly (its gears take 8, 16)"
    )


def test_planner_launch_of_a_gear_copies_every_tensor_whole():
    planner = identity_planner()
    gear, in_bytes, out_index, out_bytes = planner.launch_of(1)
    assert gear.rows == 2 and in_bytes == [2 * 16 * 4] and out_index == [0] and out_bytes == [2 * 16 * 4]
    assert planner.h2d_bytes() == [n * 16 * 4 for n in ROWS]


def test_planner_needs_a_spec_for_every_input():
    planner = identity_planner()
    bare = BoundTensor("INPUT0", 0, "fp32", "fp32", planner.inputs[0].io, planner.inputs[0].nbytes)
    with pytest.raises(ValueError, match=r"inputs \['INPUT0'\] have no spec"):
        Planner([bare], planner.outputs, planner.gears, batched=True, exact=(False, False))


def test_gear_fit_is_the_planners_rule_over_bare_dims():
    # tune asks this rather than keeping a rule of its own: a padded dim takes any gear that holds it, an
    # exact one only its own length, and the first gear in order that fits is the one named
    fit = gear_fit([(16, 8), (32, 8), (32, 16)], [False, True])
    assert [fit(need) for need in [(10, 8), (17, 8), (32, 16), (33, 8), (16, 12)]] == [0, 1, 2, None, None]
