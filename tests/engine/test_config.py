"""Reading the model config the engine serves (Triton's JSON form and config.pbtxt files)."""

import pytest

from ge_plugin.engine import ServingConfig, device_for_instance, read_config_pbtxt
from ge_plugin.errors import ConfigError

LLAMA = {
    "name": "llama_model",
    "backend": "ge",
    "max_batch_size": 8,
    "input": [{"name": "input_ids", "data_type": "TYPE_INT64", "dims": ["-1"]}],
    "output": [{"name": "logits", "data_type": "TYPE_FP32", "dims": [-1, 32000]}],
    "parameters": {
        "om_model_path": {"string_value": "llama.om"},
        "output_dim_ties": {"string_value": "logits:0=input_ids:0"},
    },
}


def test_config_reads_triton_json_with_string_dims():
    config = ServingConfig.from_model_config(LLAMA)
    assert config.batched
    assert config.inputs[0].dims == (-1,)
    assert config.inputs[0].dtype.short == "int64"
    assert config.outputs[0].dims == (-1, 32000)
    assert config.params.om_model_path == "llama.om"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"backend": "python"}, "backend is 'python', expected 'ge'"),
        ({"input": []}, "declares no input"),
        (
            {"input": [{"name": "input_ids", "data_type": "TYPE_INT65", "dims": [-1]}]},
            "unknown data type 'TYPE_INT65'",
        ),
        (
            {"input": [{"name": "input_ids", "data_type": "TYPE_STRING", "dims": [-1]}]},
            "TYPE_STRING tensors cannot",
        ),
        (
            {"input": [{"name": "input_ids", "data_type": "TYPE_INT64", "dims": [0]}]},
            "dims must be positive or -1",
        ),
        ({"parameters": {}}, "model 'llama_model': parameters.om_model_path is required"),
        (
            {"parameters": {"om_model_path": "m.om", "output_dim_ties": "logits:0=tokens:0"}},
            "no input named 'tokens'",
        ),
        (
            {"parameters": {"om_model_path": "m.om", "output_dim_ties": "logits:2=input_ids:0"}},
            "output 'logits' has only 2 dims",
        ),
    ],
)
def test_config_errors_name_the_field(change, message):
    with pytest.raises(ConfigError) as info:
        ServingConfig.from_model_config({**LLAMA, **change})
    assert message in str(info.value)


def test_config_pbtxt_file_reads_like_the_json_triton_passes(tmp_path):
    path = tmp_path / "config.pbtxt"
    path.write_text(
        'name: "m"\nbackend: "ge"\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'parameters: [ { key: "om_model_path" value: { string_value: "m.om" } } ]\n'
    )
    config = ServingConfig.from_model_config(read_config_pbtxt(path))
    assert config.max_batch_size == 0
    assert config.inputs[0].dims == (4,)


def test_config_pbtxt_syntax_error_names_the_file(tmp_path):
    path = tmp_path / "config.pbtxt"
    path.write_text("name: \n")
    with pytest.raises(ConfigError, match=r"config\.pbtxt"):
        read_config_pbtxt(path)


@pytest.mark.parametrize(
    ("instance", "device_ids", "device"),
    [
        ("npu3_0", (0, 3), 3),
        ("npu0_1", (0,), 0),
        ("llama_model_1_0", (4, 5), 5),
        ("weird", (2,), 2),
        ("", (), 0),
    ],
)
def test_device_for_instance_follows_the_rendered_group_names(instance, device_ids, device):
    assert device_for_instance(instance, device_ids) == device
