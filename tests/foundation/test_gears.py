"""The one gear record (ge_plugin.gears): parsed from ATC's text, from what pyACL reports and from a spec's
keys into the same GearSet; one text form; labels and names that read back as the gears they name."""

from __future__ import annotations

from pathlib import Path

import pytest

from ge_plugin.errors import GearTextError
from ge_plugin.gears import GearSet, format_values, parse_values
from ge_plugin.spec import load_spec
from ge_plugin.tune.profile import parse_profile

REPO = Path(__file__).resolve().parents[2]
IDS_MASK = [("ids", (-1, -1)), ("mask", (-1, -1))]


def bert_like() -> GearSet:
    """What specs/bert.yaml's keys compile to, on two inputs: batch gears 1, 4 x dims gears 16, 32."""
    return GearSet.compose(
        batch=(1, 4), dims=((16, 16), (32, 32)), inputs=[("ids", (-1,)), ("mask", (-1,))], batched=True
    )


@pytest.mark.parametrize(
    ("kind", "text", "values"),
    [
        ("batch", "1,2,4,8", ((1,), (2,), (4,), (8,))),
        ("hw", "224,224;448,448", ((224, 224), (448, 448))),
        ("dims", "1,16,1,16;4,32,4,32", ((1, 16, 1, 16), (4, 32, 4, 32))),
    ],
)
def test_gear_text_parses_and_formats_back_to_atcs_own_text(kind, text, values):
    assert parse_values(text, kind=kind) == values
    assert format_values(values, kind=kind) == text


@pytest.mark.parametrize(
    ("kind", "text", "problem", "detail"),
    [
        ("batch", "", "empty", {}),
        ("batch", "1,x", "not_integer", {"item": "x"}),
        ("dims", "16;0", "below_one", {"value": 0}),
        ("hw", "224,224,3", "not_pairs", {}),
        ("dims", "1,16;1", "widths", {"widths": (1, 2)}),
    ],
)
def test_gear_text_faults_name_the_rule_and_the_item(kind, text, problem, detail):
    with pytest.raises(GearTextError) as caught:
        parse_values(text, kind=kind)
    assert caught.value.problem == problem
    for key, value in detail.items():
        assert getattr(caught.value, key) == value


def test_gear_set_composed_from_a_specs_keys_is_atcs_grid_batch_major():
    gears = bert_like()
    assert gears.kind == "dims" and gears.flag == "dynamic_dims"
    assert gears.flag_value() == "1,16,1,16;1,32,1,32;4,16,4,16;4,32,4,32"
    assert gears.slots == (("ids", 0), ("ids", 1), ("mask", 0), ("mask", 1))
    assert gears.labels == ("1,16,1,16", "1,32,1,32", "4,16,4,16", "4,32,4,32")
    assert [gears.name(n) for n in range(len(gears))] == ["1x16", "1x32", "4x16", "4x32"]


def test_gear_set_from_acl_reads_dims_gears_in_either_layout_as_the_same_gears():
    """get_input_dynamic_dims lists every dim of every input, or only the -1 ones; both are one gear set."""
    batch = {"batchCount": 0, "batch": []}
    hw = {"hwCount": 0, "hw": []}
    inputs = [("ids", (-1, -1)), ("mask", (-1, -1)), ("scale", (3,))]
    # every dim of every input (the fixed input's 3 too), or the -1 ones only (in another order here, and
    # with a value past dimCount, which pyACL does not read)
    full = [{"dimCount": 5, "dims": [b, s, b, s, 3]} for b in (1, 4) for s in (16, 32)]
    minus = [{"dimCount": 4, "dims": [b, s, b, s, 0]} for b in (4, 1) for s in (32, 16)]
    read_full = GearSet.from_acl(batch, hw, full, inputs)
    read_minus = GearSet.from_acl(batch, hw, minus, inputs)
    assert read_full.values == bert_like().values
    assert read_full.same_gears(bert_like()) and read_minus.same_gears(bert_like())
    assert not read_minus.same_gears(GearSet("dims", bert_like().values[:3], bert_like().slots))
    with pytest.raises(ValueError, match=r"a dims gear \[1, 16, 1\] that fits no input layout"):
        GearSet.from_acl(batch, hw, [{"dimCount": 3, "dims": [1, 16, 1]}], inputs)


def test_gear_set_from_acl_reads_batch_sizes_and_image_sizes():
    sizes = GearSet.from_acl({"batchCount": 3, "batch": [1, 4, 8, 0]}, None, None, [("x", (-1, 3))])
    assert (sizes.kind, sizes.values, sizes.labels) == ("batch", ((1,), (4,), (8,)), ("1", "4", "8"))
    images = GearSet.from_acl({"batchCount": 0}, {"hwCount": 2, "hw": [[8, 8], [16, 12]]}, None, [])
    assert images.describe() == "image sizes 8,8;16,12" and images.name(1) == "16x12"
    assert GearSet.from_acl({"batchCount": 0}, {"hwCount": 0}, [], []).describe() == "no gears (a static OM)"


def test_gear_set_fills_each_kinds_dims_into_the_inputs_shapes():
    assert bert_like().dims_at((4, 32, 4, 32), IDS_MASK) == ((4, 32), (4, 32))
    images = GearSet("hw", ((8, 8), (16, 12)))
    assert images.shapes([("x", (2, 3, -1, -1))]) == (((2, 3, 8, 8),), ((2, 3, 16, 12),))
    assert GearSet("batch", ((1,), (4,))).dims_at((4,), [("x", (-1, 16))]) == ((4, 16),)
    assert GearSet().shapes([("x", (4, 16))]) == (((4, 16),),)


def test_a_gear_label_and_a_gear_name_read_back_as_the_gear_they_name():
    gears = bert_like()
    for n, values in enumerate(gears.values):
        assert gears.parse_label(gears.label(n)) == values
        assert gears.parse_label(gears.name(n)) == values
    assert gears.parse_label("8x128") == (8, 128, 8, 128)  # a gear of the same layout, not of this set
    with pytest.raises(ValueError) as caught:
        gears.parse_label("4")
    assert str(caught.value) == (
        "gear '4' is not a gear of this model: a label is 4 values, the batch and each -1 dim of every input "
        "(as '1,16,1,16'), or one input's as the engine names the gear (as '1x16')"
    )


def test_a_config_and_an_om_disagreeing_are_said_in_both_their_words():
    om = bert_like()
    images = GearSet("hw", ((8, 8), (16, 16)))
    assert om.against(images) == "no image-size gears (a dims OM)"
    assert images.against(GearSet("hw", ((8, 8),))) == "image sizes 8,8;16,16"


@pytest.mark.parametrize("spec", ["bert", "llama"])
def test_a_profile_of_the_engines_gear_names_reads_as_the_simulators_labels(spec):
    """A user who copies the gear names of ge_executes_total{gear="1x16"} into a profile gets those gears."""
    model = load_spec(REPO / "specs" / f"{spec}.yaml")
    profile = parse_profile({"1x16": 2.0, "8x128": 9.0}, model, where="p.json")
    full = "1,16,1,16" if spec == "bert" else "1,16"
    assert profile.by_gear == {full: 2.0, ("8,128,8,128" if spec == "bert" else "8,128"): 9.0}
