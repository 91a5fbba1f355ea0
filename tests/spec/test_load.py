from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ge_plugin import dtypes
from ge_plugin.errors import SpecError
from ge_plugin.params import DimTie, ModelParams
from ge_plugin.spec import check_specs, load_spec, load_specs, spec_files

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"


def test_load_spec_reads_the_llama_example():
    spec = load_spec(SPECS / "llama.yaml")

    assert spec.name == "llama_model"
    assert spec.path == SPECS / "llama.yaml"
    assert spec.max_batch_size == 8
    assert spec.gears == (1, 4, 8)
    assert [(t.name, t.dtype.triton, t.dims) for t in spec.inputs] == [("input_ids", "TYPE_INT64", (-1,))]
    assert [(t.name, t.dtype.triton, t.dims) for t in spec.outputs] == [("logits", "TYPE_FP32", (-1, 32000))]
    assert spec.om_filename == "llama.om"
    assert spec.source_path == ROOT / "build" / "models" / "tiny_llama.onnx"
    assert spec.dims_gears == ((16,), (32,), (64,), (128,))


def test_load_spec_expands_the_dims_gears_shorthand_to_every_dynamic_dim():
    spec = load_spec(SPECS / "bert.yaml")

    assert spec.dynamic_dims == ((0, 0), (1, 0))
    assert spec.dims_gears == ((16, 16), (32, 32), (64, 64), (128, 128))


def test_load_spec_keeps_the_full_dims_gears_form(write_spec, variant):
    text = variant(
        {"    dims: [-1]": "    dims: [-1, -1]", "dims_gears: [16, 32]": "dims_gears: [[16, 2], [32, 4]]"}
    )

    assert load_spec(write_spec(text)).dims_gears == ((16, 2), (32, 4))


def test_load_spec_accepts_triton_and_numpy_dtype_names(write_spec, variant):
    text = variant({"    dtype: int64": "    dtype: TYPE_INT64", "    dtype: fp32": "    dtype: float32"})
    spec = load_spec(write_spec(text))

    assert spec.inputs[0].dtype is dtypes.by_name("int64")
    assert spec.outputs[0].dtype is dtypes.by_name("fp32")


def test_load_spec_without_batching_uses_full_model_dims(write_spec, variant):
    text = variant(
        {
            "batching:": "",
            "  gears: [1, 4, 8]": "",
            "  max_queue_delay_us: 100": "",
            "    dims: [-1]": "    dims: [1, -1]",
            "    dims: [-1, 8]": "    dims: [1, -1, 8]",
            "    follows: {0: input_ids:0}": "    follows: {1: input_ids:1}",
        }
    )
    spec = load_spec(write_spec(text))

    assert spec.batching is None
    assert spec.max_batch_size == 0
    assert spec.gears == ()
    assert spec.dims_gears == ((16,), (32,))
    assert spec.to_params().output_dim_ties == (DimTie("logits", 1, "input_ids", 1),)


def test_load_spec_applies_defaults(write_spec, variant):
    spec = load_spec(
        write_spec(variant({"placement:": "", "  devices: [0]": "", "  instances_per_device: 1": ""}))
    )

    assert spec.placement.devices == (0,)
    assert spec.placement.instances_per_device == 1
    assert spec.placement.streams_per_instance == 1
    assert spec.precision == "origin"
    assert spec.warmup == 1
    assert spec.batching is not None and spec.batching.queue.max_size == 0


def test_to_params_carries_everything_the_backend_reads(write_spec, variant):
    text = variant(
        {"  devices: [0]": "  devices: [2, 3]\n  streams_per_instance: 4"},
        append="precision: bf16\nwarmup: 0\npad_value: -1.5\nmetrics_interval_ms: 250\n"
        "acl_json: {dump: {dump_path: /tmp/d}, err_msg_mode: '1'}\n",
    )
    params = load_spec(write_spec(text)).to_params()

    assert params == ModelParams(
        om_model_path="m.om",
        device_ids=(2, 3),
        gears=(1, 4, 8),
        dims_gears=((16,), (32,)),
        output_dim_ties=(DimTie("logits", 0, "input_ids", 0),),
        pad_value=-1.5,
        precision="bf16",
        streams_per_instance=4,
        acl_json='{"dump":{"dump_path":"/tmp/d"},"err_msg_mode":"1"}',
        warmup=0,
        metrics_interval_ms=250,
    )
    # what the backend will read back from config.pbtxt
    assert ModelParams.from_parameters(params.to_parameters()) == params


def test_load_specs_reads_a_directory_in_name_order(tmp_path):
    for name in ("llama.yaml", "bert.yaml"):
        shutil.copy(SPECS / name, tmp_path / name)
    (tmp_path / "notes.txt").write_text("not a spec")

    assert [s.name for s in load_specs([tmp_path])] == ["bert_model", "llama_model"]
    assert spec_files([tmp_path]) == [tmp_path / "bert.yaml", tmp_path / "llama.yaml"]


def test_load_specs_rejects_a_model_name_used_twice(tmp_path):
    shutil.copy(SPECS / "llama.yaml", tmp_path / "a.yaml")
    shutil.copy(SPECS / "llama.yaml", tmp_path / "b.yaml")

    with pytest.raises(SpecError) as info:
        load_specs([tmp_path])

    assert info.value.problems == [
        f"{tmp_path / 'b.yaml'}:4: $.name: model name 'llama_model' is already used by {tmp_path / 'a.yaml'}"
    ]


def test_load_specs_names_paths_that_hold_no_spec(tmp_path):
    (tmp_path / "empty").mkdir()

    with pytest.raises(SpecError) as info:
        load_specs([tmp_path / "missing.yaml", tmp_path / "empty"])

    assert info.value.problems == [
        f"{tmp_path / 'missing.yaml'}: no such file or directory",
        f"{tmp_path / 'empty'}: no *.yaml or *.yml spec files in this directory",
    ]


def test_check_specs_reports_valid_and_invalid_files_separately(write_spec, variant):
    good = write_spec(variant(), name="good.yaml")
    bad = write_spec(
        variant({"    dtype: int64": "    dtype: fp33"}, base=variant().replace("name: m", "name: n")),
        "bad.yaml",
    )

    good_result, bad_result = check_specs([good, bad])

    assert good_result.spec is not None and good_result.problems == ()
    assert bad_result.spec is None
    assert [p.split(": ", 2)[:2] for p in bad_result.problems] == [[f"{bad}:8", "$.inputs[0].dtype"]]


def test_load_spec_reports_unreadable_text(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"name: caf\xe9\n")

    with pytest.raises(SpecError) as info:
        load_spec(path)

    assert info.value.problems[0].startswith(f"{path}: cannot read: ")


def test_load_specs_reads_a_file_named_twice_once():
    specs = load_specs([SPECS, SPECS / "llama.yaml"])

    assert [s.name for s in specs] == [
        "bert_model",
        "cnn_jpeg",
        "llama_model",
        "llama_generate",
        "llama_generate_layers",
    ]
