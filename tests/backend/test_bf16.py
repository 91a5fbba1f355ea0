"""TYPE_BF16 through the backend adapter: inputs read as their words through DLPack, outputs handed back as
kDLBfloat capsules over the lane's staging (no copy of ge-plugin's own, released once the stub has sent them),
and the FP32-behind-bf16 path for clients without bf16."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from ge_plugin.models import bf16_affine_reference
from ge_plugin.sim import snapshot


@pytest.fixture(scope="session")
def bf16_repo(oms, tmp_path_factory):
    """<repo>/bf16/1/bf16.om: the bf16_affine sim OM, batch gears 1,4."""
    repo = tmp_path_factory.mktemp("bf16-repo")
    (repo / "bf16" / "1").mkdir(parents=True)
    shutil.copyfile(oms["bf16_affine"], repo / "bf16" / "1" / "bf16.om")
    return repo


def bf16_args(args_for, repo, data_type: str = "TYPE_BF16", **parameters: str) -> dict:
    args = args_for(repo, **parameters)
    config = json.loads(args["model_config"])
    config.update(
        name="bf16",
        max_batch_size=4,
        input=[{"name": "x", "data_type": data_type, "dims": [8]}],
        output=[{"name": "y", "data_type": data_type, "dims": [8]}],
    )
    config["parameters"]["om_model_path"] = {"string_value": "bf16.om"}
    args.update(model_config=json.dumps(config), model_repository=str(repo / "bf16"), model_name="bf16")
    return args


def words(seed: int, rows: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0x3000, 0x4800, (rows, 8), dtype=np.uint16)


def load(pb_utils, args):
    from ge_plugin.backend import model

    instance = model.TritonPythonModel()
    instance.initialize(args)
    return instance


def test_bf16_inputs_and_outputs_are_served_bit_for_bit_without_a_copy(
    pb_utils, bf16_repo, args_for, stub_sends
):
    model = load(pb_utils, bf16_args(args_for, bf16_repo))
    requests = [words(1, 1), words(2, 2), words(3, 1)]
    responses = model.execute([pb_utils.InferenceRequest({"x": r}, bf16=frozenset({"x"})) for r in requests])
    staging = model.engine.lanes[0].out_host[0].array
    for request, response in zip(requests, responses):
        assert not response.has_error(), response.error().message()
        (tensor,) = response.output_tensors()
        assert tensor.name() == "y" and tensor.bf16
        assert np.shares_memory(tensor._array, staging)  # the capsule is over the lane's staging
        assert np.array_equal(tensor.words(), bf16_affine_reference(request))
    assert model.engine.stats.executes_by_gear == {"4": 1}
    stub_sends()
    model.finalize()
    assert snapshot()["host_pinned"]["live_bytes"] == 0


def test_a_bad_bf16_request_fails_alone(pb_utils, bf16_repo, args_for, stub_sends):
    model = load(pb_utils, bf16_args(args_for, bf16_repo))
    good = words(4, 1)
    responses = model.execute(
        [
            pb_utils.InferenceRequest({"x": good}, bf16=frozenset({"x"})),
            pb_utils.InferenceRequest({"x": np.zeros((1, 7), np.uint16)}, bf16=frozenset({"x"})),
        ]
    )
    assert not responses[0].has_error()
    assert np.array_equal(responses[0].output_tensors()[0].words(), bf16_affine_reference(good))
    error = responses[1].error()
    assert error.code() == pb_utils.TritonError.INVALID_ARG
    assert error.message() == "input 'x': dim 1 is 7, expected 8"
    stub_sends()
    model.finalize()


def test_fp32_behind_a_bf16_om_rounds_requests_to_nearest_even(pb_utils, bf16_repo, args_for):
    """For clients without bf16: the config says FP32, the OM takes bf16; requests are rounded on the way in,
    answers widened exactly on the way out."""
    model = load(pb_utils, bf16_args(args_for, bf16_repo, "TYPE_FP32"))
    x = np.random.default_rng(5).standard_normal((2, 8)).astype(np.float32) * 10
    (response,) = model.execute([pb_utils.InferenceRequest({"x": x})])
    (tensor,) = response.output_tensors()
    assert not tensor.bf16 and tensor.as_numpy().dtype == np.float32
    bits = x.view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)  # fp32 -> bf16, nearest even
    expected = bf16_affine_reference(rounded).astype(np.uint32) << 16
    assert np.array_equal(tensor.as_numpy().view(np.uint32), expected)
    model.finalize()


def test_bf16_with_several_streams_goes_through_the_response_sender(pb_utils, bf16_repo, args_for):
    model = load(pb_utils, bf16_args(args_for, bf16_repo, streams_per_instance="2"))
    requests = [pb_utils.InferenceRequest({"x": words(6 + n, 1)}, bf16=frozenset({"x"})) for n in range(3)]
    assert model.execute(requests) is None
    model.engine.wait_idle()
    for request in requests:
        ((response, _flags),) = request.sender.sent
        assert np.array_equal(
            response.output_tensors()[0].words(), bf16_affine_reference(request.inputs()[0]._array)
        )
    model.finalize()


def test_bf16_requests_allocate_nothing_on_the_device_or_pinned_after_start_up(
    pb_utils, bf16_repo, args_for, stub_sends
):
    """P6 for bf16: after start-up, a bf16 request costs no device or pinned allocation (its words are read in
    place and its answer lent from the staging)."""
    model = load(pb_utils, bf16_args(args_for, bf16_repo))
    before = snapshot()
    for n in range(300):
        batch = [
            pb_utils.InferenceRequest({"x": words(n, 1 + (n + k) % 2)}, bf16=frozenset({"x"}))
            for k in range(2)
        ]
        responses = model.execute(batch)
        assert not any(r.has_error() for r in responses)
        stub_sends()
    after = snapshot()
    for key in ("mallocs", "frees"):
        assert after["devices"][0][key] == before["devices"][0][key]
        assert after["host_pinned"][key] == before["host_pinned"][key]
    assert after["devices"][0]["executes"] - before["devices"][0]["executes"] == 300
    model.finalize()
