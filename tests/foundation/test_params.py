"""The config.pbtxt parameters contract between the renderer and the backend."""

import json

import attrs
import pytest

from ge_plugin import params
from ge_plugin.errors import ConfigError
from ge_plugin.params import DimTie, ModelParams


def test_params_round_trip_through_strings():
    params = ModelParams(
        om_model_path="llama.om",
        device_ids=(0, 3),
        gears=(1, 4, 8),
        dims_gears=((16,), (32,), (128,)),
        output_dim_ties=(DimTie("logits", 0, "input_ids", 0),),
        pad_value=2.5,
        precision="fp16",
        streams_per_instance=2,
        acl_json='{"err_msg_mode": "1"}',
        warmup=0,
        metrics_interval_ms=250,
    )
    strings = params.to_parameters()
    assert strings["device_ids"] == "0,3"
    assert strings["dims_gears"] == "16;32;128"
    assert strings["output_dim_ties"] == "logits:0=input_ids:0"
    assert list(strings) == sorted(strings)
    assert ModelParams.from_parameters(strings) == params


def test_params_accept_triton_json_form_and_default_the_rest():
    params = ModelParams.from_parameters({"om_model_path": {"string_value": "m.om"}, "other_tool_key": "x"})
    assert params == ModelParams(om_model_path="m.om")


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({}, "parameters.om_model_path is required"),
        (
            {"om_model_path": "m.om", "device_ids": "0,x"},
            "parameters.device_ids: expected comma-separated integers, got '0,x'",
        ),
        ({"om_model_path": "m.om", "device_ids": "1,1"}, "parameters.device_ids: device ids must be unique"),
        ({"om_model_path": "m.om", "gears": "0,4"}, "parameters.gears: values must be >= 1, got 0 in '0,4'"),
        ({"om_model_path": "m.om", "dims_gears": "16,1;32"}, "every gear must list the same number of dims"),
        ({"om_model_path": "m.om", "output_dim_ties": "logits=input_ids"}, "expected OUTPUT:DIM=INPUT:DIM"),
        (
            {"om_model_path": "m.om", "precision": "fp8"},
            "parameters.precision: expected one of origin, fp16, bf16",
        ),
        (
            {"om_model_path": "m.om", "streams_per_instance": "0"},
            "parameters.streams_per_instance: values must be >= 1",
        ),
        ({"om_model_path": "m.om", "warmup": "1,2"}, "parameters.warmup: expected one integer"),
        ({"om_model_path": "m.om", "acl_json": "[1]"}, "parameters.acl_json: expected a JSON object"),
        (
            {"om_model_path": "m.om", "pad_value": "zero"},
            "parameters.pad_value: expected a number, got 'zero'",
        ),
    ],
)
def test_params_bad_values_name_the_key(parameters, message):
    with pytest.raises(ConfigError) as info:
        ModelParams.from_parameters(parameters)
    assert message in str(info.value)


@pytest.mark.parametrize("version", ["²", "٢", "0", "01", "-1", "x"])
def test_params_version_paths_refuse_what_is_not_a_version_folder(version):
    """``"²".isdigit()`` is true but ``int("²")`` fails, and ``int("٢")`` is 2: every such key is a ConfigError
    naming the parameter and the key, never a bare ValueError or another version."""
    text = json.dumps({version: "v.om"})
    with pytest.raises(ConfigError) as info:
        ModelParams.from_parameters({"om_model_path": "m.om", "version_om_model_paths": text})
    message = str(info.value)
    assert message.startswith(
        "parameters.version_om_model_paths: expected a JSON object of version -> OM path"
    )
    assert f"({version!r}: 'v.om' is not a version >= 1 and a path)" in message


def test_params_keys_are_the_fields_each_with_its_parser():
    assert tuple(field.name for field in attrs.fields(ModelParams)) == params.KEYS
    assert params.KEYS[0] == "om_model_path"
    assert set(ModelParams(om_model_path="m.om").to_parameters()) <= set(params.KEYS)
