"""Gear choice: the cheapest compiled shape that covers a batch, as the engine asks the fast path's planner
for it (the planner takes the gear table's gears in the table's order, cheapest first)."""

from types import SimpleNamespace

import attrs
import pytest

from ge_plugin import fastpath as fp
from ge_plugin.engine.gear_table import Gear, GearTable


def batch_table(*batches, seq=128):
    return GearTable([Gear(i, ((b, seq),), ((b, seq, 10),), b, str(b)) for i, b in enumerate(batches)])


def grid_table(batches, seqs):
    gears = []
    for b in batches:
        for s in seqs:
            gears.append(Gear(len(gears), ((b, s), (b, s)), ((b, s, 4),), (b, s, b, s), f"{b}x{s}"))
    return GearTable(gears)


def chooser(table: GearTable):
    """need -> the label of the gear the engine's planner picks for it (None: no gear)."""
    ranks = [len(dims) for dims in table.gears[0].input_dims]
    specs = [fp.TensorSpec(f"in{k}", "fp32", (-1,) * rank, table.limits[k]) for k, rank in enumerate(ranks)]
    # the records the planner reads (the engine hands it BoundTensors and these very Gears)
    inputs = [SimpleNamespace(spec=spec, om_type="fp32") for spec in specs]
    out = SimpleNamespace(name="out", om_index=0, type="fp32", om_type="fp32", ties=())
    gears = [attrs.evolve(g, output_dims=g.output_dims or ((1,),)) for g in table.gears]
    planner = fp.Planner(inputs, [out], gears)

    def choose(need):
        position = planner.choose(need)
        return None if position is None else table.gears[position].label

    return choose


def test_gear_choose_rounds_rows_up_to_the_next_batch_gear():
    choose = chooser(batch_table(1, 4, 8))
    assert choose((1, 128)) == "1"
    assert choose((2, 128)) == "4"
    assert choose((5, 128)) == "8"
    assert choose((9, 128)) is None


def test_gear_choose_picks_the_cheapest_cell_of_a_batch_seq_grid():
    choose = chooser(grid_table((1, 4, 8), (16, 32, 64, 128)))
    assert choose((3, 20, 3, 20)) == "4x32"
    assert choose((1, 128, 1, 128)) == "1x128"
    assert choose((8, 1, 8, 1)) == "8x16"
    assert choose((2, 129, 2, 129)) is None


def test_gear_table_limits_are_the_largest_length_of_every_dim():
    table = grid_table((1, 4, 8), (16, 32))
    assert table.limits == ((8, 32), (8, 32))
    assert table.max_rows == 8


def test_gear_cost_counts_padded_input_elements():
    gear = Gear(0, ((4, 32), (4, 32)), (), (4, 32, 4, 32), "4x32")
    assert gear.cost == 256
    assert gear.rows == 4


def test_gear_table_refuses_empty_and_mixed_ranks():
    with pytest.raises(ValueError):
        GearTable([])
    with pytest.raises(ValueError):
        GearTable([Gear(0, ((1, 2),), (), 1, "1"), Gear(1, ((2,),), (), 2, "2")])


def test_gear_choose_prefers_fewer_padded_elements_over_fewer_rows():
    # A (2, 128) gear costs more than an (8, 16) one: short sequences batch onto the wide, short gear.
    table = GearTable([Gear(0, ((2, 128),), (), (2, 128), "2x128"), Gear(1, ((8, 16),), (), (8, 16), "8x16")])
    assert chooser(table)((2, 10)) == "8x16"
