from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from ge_plugin.params import ModelParams
from ge_plugin.render import render_config, render_text
from ge_plugin.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

#: spec -> golden config.pbtxt
CASES = {
    "llama_model": ROOT / "specs" / "llama.yaml",
    "bert_model": ROOT / "specs" / "bert.yaml",
    "classifier": HERE / "specs" / "classifier.yaml",
    "queued": HERE / "specs" / "queued.yaml",
    "versioned": HERE / "specs" / "versioned.yaml",
    "images": HERE / "specs" / "images.yaml",
}


@pytest.mark.parametrize("name", CASES)
def test_render_text_matches_golden_file(name):
    assert render_text(load_spec(CASES[name])) == (HERE / "golden" / f"{name}.pbtxt").read_text()


@pytest.mark.parametrize("name", CASES)
def test_render_text_round_trips_through_text_format(name):
    spec = load_spec(CASES[name])

    parsed = text_format.Parse(render_text(spec), mc.ModelConfig())

    assert parsed == render_config(spec)
    assert (
        ModelParams.from_parameters({k: v.string_value for k, v in parsed.parameters.items()})
        == spec.to_params()
    )


def test_render_config_for_llama_is_what_ge_users_write():
    config = text_format.Parse(render_text(load_spec(CASES["llama_model"])), mc.ModelConfig())

    assert config.name == "llama_model"
    assert config.backend == "ge"
    assert config.max_batch_size == 8
    assert [(i.name, mc.DataType.Name(i.data_type), list(i.dims)) for i in config.input] == [
        ("input_ids", "TYPE_INT64", [-1])
    ]
    assert [(o.name, mc.DataType.Name(o.data_type), list(o.dims)) for o in config.output] == [
        ("logits", "TYPE_FP32", [-1, 32000])
    ]
    assert config.parameters["om_model_path"].string_value == "llama.om"
    assert list(config.dynamic_batching.preferred_batch_size) == [
        8
    ]  # the largest gear: see _set_dynamic_batching
    assert [(g.name, g.kind, g.count) for g in config.instance_group] == [
        ("npu0", mc.ModelInstanceGroup.KIND_CPU, 1)
    ]
    assert config.parameters["streams_per_instance"].string_value == "2"


def test_render_text_writes_max_batch_size_zero():
    text = render_text(load_spec(CASES["classifier"]))

    assert "\nmax_batch_size: 0\n" in text
    assert not text_format.Parse(text, mc.ModelConfig()).HasField("dynamic_batching")


def test_render_config_names_one_instance_group_per_device():
    config = render_config(load_spec(CASES["classifier"]))

    assert [(g.name, g.count) for g in config.instance_group] == [("npu4", 3), ("npu5", 3)]
    assert config.parameters["device_ids"].string_value == "4,5"


def test_render_config_sets_queue_policy_only_when_asked():
    queued = render_config(load_spec(CASES["queued"])).dynamic_batching
    llama = render_config(load_spec(CASES["llama_model"])).dynamic_batching
    bert = render_config(load_spec(CASES["bert_model"])).dynamic_batching

    assert queued.default_queue_policy == mc.ModelQueuePolicy(
        timeout_action=mc.ModelQueuePolicy.DELAY, default_timeout_microseconds=50000, max_queue_size=128
    )
    assert llama.default_queue_policy.max_queue_size == 64
    assert not bert.HasField("default_queue_policy")


def test_render_text_starts_with_name_backend_and_max_batch_size():
    lines = render_text(load_spec(CASES["bert_model"])).splitlines()

    assert lines[0].startswith("# ")
    assert lines[1:4] == ['name: "bert_model"', 'backend: "ge"', "max_batch_size: 8"]


def test_render_allows_ragged_batches_only_for_batched_inputs_with_a_dynamic_dim():
    llama = render_config(load_spec(CASES["llama_model"]))
    assert [i.allow_ragged_batch for i in llama.input] == [True]
    queued = render_config(load_spec(CASES["queued"]))  # batch gears over fixed dims
    assert [i.allow_ragged_batch for i in queued.input] == [False]
    classifier = render_config(load_spec(CASES["classifier"]))  # max_batch_size 0
    assert [i.allow_ragged_batch for i in classifier.input] == [False]
    assert "allow_ragged_batch" not in render_text(load_spec(CASES["classifier"]))


def test_render_prefers_the_largest_gear_unless_the_spec_lists_gears(tmp_path):
    # Triton sends a batch of a preferred size at once; only the largest gear keeps max_queue_delay useful.
    text = (
        CASES["llama_model"].read_text().replace("  queue:\n", "  preferred_batch_sizes: [4, 8]\n  queue:\n")
    )
    assert "preferred_batch_sizes" in text
    custom = tmp_path / "llama.yaml"
    custom.write_text(
        text.replace("../build/models", str(CASES["llama_model"].parent.parent / "build/models"))
    )
    assert list(render_config(load_spec(custom)).dynamic_batching.preferred_batch_size) == [4, 8]
    assert list(render_config(load_spec(CASES["llama_model"])).dynamic_batching.preferred_batch_size) == [8]
