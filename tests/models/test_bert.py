"""The tiny BERT: valid ONNX, dynamic shapes, padding-proof masking, matches a numpy BERT."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest

from ge_plugin import models
from ge_plugin.models import bert as B


def test_tiny_bert_passes_the_full_onnx_checker(bert, untyped_tensors):
    assert untyped_tensors(bert) == []


def test_tiny_bert_declares_two_int64_inputs_and_hidden_states(bert):
    def signature(value):
        kind = value.type.tensor_type
        return value.name, kind.elem_type, [d.dim_param or d.dim_value for d in kind.shape.dim]

    assert [signature(v) for v in bert.graph.input] == [
        ("input_ids", onnx.TensorProto.INT64, ["batch", "seq"]),
        ("attention_mask", onnx.TensorProto.INT64, ["batch", "seq"]),
    ]
    assert [signature(v) for v in bert.graph.output] == [
        ("last_hidden_state", onnx.TensorProto.FLOAT, ["batch", "seq", models.BERT_HIDDEN])
    ]
    assert [(o.domain, o.version) for o in bert.opset_import] == [("", 17)]


@pytest.mark.parametrize(("batch", "seq"), [(1, 1), (3, 7), (8, 128), (1, models.BERT_MAX_POSITIONS)])
def test_tiny_bert_runs_at_any_batch_and_seq_up_to_512(bert_run, batch, seq):
    ids = np.random.default_rng(seq).integers(0, models.BERT_VOCAB, (batch, seq))
    hidden = bert_run(ids)
    assert hidden.shape == (batch, seq, models.BERT_HIDDEN)
    assert hidden.dtype == np.float32
    assert np.isfinite(hidden).all()


def test_tiny_bert_padding_with_masked_tokens_leaves_real_tokens_unchanged(bert_run):
    rng = np.random.default_rng(1)
    ids = rng.integers(0, models.BERT_VOCAB, (2, 11))
    padded = np.concatenate([ids, rng.integers(0, models.BERT_VOCAB, (2, 21))], axis=1)
    mask = np.concatenate([np.ones((2, 11)), np.zeros((2, 21))], axis=1)
    np.testing.assert_allclose(bert_run(padded, mask)[:, :11], bert_run(ids), rtol=0, atol=1e-5)


def test_tiny_bert_masked_tokens_in_the_middle_are_ignored(bert_run):
    ids = np.random.default_rng(2).integers(0, models.BERT_VOCAB, (1, 16))
    mask = np.ones_like(ids)
    mask[0, 5:9] = 0
    other = ids.copy()
    other[0, 5:9] = (ids[0, 5:9] + 500) % models.BERT_VOCAB
    keep = mask[0].astype(bool)
    np.testing.assert_allclose(
        bert_run(other, mask)[0, keep], bert_run(ids, mask)[0, keep], rtol=0, atol=1e-5
    )


def test_tiny_bert_attends_in_both_directions(bert_run):
    # Guards the masking tests above: unmasked tokens, earlier or later, must influence each other.
    ids = np.random.default_rng(3).integers(0, models.BERT_VOCAB, (1, 8))
    other = ids.copy()
    other[0, -1] = (ids[0, -1] + 1) % models.BERT_VOCAB
    difference = np.abs(bert_run(other)[0, :-1] - bert_run(ids)[0, :-1]).max(axis=-1)
    assert (difference > 1e-4).all()


def test_tiny_bert_matches_a_numpy_bert(bert_run, bert_weights):
    rng = np.random.default_rng(4)
    ids = rng.integers(0, models.BERT_VOCAB, (2, 10))
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    np.testing.assert_allclose(bert_run(ids, mask), _reference(bert_weights, ids, mask), rtol=0, atol=1e-4)


def _reference(w: dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """BERT written the usual way (HF modeling_bert, post-LayerNorm), in float64, from the graph's weights."""
    batch, seq = ids.shape
    erf = np.vectorize(math.erf)

    def layer_norm(x, prefix):
        centred = x - x.mean(-1, keepdims=True)
        normed = centred / np.sqrt((centred**2).mean(-1, keepdims=True) + B.LAYER_NORM_EPS)
        return normed * w[prefix + ".weight"] + w[prefix + ".bias"]

    def dense(x, prefix):
        return x @ w[prefix + ".weight"] + w[prefix + ".bias"]

    def heads(x):
        return x.reshape(batch, seq, B.HEADS, B.HEAD_DIM).transpose(0, 2, 1, 3)

    embedded = w["embeddings/word_embeddings"][ids] + w["embeddings/position_embeddings"][:seq]
    h = layer_norm(embedded, "embeddings/LayerNorm")
    hidden_keys = (mask == 0)[:, None, None, :]
    for layer in range(B.LAYERS):
        attn, mlp = f"encoder.layer.{layer}/attention/", f"encoder.layer.{layer}/mlp/"
        q, k, v = (heads(dense(h, attn + name)) for name in ("query", "key", "value"))
        scores = np.where(hidden_keys, -np.inf, q @ k.transpose(0, 1, 3, 2) / np.sqrt(B.HEAD_DIM))
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, B.HIDDEN)
        h = layer_norm(h + dense(context, attn + "output.dense"), attn + "output.LayerNorm")
        inner = dense(h, mlp + "intermediate.dense")
        inner = 0.5 * inner * (1 + erf(inner / math.sqrt(2)))
        h = layer_norm(h + dense(inner, mlp + "output.dense"), mlp + "output.LayerNorm")
    return h
