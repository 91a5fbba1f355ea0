"""The tiny LLaMA: valid ONNX, dynamic shapes, causal, matches a numpy LLaMA, and counts."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from ge_plugin import models
from ge_plugin.models import llama as L


def test_tiny_llama_passes_the_full_onnx_checker(llama, untyped_tensors):
    assert untyped_tensors(llama) == []


def test_tiny_llama_declares_symbolic_batch_and_seq(llama):
    (ids,) = llama.graph.input
    (logits,) = llama.graph.output
    assert (ids.name, ids.type.tensor_type.elem_type) == ("input_ids", onnx.TensorProto.INT64)
    assert [d.dim_param for d in ids.type.tensor_type.shape.dim] == ["batch", "seq"]
    assert (logits.name, logits.type.tensor_type.elem_type) == ("logits", onnx.TensorProto.FLOAT)
    dims = logits.type.tensor_type.shape.dim
    assert [dims[0].dim_param, dims[1].dim_param, dims[2].dim_value] == ["batch", "seq", models.LLAMA_VOCAB]


def test_tiny_llama_uses_an_opset_atc_accepts(llama):
    assert [(o.domain, o.version) for o in llama.opset_import] == [("", 17)]


def test_tiny_llama_file_is_a_few_megabytes(llama):
    assert 1_000_000 < llama.ByteSize() < 20_000_000


@pytest.mark.parametrize(("batch", "seq"), [(1, 1), (2, 5), (3, 17), (8, 128)])
def test_tiny_llama_runs_at_any_batch_and_seq(llama_run, batch, seq):
    ids = np.random.default_rng(batch * 1000 + seq).integers(0, models.LLAMA_VOCAB, (batch, seq))
    logits = llama_run(ids)
    assert logits.shape == (batch, seq, models.LLAMA_VOCAB)
    assert logits.dtype == np.float32
    assert np.isfinite(logits).all()


def test_tiny_llama_later_tokens_do_not_change_earlier_logits(llama_run):
    rng = np.random.default_rng(1)
    ids = rng.integers(0, models.LLAMA_VOCAB, (2, 24))
    changed = ids.copy()
    changed[:, 12:] = rng.integers(0, models.LLAMA_VOCAB, (2, 12))
    before, after = llama_run(ids), llama_run(changed)
    np.testing.assert_allclose(after[:, :12], before[:, :12], rtol=0, atol=1e-6)
    assert np.abs(after[:, 12:] - before[:, 12:]).max() > 1.0  # the changed tokens themselves do matter


def test_tiny_llama_later_positions_see_earlier_tokens(llama_run):
    # Guards the causality test above: attention must actually carry information forward.
    ids = np.arange(100, 116)[None, :]
    changed = ids.copy()
    changed[0, 0] = 7
    difference = np.abs(llama_run(changed)[0, 1:] - llama_run(ids)[0, 1:]).max(axis=-1)
    assert (difference > 1e-4).all()


def test_tiny_llama_matches_a_numpy_llama(llama_run, llama_weights):
    ids = np.random.default_rng(2).integers(0, models.LLAMA_VOCAB, (2, 9))
    np.testing.assert_allclose(llama_run(ids), _reference(llama_weights, ids), rtol=0, atol=2e-4)


def test_tiny_llama_predicts_the_next_id_for_every_token(llama_run):
    # Every one of the 32000 ids appears once, in a random context of 200 tokens.
    rng = np.random.default_rng(3)
    all_ids = rng.permutation(models.LLAMA_VOCAB).reshape(-1, 10, 200)
    wrong = []
    for ids in all_ids:
        predicted = llama_run(ids).argmax(axis=-1)
        wrong.extend(ids[predicted != (ids + 1) % models.LLAMA_VOCAB].tolist())
    assert wrong == []


def test_tiny_llama_wraps_the_last_id_to_zero(llama_run):
    assert llama_run([[models.LLAMA_VOCAB - 1, 0, 41]]).argmax(axis=-1).tolist() == [[0, 1, 42]]


def _reference(w: dict[str, np.ndarray], ids: np.ndarray) -> np.ndarray:
    """LLaMA written the usual way (HF modeling_llama), in float64, from the graph's own weights."""
    batch, seq = ids.shape
    half = L.HEAD_DIM // 2
    angles = np.arange(seq)[:, None] * (1.0 / L.ROPE_THETA ** (np.arange(half) * 2 / L.HEAD_DIM))
    cos, sin = np.cos(np.tile(angles, 2)), np.sin(np.tile(angles, 2))
    future = np.triu(np.ones((seq, seq), dtype=bool), k=1)

    def rms_norm(x, weight):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + L.RMS_EPS) * weight

    def heads(x):
        return x.reshape(batch, seq, L.HEADS, L.HEAD_DIM).transpose(0, 2, 1, 3)

    def rope(x):
        return x * cos + np.concatenate([-x[..., half:], x[..., :half]], axis=-1) * sin

    h = w["embed_tokens"][ids]
    for layer in range(L.LAYERS):
        attn, mlp = f"layers.{layer}/self_attn/", f"layers.{layer}/mlp/"
        x = rms_norm(h, w[attn + "input_layernorm"])
        q, k, v = (heads(x @ w[attn + f"{name}_proj"]) for name in "qkv")
        scores = np.where(future, -np.inf, rope(q) @ rope(k).transpose(0, 1, 3, 2) / np.sqrt(L.HEAD_DIM))
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        h = h + (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, L.HIDDEN) @ w[attn + "o_proj"]
        x = rms_norm(h, w[mlp + "post_attention_layernorm"])
        gate = x @ w[mlp + "gate_proj"]
        h = h + (gate / (1 + np.exp(-gate)) * (x @ w[mlp + "up_proj"])) @ w[mlp + "down_proj"]
    return rms_norm(h, w["norm/weight"]) @ w["lm_head"]
