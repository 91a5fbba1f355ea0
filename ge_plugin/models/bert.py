"""A tiny BERT-shaped encoder: the two-input (ids + mask) model every serving stack has to handle.

Post-LayerNorm encoder layers with bidirectional self-attention, learned position embeddings (at most
``MAX_POSITIONS`` tokens) and an erf-GELU MLP. Keys whose ``attention_mask`` is 0 get a large negative bias,
so padding a sequence with masked tokens leaves the real tokens' hidden states unchanged, which is what lets
a server pad requests up to a gear shape.
"""

from __future__ import annotations

import numpy as np
import onnx

from ge_plugin.models import _blocks as B
from ge_plugin.models._graph import FLOAT, INT64, GraphBuilder, tensor

VOCAB = 1000
HIDDEN = 64
LAYERS = 2
HEADS = 4
HEAD_DIM = HIDDEN // HEADS
INTERMEDIATE = 256
MAX_POSITIONS = 512
LAYER_NORM_EPS = 1e-12
SEED = 20240608


def tiny_bert() -> onnx.ModelProto:
    """``input_ids``, ``attention_mask`` int64 [batch, seq] -> ``last_hidden_state`` float32
    [batch, seq, 64]; seq is at most 512 (the position table's length)."""
    rng = np.random.default_rng(SEED)
    g = GraphBuilder()
    bias = B.padding_bias(g, "attention_mask")
    with g.scope("embeddings"):
        words = g.weight("word_embeddings", rng.standard_normal((VOCAB, HIDDEN)))
        table = g.weight("position_embeddings", rng.standard_normal((MAX_POSITIONS, HIDDEN)))
        summed = g.op(
            "Add",
            g.op("Gather", words, "input_ids", axis=0),
            g.op("Gather", table, B.seq_positions(g, "input_ids"), axis=0),
        )
        h = _norm(g, summed, "LayerNorm")
    for index in range(LAYERS):
        with g.scope(f"encoder.layer.{index}"):
            h = _encoder_layer(g, rng, h, bias)
    g.op("Identity", h, out="last_hidden_state")

    return g.build(
        "tiny_bert",
        [tensor("input_ids", INT64, ["batch", "seq"]), tensor("attention_mask", INT64, ["batch", "seq"])],
        [tensor("last_hidden_state", FLOAT, ["batch", "seq", HIDDEN])],
        doc="Tiny BERT for ge-plugin demos: masked keys (attention_mask 0) do not affect other positions.",
        metadata={"ge_plugin.model": "tiny_bert", "vocab_size": str(VOCAB), "hidden_size": str(HIDDEN)},
    )


def _encoder_layer(g: GraphBuilder, rng: np.random.Generator, h: str, bias: str) -> str:
    def dense(x: str, name: str, fan_in: int, fan_out: int) -> str:
        weight = g.weight(f"{name}.weight", rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in))
        return B.linear(g, x, weight, g.weight(f"{name}.bias", rng.standard_normal(fan_out) * 0.02))

    with g.scope("attention"):
        q = B.split_heads(g, dense(h, "query", HIDDEN, HIDDEN), HEADS, HEAD_DIM)
        k = B.split_heads(g, dense(h, "key", HIDDEN, HIDDEN), HEADS, HEAD_DIM)
        v = B.split_heads(g, dense(h, "value", HIDDEN, HIDDEN), HEADS, HEAD_DIM)
        context = B.merge_heads(g, B.attend(g, q, k, v, bias, HEAD_DIM), HIDDEN)
        h = _norm(g, g.op("Add", h, dense(context, "output.dense", HIDDEN, HIDDEN)), "output.LayerNorm")
    with g.scope("mlp"):
        inner = _gelu(g, dense(h, "intermediate.dense", HIDDEN, INTERMEDIATE))
        out = dense(inner, "output.dense", INTERMEDIATE, HIDDEN)
        return _norm(g, g.op("Add", h, out), "output.LayerNorm")


def _norm(g: GraphBuilder, x: str, name: str) -> str:
    weight = g.weight(f"{name}.weight", np.ones(HIDDEN))
    return B.layer_norm(g, x, weight, g.weight(f"{name}.bias", np.zeros(HIDDEN)), LAYER_NORM_EPS)


def _gelu(g: GraphBuilder, x: str) -> str:
    """Exact GELU, 0.5·x·(1 + erf(x/√2)); the Gelu op itself needs opset 20."""
    erf = g.op("Erf", g.op("Mul", x, g.const(1.0 / np.sqrt(2.0), np.float32)))
    return g.op("Mul", g.op("Mul", x, g.const(0.5, np.float32)), g.op("Add", erf, g.const(1.0, np.float32)))
