"""TritonPythonModel of backend ge, against the real pb_utils module with the stub's C++ parts faked."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from ge_plugin.sim import faults, snapshot


def load_model(pb_utils):
    from ge_plugin.backend import model

    return model.TritonPythonModel()


def test_adapter_serves_a_batch_and_resolves_om_path_against_the_version_dir(
    pb_utils, identity_repo, args_for
):
    model = load_model(pb_utils)
    model.initialize(args_for(identity_repo))
    data = [np.full((rows, 16), rows, np.float32) for rows in (1, 3, 2)]
    responses = model.execute([pb_utils.InferenceRequest({"INPUT0": d}) for d in data])
    assert len(responses) == 3
    for response, d in zip(responses, data):
        assert not response.has_error()
        (tensor,) = response.output_tensors()
        assert tensor.name() == "OUTPUT0"
        np.testing.assert_array_equal(tensor.as_numpy(), d)
    assert model.engine.stats.executes == 1  # the three requests ran as one batch of 6 rows (gear 8)
    model.finalize()
    assert snapshot()["devices"][0]["live_bytes"] == 0


def test_adapter_maps_bad_input_to_invalid_arg_and_keeps_batch_mates(pb_utils, identity_repo, args_for):
    model = load_model(pb_utils)
    model.initialize(args_for(identity_repo))
    good = np.ones((1, 16), np.float32)
    responses = model.execute(
        [
            pb_utils.InferenceRequest({"INPUT0": good}),
            pb_utils.InferenceRequest({"INPUT0": np.ones((1, 15), np.float32)}),
            pb_utils.InferenceRequest({"INPUT0": good}),
        ]
    )
    assert [r.has_error() for r in responses] == [False, True, False]
    error = responses[1].error()
    assert error.code() == pb_utils.TritonError.INVALID_ARG
    assert error.message().startswith("input 'INPUT0'")
    model.finalize()


def test_adapter_maps_a_device_fault_to_internal_and_recovers(pb_utils, identity_repo, args_for):
    model = load_model(pb_utils)
    model.initialize(args_for(identity_repo))
    faults.inject("mdl.execute_async", 507011, nth=1)
    (failed,) = model.execute([pb_utils.InferenceRequest({"INPUT0": np.ones((2, 16), np.float32)})])
    assert failed.error().code() == pb_utils.TritonError.INTERNAL
    assert "ACL_ERROR_RT_MODEL_EXECUTE (507011)" in failed.error().message()
    (ok,) = model.execute([pb_utils.InferenceRequest({"INPUT0": np.ones((2, 16), np.float32)})])
    assert not ok.has_error()
    model.finalize()


def test_adapter_publishes_metrics_off_the_request_path(pb_utils, identity_repo, args_for):
    model = load_model(pb_utils)
    model.initialize(args_for(identity_repo, metrics_interval_ms="3600000"))
    at_start = len(pb_utils.MetricFamily.calls)
    for _ in range(50):
        model.execute([pb_utils.InferenceRequest({"INPUT0": np.ones((1, 16), np.float32)})])
    assert len(pb_utils.MetricFamily.calls) == at_start  # no IPC per request or per execute
    metrics = model.metrics._metrics
    model.finalize()  # the final flush sends the totals once
    assert metrics == {}  # dropped before their families, as the python backend requires
    sent = [name for kind, name in pb_utils.MetricFamily.calls[at_start:] if kind == "increment"]
    assert sent.count("ge_rows_total") == 1
    assert sent.count("ge_executes_total") == 1


def test_adapter_returns_only_the_requested_outputs(pb_utils, oms, tmp_path):
    version = tmp_path / "two" / "1"
    version.mkdir(parents=True)
    shutil.copyfile(oms["two_outputs"], version / "two.om")
    config = {
        "name": "two",
        "backend": "ge",
        "max_batch_size": 4,
        "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}],
        "output": [
            {"name": "doubled", "data_type": "TYPE_FP32", "dims": [4]},
            {"name": "summed", "data_type": "TYPE_FP32", "dims": [1]},
        ],
        "parameters": {"om_model_path": {"string_value": "two.om"}},
    }
    args = {
        "model_config": json.dumps(config),
        "model_instance_name": "npu0_0",
        "model_repository": str(tmp_path / "two"),
        "model_version": "1",
        "model_name": "two",
    }
    model = load_model(pb_utils)
    model.initialize(args)
    x = np.ones((1, 4), np.float32)
    responses = model.execute(
        [
            pb_utils.InferenceRequest({"x": x}, requested={"summed"}),
            pb_utils.InferenceRequest({"x": x}, requested={"doubled", "summed"}),
        ]
    )
    assert [t.name() for t in responses[0].output_tensors()] == ["summed"]
    assert [t.name() for t in responses[1].output_tensors()] == ["doubled", "summed"]
    model.finalize()


def test_adapter_with_one_output_reads_no_requested_names(pb_utils, identity_repo, args_for):
    # every request of a one-output model asks for that output (Triton fills in all outputs when a client
    # names none): reading the names would be per-request work for nothing
    model = load_model(pb_utils)
    model.initialize(args_for(identity_repo))
    request = pb_utils.InferenceRequest({"INPUT0": np.ones((1, 16), np.float32)}, requested={"OUTPUT0"})
    asked: list[int] = []

    def requested_output_names() -> set[str]:
        asked.append(1)
        return {"OUTPUT0"}

    request.requested_output_names = requested_output_names
    (response,) = model.execute([request])
    assert [t.name() for t in response.output_tensors()] == ["OUTPUT0"] and asked == []
    model.finalize()


def test_adapter_turns_config_errors_into_model_exceptions(pb_utils, identity_repo, args_for):
    model = load_model(pb_utils)
    with pytest.raises(pb_utils.TritonModelException, match="OM file not found"):
        model.initialize(args_for(identity_repo, om_model_path="nowhere.om"))
    assert snapshot()["devices"][0]["live_bytes"] == 0


def test_adapter_answers_unavailable_while_the_instance_recovers_and_logs_why(
    pb_utils, identity_repo, args_for
):
    model = load_model(pb_utils)
    model.initialize(args_for(identity_repo, warmup="0"))
    faults.inject("mdl.execute_async", 507011, nth=1)
    faults.inject("mdl.load_from_file", 145000, nth=1)  # the lane's rebuild fails once
    request = pb_utils.InferenceRequest({"INPUT0": np.ones((1, 16), np.float32)})
    (failed,) = model.execute([request])
    (waiting,) = model.execute([request])
    assert failed.error().code() == pb_utils.TritonError.INTERNAL
    assert waiting.error().code() == pb_utils.TritonError.UNAVAILABLE
    assert "recovering from a device failure" in waiting.error().message()
    logged = "\n".join(pb_utils.Logger.lines)
    assert "ge: model identity: an execute of 1 request(s) failed" in logged
    assert "lane 0 could not be rebuilt (attempt 1" in logged
    model.finalize()


def test_adapter_names_the_model_once_in_a_load_error(pb_utils, identity_repo, args_for):
    model = load_model(pb_utils)
    args = args_for(identity_repo)
    config = json.loads(args["model_config"])
    del config["output"]
    args["model_config"] = json.dumps(config)
    with pytest.raises(pb_utils.TritonModelException) as raised:
        model.initialize(args)
    assert str(raised.value) == "model 'identity': the config declares no output"
    with pytest.raises(pb_utils.TritonModelException) as raised:
        load_model(pb_utils).initialize(args_for(identity_repo, om_model_path="nowhere.om"))
    assert str(raised.value).startswith("model 'identity': OM file not found")


def test_adapter_logs_its_gears_as_plain_labels(pb_utils, identity_repo, args_for):
    model = load_model(pb_utils)
    model.initialize(args_for(identity_repo))
    model.finalize()
    assert any(", gears 1, 2, 4, 8, " in line for line in pb_utils.Logger.lines), pb_utils.Logger.lines


def test_adapter_labels_its_metrics_with_the_chip_the_runtime_names(
    pb_utils, identity_repo, args_for, monkeypatch
):
    """``device`` is the pod-local id, ``physical_id`` the chip npu-exporter's ``id`` names (issue 32 §2)."""
    monkeypatch.setenv("ASCEND_VISIBLE_DEVICES", "Ascend910-5")
    model = load_model(pb_utils)
    model.initialize(args_for(identity_repo))
    model.metrics.flush()
    labels = model.metrics._metrics["ge_device_busy_seconds_total"].labels
    model.finalize()
    assert (labels["device"], labels["physical_id"]) == ("0", "5")


def test_adapter_publishes_npu_busy_time_and_memory_on_the_timer(pb_utils, identity_repo, args_for):
    model = load_model(pb_utils)
    model.initialize(args_for(identity_repo, metrics_interval_ms="3600000"))
    at_start = len(pb_utils.MetricFamily.calls)
    for _ in range(20):
        model.execute([pb_utils.InferenceRequest({"INPUT0": np.ones((8, 16), np.float32)})])
    assert len(pb_utils.MetricFamily.calls) == at_start  # nothing per request
    model.metrics.flush()
    metrics = model.metrics._metrics
    busy = metrics["ge_device_busy_seconds_total"]
    assert busy.value > 0
    assert busy.labels["device"] == "0"
    assert 0 < metrics["ge_device_busy_fraction"].value <= 1
    used, total = metrics["ge_device_memory_used_bytes"].value, metrics["ge_device_memory_total_bytes"].value
    assert model.engine.stats.device_bytes <= used < total
    model.finalize()


def test_adapter_times_nothing_unless_asked_at_initialize(pb_utils, identity_repo, args_for, monkeypatch):
    monkeypatch.delenv("GE_PLUGIN_STUB_TIMING", raising=False)
    model = load_model(pb_utils)
    model.initialize(args_for(identity_repo))
    assert model.timer is None and "execute" not in vars(model)  # the plain execute, nothing per request
    model.finalize()


def test_adapter_timing_hook_records_each_phase_and_writes_them_at_finalize(
    pb_utils, identity_repo, args_for, monkeypatch, tmp_path
):
    from ge_plugin.backend import timing

    monkeypatch.setenv("GE_PLUGIN_STUB_TIMING", str(tmp_path / "timing"))
    model = load_model(pb_utils)
    model.initialize(args_for(identity_repo))
    monkeypatch.delenv("GE_PLUGIN_STUB_TIMING")  # read once, at initialize
    for rows in (1, 2):
        requests = [pb_utils.InferenceRequest({"INPUT0": np.ones((1, 16), np.float32)}) for _ in range(rows)]
        responses = model.execute(requests)
        assert [len(r.output_tensors()) for r in responses] == [1] * rows
    model.finalize()
    (found,) = timing.read(tmp_path / "timing")
    assert (found["model"], found["instance"]) == ("identity", "npu0_0")
    samples = found["samples"]
    assert [s["requests"] for s in samples] == [1, 2]
    for s in samples:
        assert s["read_us"] > 0 and s["respond_us"] > 0
        assert 0 < s["stream_us"] < s["work_us"]  # the engine's time on the stream is part of its call


def test_adapter_timing_hook_with_two_streams_times_the_submit_and_no_responding(
    pb_utils, identity_repo, args_for, monkeypatch, tmp_path
):
    from ge_plugin.backend import timing

    monkeypatch.setenv("GE_PLUGIN_STUB_TIMING", str(tmp_path / "timing"))
    model = load_model(pb_utils)
    model.initialize(args_for(identity_repo, streams_per_instance="2"))
    request = pb_utils.InferenceRequest({"INPUT0": np.ones((1, 16), np.float32)})
    assert model.execute([request]) is None  # answered by the response sender
    model.engine.wait_idle()
    assert len(request.sender.sent) == 1
    model.finalize()
    ((sample,),) = [found["samples"] for found in timing.read(tmp_path / "timing")]
    assert sample["work_us"] > 0 and math.isnan(sample["respond_us"]) and math.isnan(sample["stream_us"])


def test_adapter_answers_a_one_lane_models_slow_executes_from_its_completion_thread(
    pb_utils, identity_repo, args_for
):
    """One slow execute (20 ms of simulated device time) is answered as usual and turns the instance to
    answering from the completion thread: the next ``execute`` returns None and its response is sent."""
    from ge_plugin.engine.modes import ANSWER_LATER_US

    assert ANSWER_LATER_US < 20_000
    slow = json.dumps({"ge_plugin_sim": {"execute_latency_ms": 20}})
    model = load_model(pb_utils)
    model.initialize(args_for(identity_repo, acl_json=slow))
    first, second = (np.full((1, 16), k, np.float32) for k in (1, 2))
    (response,) = model.execute([pb_utils.InferenceRequest({"INPUT0": first})])
    np.testing.assert_array_equal(response.output_tensors()[0].as_numpy(), first)
    request = pb_utils.InferenceRequest({"INPUT0": second})
    assert model.execute([request]) is None
    model.engine.wait_idle()
    ((sent, flags),) = request.sender.sent
    assert flags == pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
    np.testing.assert_array_equal(sent.output_tensors()[0].as_numpy(), second)
    model.finalize()
    assert snapshot()["devices"][0]["live_bytes"] == 0


def test_adapter_returns_responses_again_once_a_one_lane_models_executes_are_quick(
    pb_utils, identity_repo, args_for
):
    """The choice follows a running average, not one execute: once the device is quick again (the
    simulated device time set to 0 ms), the instance goes back to returning its responses from ``execute``."""
    from ge_plugin.sim import device_time

    model = load_model(pb_utils)
    model.initialize(
        args_for(identity_repo, acl_json=json.dumps({"ge_plugin_sim": {"execute_latency_ms": 20}}))
    )
    data = np.ones((1, 16), np.float32)
    assert model.execute([pb_utils.InferenceRequest({"INPUT0": data})]) is not None  # the first one returns
    assert model.execute([pb_utils.InferenceRequest({"INPUT0": data})]) is None
    device_time.set_profile(device_time.LatencyProfile(base_ms=0.0))
    answers = []
    for _ in range(40):
        request = pb_utils.InferenceRequest({"INPUT0": data})
        returned = model.execute([request])
        model.engine.wait_idle()
        answers.append("returned" if returned is not None else "sent")
        if returned is None:
            assert len(request.sender.sent) == 1
    assert answers[-10:] == ["returned"] * 10, answers
    model.finalize()


def test_a_one_lane_instance_answering_later_fails_a_device_fault_alone_and_serves_on(
    pb_utils, identity_repo, args_for
):
    """The completion thread's path with a single lane: a device fault on a batch's execute is isolated by
    running its requests again alone (the fault does not come back: both are answered), a fault on a lone
    request's execute is its INTERNAL error, and the next batch is served."""
    model = load_model(pb_utils)
    model.initialize(
        args_for(identity_repo, acl_json=json.dumps({"ge_plugin_sim": {"execute_latency_ms": 20}}))
    )
    data = np.ones((1, 16), np.float32)
    assert (
        model.execute([pb_utils.InferenceRequest({"INPUT0": data})]) is not None
    )  # turns it to answer later
    faults.inject("mdl.execute_async", 507011, nth=1)
    requests = [pb_utils.InferenceRequest({"INPUT0": data * k}) for k in (2, 3)]
    assert model.execute(requests) is None
    model.engine.wait_idle()
    answers = [request.sender.sent for request in requests]
    assert all(len(sent) == 1 for sent in answers), answers
    # the fault hit the batch's one execute, not a request: the isolation reruns each alone and both succeed
    for request, k in zip(requests, (2, 3)):
        ((response, _),) = request.sender.sent
        assert not response.has_error(), response.error().message()
        np.testing.assert_array_equal(response.output_tensors()[0].as_numpy(), data * k)
    faults.inject("mdl.execute_async", 507011, nth=1)
    lone = pb_utils.InferenceRequest({"INPUT0": data})
    assert model.execute([lone]) is None
    model.engine.wait_idle()
    ((failed, _),) = lone.sender.sent
    assert failed.error().code() == pb_utils.TritonError.INTERNAL
    assert "ACL_ERROR_RT_MODEL_EXECUTE (507011)" in failed.error().message()
    after = pb_utils.InferenceRequest({"INPUT0": data * 4})
    assert model.execute([after]) is None
    model.engine.wait_idle()
    ((response, _),) = after.sender.sent
    np.testing.assert_array_equal(response.output_tensors()[0].as_numpy(), data * 4)
    model.finalize()
    assert snapshot()["devices"][0]["live_bytes"] == 0


@pytest.mark.parametrize("cancel", ["grpc", "http"])
def test_adapter_drops_requests_whose_client_left_before_the_batch_runs(
    pb_utils, identity_repo, args_for, cancel, tmp_path, monkeypatch
):
    """On a model whose executes take device time, a request Triton cancelled (a gRPC client's) or whose
    ticket the HTTP front wrote to the gone-clients ring is answered CANCELLED and never reaches the
    engine; the others of its batch are answered as usual."""
    from ge_plugin import gone_clients

    ring = gone_clients.GoneClients.create(tmp_path)
    monkeypatch.setenv(gone_clients.ENV, str(ring.path))
    slow = json.dumps({"ge_plugin_sim": {"execute_latency_ms": 20}})
    model = load_model(pb_utils)
    model.initialize(args_for(identity_repo, acl_json=slow))
    data = [np.full((1, 16), k, np.float32) for k in range(3)]
    model.execute([pb_utils.InferenceRequest({"INPUT0": data[0]})])  # the executes' cost is known after one
    model.engine.wait_idle()
    rows = model.engine.stats.rows
    ring.add(77)
    left = {"cancelled": True} if cancel == "grpc" else {"parameters": json.dumps({"ge_front_ticket": 77})}
    requests = [
        pb_utils.InferenceRequest({"INPUT0": data[1]}, **left),
        pb_utils.InferenceRequest({"INPUT0": data[2]}, parameters=json.dumps({"ge_front_ticket": 78})),
    ]
    returned = model.execute(requests)
    model.engine.wait_idle()
    answers = returned or [request.sender.sent[0][0] for request in requests]
    assert answers[0].error().code() == pb_utils.TritonError.CANCELLED
    np.testing.assert_array_equal(answers[1].output_tensors()[0].as_numpy(), data[2])
    assert model.engine.stats.rows == rows + 1
    model.finalize()
    ring.close(unlink=True)
