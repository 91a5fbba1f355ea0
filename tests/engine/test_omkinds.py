"""Every kind of OM ATC makes, through the engine: image-size gears (exact sizes by default, padding when the
config asks for it, a fixed batch beside them), dims gears without padding, and the configs that disagree."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from ge_plugin.engine import Engine
from ge_plugin.errors import ConfigError, RequestError


@pytest.fixture(scope="module")
def cnn(demo_models_dir):
    session = ort.InferenceSession(str(demo_models_dir / "tiny_cnn.onnx"), providers=["CPUExecutionProvider"])

    def run(images: np.ndarray) -> dict[str, np.ndarray]:
        logits, features = session.run(["logits", "features"], {"images": images})
        return {"logits": logits, "features": features}

    return run


def cnn_config(cfg, om, **params) -> dict:
    """tiny_cnn batched up to the OM's fixed batch of 2: images [3, -1, -1] per row."""
    return cfg.config(
        "cnn",
        om,
        [("images", "TYPE_FP32", [3, -1, -1])],
        [("logits", "TYPE_FP32", [10]), ("features", "TYPE_FP32", [4, -1, -1])],
        max_batch_size=2,
        **params,
    )


def cnn_dims_config(cfg, om, **params) -> dict:
    """tiny_cnn unbatched, on the OM compiled with H and W as --dynamic_dims."""
    return cfg.config(
        "cnn_dims",
        om,
        [("images", "TYPE_FP32", [1, 3, -1, -1])],
        [("logits", "TYPE_FP32", [1, 10]), ("features", "TYPE_FP32", [1, 4, -1, -1])],
        max_batch_size=0,
        **params,
    )


def images(seed: int, rows: int, height: int, width: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, 3, height, width)).astype(np.float32)


def assert_cnn(result: dict, expected: dict) -> None:
    for name in ("logits", "features"):
        assert result[name].shape == expected[name].shape, name
        np.testing.assert_allclose(result[name], expected[name], rtol=1e-5, atol=1e-5)


def test_image_size_gears_group_a_window_by_size_across_it(cfg, oms, cnn):
    # 8x8, 16x16, 8x8: the two small images share an execute though they are not neighbours, so the window
    # runs as two executes, not three; each request still gets its own answer, in its own place
    small, large, other = images(1, 1, 8, 8), images(2, 1, 16, 16), images(5, 1, 8, 8)
    with Engine.from_model_config(cnn_config(cfg, oms["cnn_hw"]), version_dir="/") as engine:
        assert [g.label for g in engine.gears.gears] == ["8x8", "16x16"]
        results = engine.execute([{"images": small}, {"images": large}, {"images": other}])
        assert engine.stats.executes == 2
        assert engine.stats.executes_by_gear == {"8x8": 1, "16x16": 1}
        # the large image alone is one row padded to the OM's fixed batch of 2 (batch rows are always padded)
        assert engine.stats.padded_rows == 1
        assert engine.stats.padded_elements == 3 * 16 * 16
    for request, result in zip((small, large, other), results):
        assert_cnn(result, cnn(request))


def test_image_size_gears_batch_rows_of_one_size_into_one_execute(cfg, oms, cnn):
    first, second = images(3, 1, 16, 16), images(4, 1, 16, 16)
    with Engine.from_model_config(cnn_config(cfg, oms["cnn_hw"]), version_dir="/") as engine:
        results = engine.execute([{"images": first}, {"images": second}])
        assert engine.stats.executes_by_gear == {"16x16": 1}
        assert engine.stats.padded_elements == 0
    assert_cnn(results[0], cnn(first))
    assert_cnn(results[1], cnn(second))


def test_an_image_of_another_size_is_refused_naming_the_sizes_and_its_batch_mates_are_served(cfg, oms, cnn):
    good, odd = images(5, 1, 8, 8), images(6, 1, 12, 12)
    with Engine.from_model_config(cnn_config(cfg, oms["cnn_hw"]), version_dir="/") as engine:
        results = engine.execute([{"images": good}, {"images": odd}, {"images": good}])
        assert engine.stats.request_errors == 1
        assert engine.stats.executes_by_gear == {"8x8": 1}  # the odd one left the other two together
    assert isinstance(results[1], RequestError)
    message = str(results[1])
    assert (
        "input 'images' [1, 3, 12, 12]: its height x width 12x12 is not one of the model's image sizes"
        in message
    )
    assert "(8x8, 16x16); resize the image to one of them" in message
    assert "parameters.pad_inputs" in message
    assert_cnn(results[0], cnn(good))
    assert_cnn(results[2], cnn(good))


def test_an_image_larger_than_every_size_is_refused_with_the_sizes_too(cfg, oms):
    with Engine.from_model_config(cnn_config(cfg, oms["cnn_hw"]), version_dir="/") as engine:
        (result,) = engine.execute([{"images": images(7, 1, 40, 8)}])
    assert isinstance(result, RequestError)
    assert "height x width 40x8 is not one of the model's image sizes (8x8, 16x16)" in str(result)


def test_padding_an_image_is_opt_in_and_trims_the_outputs_that_follow_it(cfg, oms, cnn):
    """With pad_inputs, a 12x12 image runs on the 16x16 gear; ``features`` follows H and W and is trimmed back.
    The logits are those of the padded image, not of the image: why padding is not the default."""
    image = images(8, 1, 12, 12)
    config = cnn_config(
        cfg, oms["cnn_hw"], pad_inputs="images", output_dim_ties="features:1=images:1;features:2=images:2"
    )
    with Engine.from_model_config(config, version_dir="/") as engine:
        (result,) = engine.execute([{"images": image}])
        assert engine.stats.executes_by_gear == {"16x16": 1}
    padded = np.zeros((1, 3, 16, 16), np.float32)
    padded[:, :, :12, :12] = image
    expected = cnn(padded)
    assert result["features"].shape == (1, 4, 12, 12)
    np.testing.assert_allclose(result["features"], expected["features"][:, :, :12, :12], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(result["logits"], expected["logits"], rtol=1e-5, atol=1e-5)
    assert not np.allclose(result["logits"], cnn(image)["logits"], rtol=1e-3, atol=1e-3)


def test_padding_warns_of_an_output_that_changes_with_the_gear_and_follows_nothing(cfg, oms):
    with Engine.from_model_config(
        cnn_config(cfg, oms["cnn_hw"], pad_inputs="images"), version_dir="/"
    ) as engine:
        warnings = engine.warnings
    assert any(
        "output 'features' dim 1 changes with the gear (8, 16) but follows no input" in w for w in warnings
    )
    assert not any("'logits'" in w for w in warnings)


def test_dims_gears_over_an_image_no_longer_pad_by_default(cfg, oms, cnn):
    """tiny_cnn with H and W compiled as --dynamic_dims: a 12x12 image used to run zero-padded to 16x16 and come
    back as a [1, 4, 16, 16] feature map with the padded image's logits."""
    with Engine.from_model_config(cnn_dims_config(cfg, oms["cnn_dims"]), version_dir="/") as engine:
        odd, exact = engine.execute([{"images": images(9, 1, 12, 12)}, {"images": images(10, 1, 16, 16)}])
        assert engine.stats.executes_by_gear == {"16x16": 1}
    assert isinstance(odd, RequestError)
    assert str(odd).startswith(
        "input 'images' [1, 3, 12, 12]: dims 2, 3 are 12x12, which no gear of the model takes exactly "
        "(its gears take 8x8, 16x16). ge-plugin pads a dim that gears set only for inputs listed in "
        "parameters.pad_inputs"
    )
    assert_cnn(exact, cnn(images(10, 1, 16, 16)))


def test_dims_gears_without_padding_run_different_lengths_apart(cfg, oms):
    """A LLaMA config that does not let ge-plugin pad: 16 and 32 tokens each run on their own gear, 20 tokens
    are refused with the lengths the gears take."""
    config = cfg.llama(oms["llama"], pad_inputs="")
    rng = np.random.default_rng(11)
    requests = [{"input_ids": cfg.tokens(rng, 1, n)} for n in (16, 32, 20, 16)]
    with Engine.from_model_config(config, version_dir="/") as engine:
        results = engine.execute(requests)
        # 16 and 32 cannot share a gear; the two 16s do, although 32 and the refused 20 come between them:
        # two executes
        assert engine.stats.executes_by_gear == {"4x16": 1, "1x32": 1}
    assert [isinstance(r, RequestError) for r in results] == [False, False, True, False]
    assert "dim 0 is 20, which no gear of the model takes exactly (its gears take 16, 32, 64, 128)" in str(
        results[2]
    )
    for request, result in zip(requests, results):
        if isinstance(result, dict):
            assert result["logits"].shape == (*request["input_ids"].shape, 32000)


def test_a_fixed_length_no_gear_takes_is_refused_at_load_without_padding(cfg, oms):
    config = cfg.llama(oms["llama"], pad_inputs="")
    config["input"] = [{"name": "input_ids", "data_type": "TYPE_INT64", "dims": [20]}]
    config["output"] = [{"name": "logits", "data_type": "TYPE_FP32", "dims": [-1, 32000]}]
    config["parameters"]["output_dim_ties"] = {"string_value": ""}
    with pytest.raises(
        ConfigError,
        match=r"input 'input_ids' dim 0 is 20 in the config, but the OM's gears take "
        r"16, 32, 64, 128 there and the input is not padded",
    ):
        Engine.from_model_config(config, version_dir="/")


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"pad_inputs": "pixels"}, "parameters.pad_inputs names 'pixels', which is not an input"),
        (
            {"image_sizes": "8,8;32,32"},
            "parameters.image_sizes '8,8;32,32' differ from the OM, which has image sizes 8,8;16,16",
        ),
        ({"image_sizes": "8,8,8"}, "parameters.image_sizes: expected HEIGHT,WIDTH pairs"),
    ],
)
def test_an_image_config_that_disagrees_with_the_om_is_refused_at_load(cfg, oms, params, message):
    with pytest.raises(ConfigError, match=message):
        Engine.from_model_config(cnn_config(cfg, oms["cnn_hw"], **params), version_dir="/")


def test_image_sizes_for_an_om_without_them_is_refused_at_load(cfg, oms):
    config = cnn_dims_config(cfg, oms["cnn_dims"], image_sizes="8,8;16,16")
    with pytest.raises(ConfigError, match=r"differ from the OM, which has no image-size gears \(a dims OM\)"):
        Engine.from_model_config(config, version_dir="/")


def test_padding_an_input_no_gear_sets_is_refused_at_load(cfg, oms):
    with pytest.raises(
        ConfigError, match=r"parameters\.pad_inputs lists 'INPUT0', but no gear sets a dim of it"
    ):
        Engine.from_model_config(cfg.identity(oms["identity"], pad_inputs="INPUT0"), version_dir="/")


def test_image_sizes_matching_the_om_are_accepted(cfg, oms, cnn):
    image = images(12, 2, 8, 8)
    config = cnn_config(cfg, oms["cnn_hw"], image_sizes="8,8;16,16")
    with Engine.from_model_config(config, version_dir="/") as engine:
        (result,) = engine.execute([{"images": image}])
    assert_cnn(result, cnn(image))


@pytest.mark.parametrize(
    ("dims", "flags"),
    [
        ([1, 3, -1, -1], '--dynamic_image_size="224,224;448,448"'),
        ([-1, 3, 8, 8], '--dynamic_batch_size="1,2,4,8"'),
        ([-1, 3, -1, -1], '--input_format=ND --dynamic_dims="16,16,16;32,32,32"'),
    ],
)
def test_a_shape_range_om_is_refused_at_load_with_the_flags_that_rebuild_it(
    cfg, oms, monkeypatch, dims, flags
):
    """A shape-range OM (ATC --input_shape=images:1~4,3,224~448,224~448) as pyACL describes it: -1 dims, no
    ascend_mbatch_shape_data, input size 0. The simulator's static CNN OM, described that way."""
    from ge_plugin.device.aclapi import acl

    mdl = acl().mdl
    real_dims = mdl.get_input_dims

    def range_dims(desc, index):
        described, ret = real_dims(desc, index)
        return {**described, "dims": list(dims)}, ret

    monkeypatch.setattr(mdl, "get_input_dims", range_dims)
    monkeypatch.setattr(mdl, "get_input_size_by_index", lambda desc, index: 0)
    config = cfg.config(
        "cnn",
        oms["cnn_static"],
        [("images", "TYPE_FP32", [1, 3, 8, 8])],
        [("logits", "TYPE_FP32", [1, 10])],
        max_batch_size=0,
    )
    with pytest.raises(ConfigError) as refused:
        Engine.from_model_config(config, version_dir="/")
    message = str(refused.value)
    assert f"the OM is a shape-range (dynamic-shape) model: images {dims} with no gears" in message
    assert f"rebuild the OM with --input_shape=images:{','.join(map(str, dims))} and {flags}" in message


def test_the_gears_a_rendered_bert_config_declares_are_the_oms_and_it_loads(cfg, oms):
    """What ``ge-plugin render`` writes for specs/bert.yaml's gears: batch gears and dims gears, whose grid
    is the OM's --dynamic_dims (listed in another order here: the comparison is of the gears, not the text)."""
    config = cfg.bert(oms["bert"], gears="1,2,4,8", dims_gears="64,64;16,16;32,32")
    with Engine.from_model_config(config, version_dir="/") as engine:
        assert [g.label for g in engine.gears.gears][:3] == ["1x16", "1x32", "2x16"]
        assert engine.gears.gear_set.labels[:2] == ("1,16,1,16", "1,32,1,32")


def test_dims_gears_that_differ_from_the_oms_are_refused_at_load_naming_both(cfg, oms):
    """The config's dims_gears were parsed and never compared with the OM's: a config saying 16 and 32 loaded
    an OM compiled for 16, 32 and 64 (and one saying 128 loaded it too)."""
    config = cfg.bert(oms["bert"], gears="1,2,4,8", dims_gears="16,16;32,32")
    with pytest.raises(ConfigError) as refused:
        Engine.from_model_config(config, version_dir="/")
    message = str(refused.value)
    assert (
        "parameters.gears '1,2,4,8' and dims_gears '16,16;32,32' (dims gears 1,16,1,16;1,32,1,32;2,16,2,16;"
        in message
    )
    assert "differ from the OM, which has dims gears 1,16,1,16;1,32,1,32;1,64,1,64;2,16,2,16;" in message
    assert message.endswith("render the config again or rebuild the OM with --dynamic_dims")


def test_batch_gears_alone_for_a_dims_om_are_refused_at_load(cfg, oms):
    config = cfg.llama(oms["llama"], gears="1,4,8")
    with pytest.raises(
        ConfigError,
        match=r"parameters\.gears '1,4,8' differ from the OM, which has no batch gears \(a dims OM\)",
    ):
        Engine.from_model_config(config, version_dir="/")


def test_dims_gears_that_do_not_fit_the_configs_inputs_are_refused_at_load(cfg, oms):
    config = cfg.llama(oms["llama"], gears="1,4,8", dims_gears="16,16;32,32")
    with pytest.raises(
        ConfigError, match=r"parameters\.dims_gears lists 2 values per gear, but the inputs have 1 -1 dims"
    ):
        Engine.from_model_config(config, version_dir="/")
