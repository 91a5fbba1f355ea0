"""What the engine checks at load and per request so that no answer is silently wrong: config dims against
the OM's, declared value ranges and shape ties, int64 values an int32 OM cannot hold, and precision."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ge_plugin.atc.flags import parse_args
from ge_plugin.atc.simbuild import build
from ge_plugin.engine import Engine
from ge_plugin.errors import ConfigError, RequestError
from ge_plugin.sim import snapshot


def two(cfg, oms, dims, **params) -> dict:
    return cfg.config(
        "two",
        oms["two_outputs"],
        [("x", "TYPE_FP32", dims)],
        [("doubled", "TYPE_FP32", [4]), ("summed", "TYPE_FP32", [1])],
        max_batch_size=4,
        **params,
    )


def test_engine_refuses_a_config_dim_the_om_fixes(cfg, oms):
    # x is [batch, 4] in the OM; a config saying [-1] let a [1, 3] request through, zero-padded to 4 and
    # answered 200 with a wrong sum.
    with pytest.raises(ConfigError) as caught:
        Engine.from_model_config(two(cfg, oms, [-1]), version_dir="/")
    message = str(caught.value)
    assert "input 'x' dim 0 is -1 (any length) in the config [batch, -1], but the OM fixes it at 4" in message
    assert "declare dims: [4]" in message
    assert snapshot()["devices"][0]["live_bytes"] == 0


def test_engine_refuses_a_fixed_config_dim_longer_than_every_gear(cfg, oms):
    config = cfg.config(
        "llama", oms["llama"], [("input_ids", "TYPE_INT64", [200])], [("logits", "TYPE_FP32", [-1, 32000])]
    )
    with pytest.raises(
        ConfigError,
        match=r"input 'input_ids' dim 0 is 200 in the config, longer than the OM's largest gear for it \(128\)",
    ):
        Engine.from_model_config(config, version_dir="/")


def test_engine_fixed_dim_request_of_another_length_says_expected_not_gear(cfg, oms):
    with Engine.from_model_config(two(cfg, oms, [4]), version_dir="/") as engine:
        (result,) = engine.execute([{"x": np.ones((1, 3), np.float32)}])
    assert isinstance(result, RequestError)
    assert str(result) == "input 'x': dim 1 is 3, expected 4"


def test_engine_unbatched_config_of_a_batch_gear_om_words_dim_0_as_the_batch(cfg, oms):
    config = cfg.config(
        "identity",
        oms["identity"],
        [("INPUT0", "TYPE_FP32", [-1, 16])],
        [("OUTPUT0", "TYPE_FP32", [-1, 16])],
        max_batch_size=0,
    )
    with Engine.from_model_config(config, version_dir="/") as engine:
        (result,) = engine.execute([{"INPUT0": np.ones((9, 16), np.float32)}])
    assert str(result) == "input 'INPUT0': batch 9 exceeds the largest gear 8"


def test_engine_out_of_vocabulary_ids_are_refused_before_the_device(cfg, oms):
    good = np.array([[5, 6, 7]], dtype=np.int64)
    bad = np.array([[32000, 1]], dtype=np.int64)
    negative = np.array([[-1, 5]], dtype=np.int64)
    requests = (
        [{"input_ids": good}] * 5
        + [{"input_ids": bad}]
        + [{"input_ids": good}] * 5
        + [{"input_ids": negative}]
    )
    config = cfg.llama(oms["llama"], input_ranges="input_ids=0:31999")
    with Engine.from_model_config(config, version_dir="/") as engine:
        results = engine.execute(requests)
        assert engine.stats.request_errors == 2
        assert engine.stats.device_errors == 0
        assert engine.stats.isolation_executes == 0
        assert engine.stats.executes == 2  # 10 good rows: 8 + 2
    assert (
        str(results[5]) == "input 'input_ids': value 32000 at [0, 0] is outside the accepted range [0, 31999]"
    )
    assert (
        str(results[11]) == "input 'input_ids': value -1 at [0, 0] is outside the accepted range [0, 31999]"
    )
    for k in (*range(5), *range(6, 11)):
        np.testing.assert_array_equal(results[k]["logits"].argmax(-1), good + 1)


def test_engine_bert_ids_and_mask_must_come_with_one_shape(cfg, oms):
    config = cfg.bert(oms["bert"], same_shape="attention_mask=input_ids", input_ranges="attention_mask=0:1")
    ids = np.ones((1, 4), np.int64)
    with Engine.from_model_config(config, version_dir="/") as engine:
        short_mask, long_mask, good = engine.execute(
            [
                {"input_ids": ids, "attention_mask": np.ones((1, 3), np.int64)},
                {"input_ids": ids, "attention_mask": np.ones((1, 5), np.int64)},
                {"input_ids": ids, "attention_mask": np.ones((1, 4), np.int64)},
            ]
        )
    assert str(long_mask) == (
        "input 'attention_mask': shape [1, 5] differs from input 'input_ids''s [1, 4]; the model takes them "
        "with the same shape"
    )
    assert isinstance(short_mask, RequestError)
    assert good["last_hidden_state"].shape == (1, 4, 64)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"input_ranges": "tokens=0:5"}, "parameters.input_ranges 'tokens=0:5': no input named 'tokens'"),
        ({"input_ranges": "input_ids=0:1.5"}, "holds integers; give integer bounds"),
        ({"same_shape": "input_ids=mask"}, "no input named 'mask'"),
    ],
)
def test_engine_refuses_ranges_and_ties_naming_unknown_inputs(cfg, oms, params, message):
    with pytest.raises(ConfigError, match=message):
        Engine.from_model_config(cfg.llama(oms["llama"], **params), version_dir="/")


@pytest.fixture(scope="module")
def int32_om(tmp_path_factory):
    """ids int32 [batch, 4] -> twice the ids, int32: an OM that takes int64 requests as int32."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["ids", "ids"], ["twice"])],
        "int32_ids",
        [helper.make_tensor_value_info("ids", TensorProto.INT32, ["batch", 4])],
        [helper.make_tensor_value_info("twice", TensorProto.INT32, ["batch", 4])],
    )
    directory = tmp_path_factory.mktemp("int32")
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
        directory / "m.onnx",
    )
    build(
        parse_args(
            [
                f"--model={directory / 'm.onnx'}",
                "--framework=5",
                "--input_shape=ids:-1,4",
                "--dynamic_batch_size=1,4",
                "--soc_version=Ascend910B3",
                f"--output={directory / 'int32'}",
            ]
        )
    )
    return directory / "int32.om"


def test_engine_int64_that_an_int32_om_cannot_hold_fails_alone_in_validation(cfg, int32_om):
    config = cfg.config(
        "ids", int32_om, [("ids", "TYPE_INT64", [4])], [("twice", "TYPE_INT64", [4])], max_batch_size=4
    )
    good = np.arange(4, dtype=np.int64)[None]
    big = np.array([[1, 2, 2**31, 4]], dtype=np.int64)
    with Engine.from_model_config(config, version_dir="/") as engine:
        first, refused, last = engine.execute([{"ids": good}, {"ids": big}, {"ids": good + 1}])
        assert engine.stats.device_errors == 0
        assert engine.stats.executes == 1
    assert str(refused) == (
        "input 'ids': value 2147483648 at [0, 2] is outside the accepted range [-2147483648, 2147483647]"
    )
    np.testing.assert_array_equal(first["twice"], 2 * good)
    np.testing.assert_array_equal(last["twice"], 2 * (good + 1))


def test_engine_warns_when_an_undeclared_precision_is_reduced(cfg, oms):
    with Engine.from_model_config(cfg.identity(oms["identity_fp16"]), version_dir="/") as engine:
        (warning,) = engine.warnings
    assert "the OM computes in fp16" in warning
    assert "declare parameters.precision 'fp16'" in warning


@pytest.fixture(scope="module")
def fp16_om(tmp_path_factory):
    """y = x @ W + b, all fp16, built with ATC's default precision (force_fp16): a model that is fp16 itself."""
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((8, 4)).astype(np.float16)
    bias = rng.standard_normal(4).astype(np.float16)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])],
        "fp16_affine",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["batch", 4])],
        [onnx.numpy_helper.from_array(weight, "W"), onnx.numpy_helper.from_array(bias, "b")],
    )
    directory = tmp_path_factory.mktemp("fp16")
    model = directory / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), model)
    flags = [f"--model={model}", "--framework=5", "--input_shape=x:-1,8", "--dynamic_batch_size=1,4"]
    build(parse_args([*flags, "--soc_version=Ascend910B3", f"--output={directory / 'fp16'}"]))
    return directory / "fp16.om", model


def test_engine_loads_an_fp16_model_built_in_fp16_quietly_and_answers_bit_exact(cfg, fp16_om):
    import onnxruntime

    om, model = fp16_om
    config = cfg.config("affine", om, [("x", "TYPE_FP16", [8])], [("y", "TYPE_FP16", [4])], max_batch_size=4)
    x = np.random.default_rng(4).standard_normal((3, 8)).astype(np.float16)
    with Engine.from_model_config(config, version_dir="/") as engine:
        assert engine.warnings == []  # the OM computes in fp16, the model's own type: nothing was narrowed
        answers = engine.execute([{"x": x[i : i + 1]} for i in range(3)])
    (expected,) = onnxruntime.InferenceSession(str(model)).run(None, {"x": x})
    np.testing.assert_array_equal(np.concatenate([a["y"] for a in answers]), expected)


def test_engine_declared_precision_that_matches_the_om_loads_quietly(cfg, oms):
    with Engine.from_model_config(
        cfg.identity(oms["identity_fp16"], precision="fp16"), version_dir="/"
    ) as engine:
        assert engine.warnings == []
    with Engine.from_model_config(
        cfg.identity(oms["identity"], precision="origin"), version_dir="/"
    ) as engine:
        assert engine.warnings == []


def test_engine_refuses_a_declared_precision_the_om_was_not_built_with(cfg, oms):
    with pytest.raises(
        ConfigError, match=r"parameters\.precision is 'origin' but the OM was built with 'fp16'"
    ):
        Engine.from_model_config(cfg.identity(oms["identity_fp16"], precision="origin"), version_dir="/")
    assert snapshot()["devices"][0]["live_bytes"] == 0
