"""``check_parameters``: every request field and parameter tritonserver 2.51 reads with a typed accessor (and
answers 500 when the type is wrong, measured) is refused by the front with 400 naming it."""

from __future__ import annotations

import pytest

from ge_plugin.serve.policy import Refused, check_parameters

INPUT = {"name": "INPUT0", "shape": [1, 2], "datatype": "FP32", "data": [0.0, 1.0]}


def request(**fields) -> dict:
    body: dict = {"inputs": [dict(INPUT)]}
    for key, value in fields.items():
        if key == "input_parameters":
            body["inputs"][0]["parameters"] = value
        else:
            body[key] = value
    return body


#: (request, what the error names): each answered 500 by tritonserver 2.51 when sent to it directly
MALFORMED = {
    "parameters a list": (request(parameters=[]), "request 'parameters' must be an object"),
    "parameters null": (request(parameters=None), "request 'parameters' must be an object"),
    "priority a string": (
        request(parameters={"priority": "high"}),
        "parameter 'priority' must be an integer",
    ),
    "priority negative": (request(parameters={"priority": -1}), "parameter 'priority'"),
    "priority a float": (request(parameters={"priority": 1.5}), "parameter 'priority'"),
    "priority too large": (request(parameters={"priority": 1 << 64}), "parameter 'priority'"),
    "timeout negative": (request(parameters={"timeout": -5}), "parameter 'timeout'"),
    "sequence_id negative": (
        request(parameters={"sequence_id": -1}),
        "parameter 'sequence_id' must be a string",
    ),
    "sequence_id a list": (request(parameters={"sequence_id": [1]}), "parameter 'sequence_id'"),
    "sequence_start 1": (
        request(parameters={"sequence_start": 1}),
        "parameter 'sequence_start' must be true or",
    ),
    "sequence_end a string": (request(parameters={"sequence_end": "true"}), "parameter 'sequence_end'"),
    "binary_data_output 1": (request(parameters={"binary_data_output": 1}), "parameter 'binary_data_output'"),
    "custom a list": (request(parameters={"x": [1]}), "request parameter 'x' must be a string, a number"),
    "custom null": (request(parameters={"x": None}), "request parameter 'x'"),
    "shared_memory_byte_size a string": (
        request(input_parameters={"shared_memory_byte_size": "x"}),
        "input 'INPUT0': parameter 'shared_memory_byte_size'",
    ),
    "shared_memory_offset negative": (
        request(input_parameters={"shared_memory_offset": -1}),
        "input 'INPUT0': parameter 'shared_memory_offset'",
    ),
    "binary_data 1": (
        request(outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": 1}}]),
        "output 'OUTPUT0': parameter 'binary_data' must be true or false",
    ),
    "classification a string": (
        request(outputs=[{"name": "OUTPUT0", "parameters": {"classification": "x"}}]),
        "output 'OUTPUT0': parameter 'classification'",
    ),
    "output region an integer": (
        request(outputs=[{"name": "OUTPUT0", "parameters": {"shared_memory_region": 1}}]),
        "parameter 'shared_memory_region' must be a string",
    ),
    "output name an integer": (request(outputs=[{"name": 5}]), "outputs[0] 'name' must be a string"),
    "outputs an object": (request(outputs={"name": "OUTPUT0"}), "request 'outputs' must be a list"),
    "output a string": (request(outputs=["OUTPUT0"]), "outputs[0] must be an object"),
    "output without a name": (request(outputs=[{"parameters": {}}]), "outputs[0] has no 'name'"),
    "id an integer": (request(id=5), "request 'id' must be a string"),
    "input name an integer": ({"inputs": [dict(INPUT, name=5)]}, "inputs[0] 'name' must be a string"),
    "input datatype an integer": ({"inputs": [dict(INPUT, datatype=5)]}, "inputs[0] 'datatype'"),
    "inputs an object": ({"inputs": INPUT}, "request 'inputs' must be a list"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_parameter_is_refused_naming_it(case):
    body, named = MALFORMED[case]
    with pytest.raises(Refused) as caught:
        check_parameters(body)
    assert caught.value.status == 400
    assert named in str(caught.value), str(caught.value)


@pytest.mark.parametrize(
    "body",
    [
        request(),
        request(id="r1", parameters={"priority": 0, "timeout": (1 << 64) - 1, "sequence_id": "s"}),
        request(parameters={"sequence_id": 7, "sequence_start": True, "sequence_end": False, "x": 1.5}),
        request(parameters={"binary_data_output": True, "custom": "v", "big": 1 << 70}),
        request(input_parameters={"binary_data_size": 8, "shared_memory_region": "r"}),
        request(input_parameters=[]),  # tritonserver ignores input parameters that are not an object
        request(outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": True, "classification": 3}}]),
        {"outputs": []},  # no inputs: tritonserver's own 400
    ],
)
def test_well_formed_parameters_pass(body):
    check_parameters(body)
