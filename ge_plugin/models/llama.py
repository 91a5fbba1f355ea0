"""A tiny LLaMA-shaped decoder whose next-token prediction is always ``(input_id + 1) % 32000``.

It has the real architecture (token embedding, RMSNorm, causal self-attention with rotary position
embeddings, SwiGLU MLP, residual connections, final RMSNorm, an untied lm_head over a 32000-token vocabulary),
so it exercises every shape and dtype path a served LLM does, but its output is recognisable: a demo prints
ids counting up and an end-to-end test can check the argmax without onnxruntime.

How the counting works: token embeddings are random unit vectors, and column ``t + 1`` of lm_head is
embedding row ``t`` (times ``LOGIT_SCALE``). The attention and MLP output projections are small
(``BRANCH_SCALE``), so the residual stream stays close to the token's own embedding and the largest dot
product is with itself. In 64 dimensions no two of the 32000 random unit rows are closer than cosine ~0.68,
which leaves room for the blocks' small contributions; the tests check every token id.
"""

from __future__ import annotations

import numpy as np
import onnx

from ge_plugin.models import _blocks as B
from ge_plugin.models._graph import FLOAT, INT64, GraphBuilder, tensor

VOCAB = 32000
HIDDEN = 64
LAYERS = 2
HEADS = 4
HEAD_DIM = HIDDEN // HEADS
INTERMEDIATE = 176  # LLaMA's 8/3 · hidden, rounded up to a multiple of 16
RMS_EPS = 1e-5
ROPE_THETA = 10000.0
#: lm_head = shifted embeddings · LOGIT_SCALE; the winning logit is about √HIDDEN · LOGIT_SCALE = 16.
LOGIT_SCALE = 2.0
#: Output projections (attention o_proj, MLP down_proj) are scaled by this so blocks only nudge the
#: residual stream and the counting property survives them.
BRANCH_SCALE = 0.01
SEED = 20240607


def tiny_llama() -> onnx.ModelProto:
    """``input_ids`` int64 [batch, seq] -> ``logits`` float32 [batch, seq, 32000]; about 16 MB."""
    rng = np.random.default_rng(SEED)
    embed = rng.standard_normal((VOCAB, HIDDEN))
    embed /= np.linalg.norm(embed, axis=1, keepdims=True)

    g = GraphBuilder()
    positions = B.seq_positions(g, "input_ids")
    bias = B.causal_bias(g, positions)
    with g.scope("rotary"):
        cos, sin = _rotary_tables(g, positions)
    h = g.op("Gather", g.weight("embed_tokens", embed), "input_ids", axis=0)
    for index in range(LAYERS):
        with g.scope(f"layers.{index}"):
            h = _decoder_layer(g, rng, h, bias, cos, sin)
    with g.scope("norm"):
        h = B.rms_norm(g, h, g.weight("weight", np.ones(HIDDEN)), RMS_EPS)
    lm_head = np.roll(embed.T, 1, axis=1) * LOGIT_SCALE  # column t+1 holds embedding row t
    g.op("MatMul", h, g.weight("lm_head", lm_head), out="logits")

    return g.build(
        "tiny_llama",
        [tensor("input_ids", INT64, ["batch", "seq"])],
        [tensor("logits", FLOAT, ["batch", "seq", VOCAB])],
        doc="Tiny LLaMA for ge-plugin demos: argmax(logits[b, s]) == (input_ids[b, s] + 1) % 32000.",
        metadata={"ge_plugin.model": "tiny_llama", "vocab_size": str(VOCAB), "hidden_size": str(HIDDEN)},
    )


def _decoder_layer(g: GraphBuilder, rng: np.random.Generator, h: str, bias: str, cos: str, sin: str) -> str:
    def proj(name: str, fan_in: int, fan_out: int, scale: float = 1.0) -> str:
        return g.weight(name, rng.standard_normal((fan_in, fan_out)) * (scale / np.sqrt(fan_in)))

    with g.scope("self_attn"):
        x = B.rms_norm(g, h, g.weight("input_layernorm", np.ones(HIDDEN)), RMS_EPS)
        q = B.split_heads(g, B.linear(g, x, proj("q_proj", HIDDEN, HIDDEN)), HEADS, HEAD_DIM)
        k = B.split_heads(g, B.linear(g, x, proj("k_proj", HIDDEN, HIDDEN)), HEADS, HEAD_DIM)
        v = B.split_heads(g, B.linear(g, x, proj("v_proj", HIDDEN, HIDDEN)), HEADS, HEAD_DIM)
        q, k = _rotate(g, q, cos, sin), _rotate(g, k, cos, sin)
        context = B.merge_heads(g, B.attend(g, q, k, v, bias, HEAD_DIM), HIDDEN)
        h = g.op("Add", h, B.linear(g, context, proj("o_proj", HIDDEN, HIDDEN, BRANCH_SCALE)))
    with g.scope("mlp"):
        x = B.rms_norm(g, h, g.weight("post_attention_layernorm", np.ones(HIDDEN)), RMS_EPS)
        gate = B.linear(g, x, proj("gate_proj", HIDDEN, INTERMEDIATE))
        up = B.linear(g, x, proj("up_proj", HIDDEN, INTERMEDIATE))
        swiglu = g.op("Mul", g.op("Mul", gate, g.op("Sigmoid", gate)), up)  # silu(x·W1) * (x·W3)
        down = B.linear(g, swiglu, proj("down_proj", INTERMEDIATE, HIDDEN, BRANCH_SCALE))
        return g.op("Add", h, down)


def _rotary_tables(g: GraphBuilder, positions: str) -> tuple[str, str]:
    """cos and sin ``[seq, head_dim]`` computed from the positions at run time, so any seq length works."""
    inv_freq = 1.0 / ROPE_THETA ** (np.arange(0, HEAD_DIM, 2) / HEAD_DIM)
    pos = g.op("Unsqueeze", g.op("Cast", positions, to=FLOAT), g.const([1]))
    freqs = g.op("Mul", pos, g.const(inv_freq, np.float32))
    angles = g.op("Concat", freqs, freqs, axis=-1)
    return g.op("Cos", angles), g.op("Sin", angles)


def _rotate(g: GraphBuilder, x: str, cos: str, sin: str) -> str:
    """Rotary embedding on ``[batch, heads, seq, head_dim]``: x·cos + rotate_half(x)·sin."""
    half = HEAD_DIM // 2
    first = g.op("Slice", x, g.const([0]), g.const([half]), g.const([-1]))
    second = g.op("Slice", x, g.const([half]), g.const([HEAD_DIM]), g.const([-1]))
    rotated = g.op("Concat", g.op("Neg", second), first, axis=-1)
    return g.op("Add", g.op("Mul", x, cos), g.op("Mul", rotated, sin))
