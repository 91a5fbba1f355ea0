"""bf16 in the engine: words in, words out when config and OM agree; converted exactly (bf16 -> fp32) or to
nearest even (fp32 -> bf16) when they do not, both ways."""

from __future__ import annotations

import numpy as np

from ge_plugin.engine import Engine, Lifetime
from ge_plugin.models import bf16_affine_reference


def bf16_config(cfg, om, data_type: str = "TYPE_BF16") -> dict:
    return cfg.config("bf16", om, [("x", data_type, [8])], [("y", data_type, [8])], max_batch_size=4)


def to_bf16(values: np.ndarray) -> np.ndarray:
    bits = values.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def test_bf16_config_on_a_bf16_om_moves_words_and_lends_the_answer(cfg, oms):
    x = np.random.default_rng(1).integers(0x3000, 0x4800, (3, 8), dtype=np.uint16)
    with Engine.from_model_config(bf16_config(cfg, oms["bf16_affine"]), version_dir="/") as engine:
        (result,) = engine.execute([{"x": x}], lifetime=Lifetime.UNTIL_NEXT_CALL)
        assert result["y"].dtype == np.uint16
        assert np.shares_memory(result["y"], engine.lanes[0].out_host[0].array)
        assert np.array_equal(result["y"], bf16_affine_reference(x))


def test_bf16_config_on_an_fp32_om_widens_requests_and_rounds_answers(cfg, oms):
    """The identity OM computes in fp32: bf16 words go in widened (exactly) and come back rounded, unchanged."""
    config = cfg.config(
        "ident_bf16", oms["identity"], [("INPUT0", "TYPE_BF16", [16])], [("OUTPUT0", "TYPE_BF16", [16])]
    )
    x = np.random.default_rng(2).integers(0, 2**16, (2, 16), dtype=np.uint16)
    x[np.isnan((x.astype(np.uint32) << 16).view(np.float32))] = 0x7FC0  # NaNs as the quiet one the cast keeps
    with Engine.from_model_config(config, version_dir="/") as engine:
        (result,) = engine.execute([{"INPUT0": x}])
    assert np.array_equal(result["OUTPUT0"], x)


def test_fp32_config_on_a_bf16_om_rounds_to_nearest_even_on_the_way_in(cfg, oms):
    x = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32) * 100
    with Engine.from_model_config(
        bf16_config(cfg, oms["bf16_affine"], "TYPE_FP32"), version_dir="/"
    ) as engine:
        (result,) = engine.execute([{"x": x}])
    assert result["y"].dtype == np.float32
    expected = bf16_affine_reference(to_bf16(x)).astype(np.uint32) << 16
    assert np.array_equal(result["y"].view(np.uint32), expected)
