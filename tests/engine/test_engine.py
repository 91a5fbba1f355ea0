"""The engine on the simulator: numerics against onnxruntime, gears, padding, errors, allocations."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from ge_plugin.engine import Engine
from ge_plugin.errors import AclError, ConfigError, RequestError
from ge_plugin.sim import faults, snapshot


@pytest.fixture(scope="module")
def ort_sessions(demo_models_dir):
    def session(name):
        return ort.InferenceSession(str(demo_models_dir / f"{name}.onnx"), providers=["CPUExecutionProvider"])

    return {"llama": session("tiny_llama"), "bert": session("tiny_bert")}


def llama_reference(sessions, ids):
    return sessions["llama"].run(None, {"input_ids": ids})[0]


def bert_reference(sessions, ids, mask):
    return sessions["bert"].run(None, {"input_ids": ids, "attention_mask": mask})[0]


def test_engine_single_llama_request_equals_onnxruntime(cfg, oms, ort_sessions):
    ids = cfg.tokens(np.random.default_rng(1), 1, 7)
    with Engine.from_model_config(cfg.llama(oms["llama"]), version_dir="/") as engine:
        (result,) = engine.execute([{"input_ids": ids}])
        assert result["logits"].shape == (1, 7, 32000)
        np.testing.assert_array_equal(result["logits"], llama_reference(ort_sessions, ids))
        assert engine.stats.executes_by_gear == {"1x16": 1}


def test_engine_mixed_lengths_share_one_gear_and_are_trimmed_back(cfg, oms, ort_sessions):
    rng = np.random.default_rng(2)
    requests = [{"input_ids": cfg.tokens(rng, b, s)} for b, s in ((1, 5), (2, 30), (1, 1), (1, 17))]
    with Engine.from_model_config(cfg.llama(oms["llama"]), version_dir="/") as engine:
        results = engine.execute(requests)
        assert engine.stats.executes_by_gear == {"8x32": 1}  # 5 rows -> batch gear 8, longest 30 -> 32
        assert engine.stats.padded_rows == 3
    for request, result in zip(requests, results):
        ids = request["input_ids"]
        assert result["logits"].shape == (*ids.shape, 32000)
        # The model is causal, so padding after a sequence cannot change it: equal to the unpadded run.
        np.testing.assert_allclose(result["logits"], llama_reference(ort_sessions, ids), rtol=1e-5, atol=1e-5)


def test_engine_counting_llama_predicts_the_next_id_through_the_gears(cfg, oms):
    ids = np.arange(100, 140, dtype=np.int64).reshape(1, 40)
    with Engine.from_model_config(cfg.llama(oms["llama"]), version_dir="/") as engine:
        (result,) = engine.execute([{"input_ids": ids}])
    np.testing.assert_array_equal(result["logits"].argmax(-1), ids + 1)


def test_engine_splits_more_rows_than_the_largest_gear_into_several_executes(cfg, oms, ort_sessions):
    rng = np.random.default_rng(3)
    requests = [{"input_ids": cfg.tokens(rng, 4, 10)} for _ in range(5)]  # 20 rows, largest gear 8
    with Engine.from_model_config(cfg.llama(oms["llama"]), version_dir="/") as engine:
        results = engine.execute(requests)
        assert engine.stats.executes == 3
        assert engine.stats.rows == 20
    for request, result in zip(requests, results):
        np.testing.assert_allclose(
            result["logits"], llama_reference(ort_sessions, request["input_ids"]), rtol=1e-5, atol=1e-5
        )


def test_engine_bert_pads_with_a_masked_tail_and_trims(cfg, oms, ort_sessions):
    rng = np.random.default_rng(4)
    requests = []
    for seq in (3, 20, 9):
        ids = rng.integers(0, 1000, (1, seq), dtype=np.int64)
        requests.append({"input_ids": ids, "attention_mask": np.ones_like(ids)})
    with Engine.from_model_config(cfg.bert(oms["bert"]), version_dir="/") as engine:
        results = engine.execute(requests)
        assert engine.stats.executes_by_gear == {"4x32": 1}
    for request, result in zip(requests, results):
        expected = bert_reference(ort_sessions, request["input_ids"], request["attention_mask"])
        assert result["last_hidden_state"].shape == expected.shape
        np.testing.assert_allclose(result["last_hidden_state"], expected, rtol=1e-4, atol=1e-4)


def test_engine_bad_requests_fail_alone_and_name_the_input(cfg, oms, ort_sessions):
    rng = np.random.default_rng(5)
    good = {"input_ids": cfg.tokens(rng, 1, 6)}
    bad = [
        ({}, "missing input 'input_ids'"),
        ({"input_ids": good["input_ids"], "extra": good["input_ids"]}, "unexpected input 'extra'"),
        (
            {"input_ids": good["input_ids"].astype(np.int32)},
            "input 'input_ids': expected int64 data, got int32",
        ),
        ({"input_ids": good["input_ids"][0]}, "input 'input_ids': expected shape [-1, -1] (2 dims), got [6]"),
        ({"input_ids": cfg.tokens(rng, 9, 4)}, "input 'input_ids': batch 9 exceeds the largest gear 8"),
        ({"input_ids": cfg.tokens(rng, 1, 129)}, "input 'input_ids': dim 1 is 129, longer than the largest"),
        ({"input_ids": np.zeros((0, 4), np.int64)}, "input 'input_ids': empty batch"),
    ]
    requests = [good] + [request for request, _ in bad] + [good]
    with Engine.from_model_config(cfg.llama(oms["llama"]), version_dir="/") as engine:
        results = engine.execute(requests)
        assert engine.stats.request_errors == len(bad)
        assert engine.stats.executes == 1
    expected = llama_reference(ort_sessions, good["input_ids"])
    np.testing.assert_array_equal(results[0]["logits"], expected)
    np.testing.assert_array_equal(results[-1]["logits"], expected)
    for result, (_, message) in zip(results[1:-1], bad):
        assert isinstance(result, RequestError)
        assert message in str(result)


def test_engine_allocates_nothing_per_request_after_warm_up(cfg, oms):
    rng = np.random.default_rng(6)
    with Engine.from_model_config(cfg.identity(oms["identity"]), version_dir="/") as engine:
        before = snapshot()
        executes_before = engine.stats.executes
        for n in range(1000):
            batch = [{"INPUT0": rng.random((1 + n % 3, 16), dtype=np.float32)} for _ in range(1 + n % 4)]
            results = engine.execute(batch)
            assert all(isinstance(r, dict) for r in results)
        after = snapshot()
        executes = engine.stats.executes - executes_before
        assert executes >= 1000
        assert after["devices"][0]["executes"] - before["devices"][0]["executes"] == executes
        for key in ("mallocs", "frees"):
            assert after["devices"][0][key] == before["devices"][0][key]
            assert after["host_pinned"][key] == before["host_pinned"][key]
    closed = snapshot()
    assert closed["devices"][0]["live_bytes"] == 0
    assert closed["devices"][0]["live_allocations"] == 0
    assert closed["host_pinned"]["live_bytes"] == 0
    assert closed["devices"][0]["loads"] == closed["devices"][0]["unloads"] == 1


def test_engine_identity_round_trips_every_batch_size(cfg, oms):
    rng = np.random.default_rng(7)
    with Engine.from_model_config(cfg.identity(oms["identity"]), version_dir="/") as engine:
        for rows in range(1, 9):
            data = rng.random((rows, 16), dtype=np.float32)
            (result,) = engine.execute([{"INPUT0": data}])
            np.testing.assert_array_equal(result["OUTPUT0"], data)
        assert set(engine.stats.executes_by_gear) == {"1", "2", "4", "8"}
        assert engine.stats.padded_rows == (2 - 2) + (4 - 3) + 0 + (8 - 5) + (8 - 6) + (8 - 7)


def test_engine_converts_fp32_requests_to_an_fp16_om_and_back(cfg, oms):
    data = np.linspace(-3, 3, 32, dtype=np.float32).reshape(2, 16)
    with Engine.from_model_config(cfg.identity(oms["identity_fp16"]), version_dir="/") as engine:
        (result,) = engine.execute([{"INPUT0": data}])
    assert result["OUTPUT0"].dtype == np.float32
    np.testing.assert_array_equal(result["OUTPUT0"], data.astype(np.float16).astype(np.float32))


def test_engine_static_om_pads_every_batch_to_its_one_shape(cfg, oms):
    static = cfg.identity(oms["identity_static"], max_batch_size=4)
    data = np.arange(48, dtype=np.float32).reshape(3, 16)
    with Engine.from_model_config(static, version_dir="/") as engine:
        (result,) = engine.execute([{"INPUT0": data}])
        assert [g.label for g in engine.gears.gears] == ["static"]
        assert engine.stats.padded_rows == 1
    np.testing.assert_array_equal(result["OUTPUT0"], data)


def test_engine_returns_only_requested_outputs_and_copies_only_those(cfg, oms):
    two = cfg.config(
        "two",
        oms["two_outputs"],
        [("x", "TYPE_FP32", [4])],
        [("doubled", "TYPE_FP32", [4]), ("summed", "TYPE_FP32", [1])],
        max_batch_size=4,
    )
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    with Engine.from_model_config(two, version_dir="/") as engine:
        results = engine.execute([{"x": x}, {"x": x[:1]}], [{"summed"}, None])
        # both outputs (someone wanted each), and only the 3 rows that requests brought, not the gear's 4
        assert engine.stats.d2h_bytes == 3 * 4 * 4 + 3 * 1 * 4
        only = engine.execute([{"x": x}], [{"summed"}])
        assert engine.stats.d2h_bytes == 3 * 4 * 4 + 3 * 1 * 4 + 2 * 1 * 4
    assert set(results[0]) == {"summed"}
    np.testing.assert_array_equal(results[0]["summed"], x.sum(1, keepdims=True))
    np.testing.assert_array_equal(results[1]["doubled"], 2 * x[:1])
    assert set(only[0]) == {"summed"}


def test_engine_device_fault_fails_only_its_execute_and_the_next_succeeds(cfg, oms):
    data = np.ones((8, 16), np.float32)
    with Engine.from_model_config(cfg.identity(oms["identity"]), version_dir="/") as engine:
        faults.inject("mdl.execute_async", 507011, nth=2)
        # Two requests of 8 rows: two executes; the second one hits the fault.
        results = engine.execute([{"INPUT0": data}, {"INPUT0": data + 1}])
        np.testing.assert_array_equal(results[0]["OUTPUT0"], data)
        assert isinstance(results[1], AclError) and results[1].code == 507011
        assert engine.stats.device_errors == 1
        assert engine.stats.lane_rebuilds == 1
        (after,) = engine.execute([{"INPUT0": data}])
        np.testing.assert_array_equal(after["OUTPUT0"], data)
    assert snapshot()["devices"][0]["live_bytes"] == 0


def test_engine_streams_per_instance_run_chunks_on_separate_lanes(cfg, oms, ort_sessions):
    rng = np.random.default_rng(8)
    requests = [{"input_ids": cfg.tokens(rng, 8, 12)} for _ in range(4)]
    two_lanes = cfg.llama(oms["llama"], streams_per_instance="2")
    with Engine.from_model_config(two_lanes, version_dir="/") as engine:
        assert len(engine.lanes) == 2
        results = engine.execute(requests)
        assert engine.stats.executes == 4
    assert snapshot()["devices"][0]["loads"] == 2
    for request, result in zip(requests, results):
        np.testing.assert_allclose(
            result["logits"], llama_reference(ort_sessions, request["input_ids"]), rtol=1e-5, atol=1e-5
        )


def test_engine_unbatched_config_pads_the_sequence_of_one_request(cfg, oms, ort_sessions):
    unbatched = cfg.config(
        "llama_unbatched",
        oms["llama"],
        [("input_ids", "TYPE_INT64", [-1, -1])],
        [("logits", "TYPE_FP32", [-1, -1, 32000])],
        max_batch_size=0,
        output_dim_ties="logits:0=input_ids:0;logits:1=input_ids:1",
        pad_inputs="input_ids",  # both of its dims: rows of a causal model, and positions after the sequence
    )
    ids = cfg.tokens(np.random.default_rng(9), 3, 21)
    with Engine.from_model_config(unbatched, version_dir="/") as engine:
        (result,) = engine.execute([{"input_ids": ids}])
        assert engine.stats.executes_by_gear == {"4x32": 1}
    np.testing.assert_allclose(result["logits"], llama_reference(ort_sessions, ids), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"input": [{"name": "tokens", "data_type": "TYPE_INT64", "dims": [-1]}]},
            "do not match the OM's inputs",
        ),
        ({"input": [{"name": "input_ids", "data_type": "TYPE_FP32", "dims": [-1]}]}, "cannot convert"),
        (
            {"input": [{"name": "input_ids", "data_type": "TYPE_INT64", "dims": [-1, 2]}]},
            "has dims [batch, -1, 2]",
        ),
        (
            {
                "output": [
                    {"name": "logits", "data_type": "TYPE_FP32", "dims": [-1, 32000]},
                    {"name": "probs", "data_type": "TYPE_FP32", "dims": [-1, 32000]},
                ]
            },
            "'probs' is not an output",
        ),
        (
            {"output": [{"name": "logits", "data_type": "TYPE_FP32", "dims": [-1, 100]}]},
            "dim 1 is 100 in the config",
        ),
        ({"max_batch_size": 16}, "max_batch_size 16 exceeds the OM's largest batch gear 8"),
    ],
)
def test_engine_refuses_a_config_that_does_not_match_the_om(cfg, oms, change, message):
    with pytest.raises(ConfigError) as info:
        Engine.from_model_config(
            {**cfg.llama(oms["llama"], output_dim_ties="", pad_inputs=""), **change}, version_dir="/"
        )
    assert message in str(info.value)
    assert snapshot()["devices"][0]["live_bytes"] == 0


def test_engine_missing_om_file_is_a_clear_error(cfg, tmp_path):
    with pytest.raises(Exception, match="OM file not found"):
        Engine.from_model_config(cfg.identity("missing.om"), version_dir=tmp_path)


def test_engine_close_twice_is_harmless_and_execute_after_close_refuses(cfg, oms):
    engine = Engine.from_model_config(cfg.identity(oms["identity"]), version_dir="/")
    engine.close()
    engine.close()
    with pytest.raises(Exception, match="closed"):
        engine.execute([{"INPUT0": np.ones((1, 16), np.float32)}])


def test_engine_binds_renamed_outputs_by_position(cfg, oms):
    # ATC can rename outputs; a config whose names match none of the OM's takes them in index order.
    renamed = {**cfg.llama(oms["llama"], output_dim_ties="scores:0=input_ids:0")}
    renamed["output"] = [{"name": "scores", "data_type": "TYPE_FP32", "dims": [-1, 32000]}]
    ids = np.arange(5, 9, dtype=np.int64)[None]
    with Engine.from_model_config(renamed, version_dir="/") as engine:
        (result,) = engine.execute([{"input_ids": ids}])
    assert list(result) == ["scores"]
    np.testing.assert_array_equal(result["scores"].argmax(-1), ids + 1)
