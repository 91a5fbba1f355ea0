"""The spec's generate: section: what it accepts and refuses (file:line), how it renders (a decoupled
config with Contract B's tensors), the ATC command it prints, and its check against the OM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ge_plugin.atc.command import atc_args
from ge_plugin.cli._generate_om import om_problems
from ge_plugin.generate import GenerateConfig
from ge_plugin.render.pbtxt import render_config
from ge_plugin.spec import check_specs, load_spec

ROOT = Path(__file__).resolve().parents[2]

SECTION = """\
name: gen
model: {om: gen.om, source: gen.onnx, soc_version: Ascend910B3}
generate:
  context: 64
  cache: {layers: 2, heads: 4, head_dim: 16}
  vocab: 512
  batch_gears: [1, 2, 4, 8, 16, 32]
  seq_gears: [1, 4, 16]
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gen.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("form", ["stacked", "per_layer"])
def test_a_generate_spec_renders_a_decoupled_contract_b_model(tmp_path, form):
    spec = load_spec(_write(tmp_path, SECTION + f"  form: {form}\n"))
    config = render_config(spec)
    assert config.model_transaction_policy.decoupled and config.max_batch_size == 0
    assert [i.name for i in config.input][:2] == ["input_ids", "max_tokens"]
    assert [i.name for i in config.input if not i.optional] == ["input_ids"]
    assert [o.name for o in config.output] == [
        "output_ids",
        "finish_reason",
        "prompt_tokens",
        "completion_tokens",
    ]
    engine = GenerateConfig.from_json(config.parameters["generate"].string_value)
    assert engine.form == form and engine.eos_ids == (2,)


def test_atc_print_renders_the_decode_and_prefill_gears(tmp_path):
    spec = load_spec(_write(tmp_path, SECTION))
    args = atc_args(spec)
    assert (
        "--input_shape=input_ids:-1,-1;attention_mask:-1,-1;position_ids:-1,-1;past_key_values:2,2,-1,4,64,16"
        in args
    )
    assert "--input_format=ND" in args
    dims = next(a for a in args if a.startswith("--dynamic_dims="))
    assert dims.split("=")[1].split(";") == [
        *(f"{b},1,{b},65,{b},1,{b}" for b in (1, 2, 4, 8, 16, 32)),
        "1,4,1,68,1,4,1",
        "1,16,1,80,1,16,1",
    ]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda t: t.replace("batch_gears: [1, 2,", "batch_gears: [2,"),
            ":7: $.generate.batch_gears: must start at 1",
        ),
        (
            lambda t: t.replace("[1, 4, 16]", "[1, 4, 128]"),
            ":8: $.generate.seq_gears: a prefill chunk of 128 exceeds",
        ),
        (lambda t: t + "  eos_ids: [600]\n", ":9: $.generate.eos_ids[0]: 600 is not a token id"),
        (
            lambda t: t + "  form: per_layer\n  tensors: {past: pkv}\n",
            "$.generate.tensors.past: the per_layer form",
        ),
        (
            lambda t: t + "inputs: [{name: x, dtype: int64, dims: [-1]}]\n",
            "$.inputs: a generate: model takes no inputs",
        ),
        (lambda t: t.replace("context: 64", "context: 0"), ":4: $.generate.context: must be >= 1"),
    ],
)
def test_a_bad_section_is_reported_at_its_line(tmp_path, edit, expected):
    (checked,) = check_specs([_write(tmp_path, edit(SECTION))])
    assert checked.spec is None
    assert any(expected in problem for problem in checked.problems), checked.problems


def test_a_spec_without_generate_still_needs_tensors(tmp_path):
    text = "name: m\nmodel: {om: m.om, source: m.onnx, soc_version: Ascend910B3}\n"
    (checked,) = check_specs([_write(tmp_path, text)])
    assert any("$.inputs: list at least one tensor under inputs" in p for p in checked.problems)


def test_the_section_is_checked_against_the_om_at_the_lines_that_promised(tmp_path, oms, fresh_sim):
    good = load_spec(_write(tmp_path, SECTION))
    assert om_problems(good, oms["llama_kv"]) == ()
    bad = load_spec(
        _write(
            tmp_path,
            SECTION.replace("heads: 4", "heads: 8").replace("seq_gears: [1, 4, 16]", "seq_gears: [1, 8]"),
        )
    )
    problems = om_problems(bad, oms["llama_kv"])
    assert any(
        ":5: $.generate.cache.heads: llama_kv.om: the spec says 8, the OM has 4" in p for p in problems
    )
    assert any(
        ":8: $.generate.seq_gears: llama_kv.om: the spec says [1, 8], the OM has [1, 4, 16]" in p
        for p in problems
    )
    renamed = load_spec(_write(tmp_path, SECTION + "  tensors: {logits: scores}\n"))
    (problem,) = om_problems(renamed, oms["llama_kv"])
    assert ":9: $.generate.tensors.logits: llama_kv.om: the OM has no output 'scores'" in problem
    assert json.loads(good.generate.engine_json())["past"] == "past_key_values"
