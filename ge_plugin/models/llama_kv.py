"""The generating tiny LLaMA: one set of weights in three graphs (no cache, stacked cache, per-layer cache).

``tiny_llama`` counts, which a cache cannot break; this one copies, so a broken cache changes the text. Layer
0's heads 0 and 1 attend, through the rotary embedding alone, to the token ``COPY_DISTANCE`` positions back,
and write its embedding into the upper half of the residual stream; lm_head reads that half. So the next
token after position ``i`` is the token at ``i - COPY_DISTANCE``: greedy generation continues the prompt
with period ``COPY_DISTANCE + 1``, and a cache that lost or misplaced one key/value changes the ids, not
only their logits' last digits. The other heads and layer 1 are small random attention and MLPs, real work
whose results the exactness tests compare.

How the copy head works: q and k are constant vectors (a zero projection plus a bias), rotated by the
rotary embedding of their positions, with q's pairs turned back by ``COPY_DISTANCE`` steps. Their dot product
is ``COPY_SCALE · Σ_f cos(θ_f (i - j - COPY_DISTANCE))``: 8 at the wanted key, at most 7.49 anywhere else
within 2048 positions, so the wanted key's weight is above 1 - 1e-8.

The three graphs (every dim symbolic; ATC fixes the context at compile time):

- ``tiny_llama_gen``: ``input_ids [b, s]`` -> ``logits [b, s, 512]``, causal over the whole sequence: the
  full-recompute reference.
- ``tiny_llama_kv``: adds ``attention_mask [b, kv + s]`` (1 for a cached or new token, 0 for an empty
  cache position), ``position_ids [b, s]`` and ``past_key_values [layers, 2, b, heads, kv, head_dim]``;
  outputs also ``present_key_values [layers, 2, b, heads, s, head_dim]``, the new tokens' keys and values.
- ``tiny_llama_kv_layers``: the same with Hugging Face's per-layer names, ``past_key_values.N.key`` /
  ``.value`` ``[b, heads, kv, head_dim]`` in and ``present.N.key`` / ``.value`` ``[b, heads, s, head_dim]`` out.
"""

from __future__ import annotations

import numpy as np
import onnx
from numpy.typing import NDArray

from ge_plugin.models import _blocks as B
from ge_plugin.models._graph import FLOAT, INT64, MASKED, GraphBuilder, tensor

VOCAB = 512
PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
HIDDEN = 64
LAYERS = 2
HEADS = 4
HEAD_DIM = HIDDEN // HEADS
INTERMEDIATE = 176
RMS_EPS = 1e-5
ROPE_THETA = 10000.0
#: the next token is the one this many positions back
COPY_DISTANCE = 12
#: size of each rotary pair of the copy heads' q (k's pairs are unit vectors)
COPY_SCALE = 160.0
#: the embeddings live in the lower half of the residual stream; the copied token in the upper half
EMBED_DIMS = HIDDEN // 2
LOGIT_SCALE = 2.0
BRANCH_SCALE = 0.02
SEED = 20261204

FORMS = ("full", "stacked", "per_layer")

Matrix = NDArray[np.float64]


def tiny_llama_gen() -> onnx.ModelProto:
    """The cache-free reference: ``input_ids [b, s]`` -> ``logits [b, s, 512]``."""
    return _build("full")


def tiny_llama_kv() -> onnx.ModelProto:
    """Stacked cache form: one ``past_key_values`` input and one ``present_key_values`` output."""
    return _build("stacked")


def tiny_llama_kv_layers() -> onnx.ModelProto:
    """Per-layer cache form: ``past_key_values.N.key/.value`` in, ``present.N.key/.value`` out."""
    return _build("per_layer")


def _build(form: str) -> onnx.ModelProto:
    rng = np.random.default_rng(SEED)
    embed = np.zeros((VOCAB, HIDDEN))
    rows = rng.standard_normal((VOCAB, EMBED_DIMS))
    embed[:, :EMBED_DIMS] = rows / np.linalg.norm(rows, axis=1, keepdims=True)

    g = GraphBuilder()
    if form == "full":
        positions = g.op("Unsqueeze", B.seq_positions(g, "input_ids"), g.const([0]))  # [1, s]
        bias = B.causal_bias(g, B.seq_positions(g, "input_ids"))
    else:
        positions = "position_ids"
        bias = _cached_bias(g)
    with g.scope("rotary"):
        cos, sin = _rotary_tables(g, positions)
    h = g.op("Gather", g.weight("embed_tokens", embed), "input_ids", axis=0)
    presents: list[tuple[str, str]] = []
    for index in range(LAYERS):
        with g.scope(f"layers.{index}"):
            past = None if form == "full" else _past(g, form, index)
            h, present = _decoder_layer(g, rng, index, h, bias, cos, sin, past)
            presents.append(present)
    with g.scope("norm"):
        h = B.rms_norm(g, h, g.weight("weight", np.ones(HIDDEN)), RMS_EPS)
    lm_head = np.zeros((HIDDEN, VOCAB))
    lm_head[EMBED_DIMS:] = embed[:, :EMBED_DIMS].T * LOGIT_SCALE
    g.op("MatMul", h, g.weight("lm_head", lm_head), out="logits")

    inputs = [tensor("input_ids", INT64, ["batch", "seq"])]
    outputs = [tensor("logits", FLOAT, ["batch", "seq", VOCAB])]
    cache: list[int | str] = ["batch", HEADS, "past", HEAD_DIM]
    new: list[int | str] = ["batch", HEADS, "seq", HEAD_DIM]
    if form != "full":
        inputs.append(tensor("attention_mask", INT64, ["batch", "total"]))
        inputs.append(tensor("position_ids", INT64, ["batch", "seq"]))
    if form == "stacked":
        inputs.append(tensor("past_key_values", FLOAT, [LAYERS, 2, *cache]))
        stacked = [
            _lead(g, g.op("Concat", _lead(g, key), _lead(g, value), axis=0)) for key, value in presents
        ]
        g.op("Concat", *stacked, axis=0, out="present_key_values")
        outputs.append(tensor("present_key_values", FLOAT, [LAYERS, 2, *new]))
    elif form == "per_layer":
        for index, (key, value) in enumerate(presents):
            inputs.append(tensor(f"past_key_values.{index}.key", FLOAT, cache))
            inputs.append(tensor(f"past_key_values.{index}.value", FLOAT, cache))
            g.op("Identity", key, out=f"present.{index}.key")
            g.op("Identity", value, out=f"present.{index}.value")
            outputs.append(tensor(f"present.{index}.key", FLOAT, new))
            outputs.append(tensor(f"present.{index}.value", FLOAT, new))
    name = {"full": "tiny_llama_gen", "stacked": "tiny_llama_kv", "per_layer": "tiny_llama_kv_layers"}[form]
    return g.build(
        name,
        inputs,
        outputs,
        doc=f"Generating tiny LLaMA ({form} cache form): the next token is the one {COPY_DISTANCE} back.",
        metadata={
            "ge_plugin.model": name,
            "vocab_size": str(VOCAB),
            "num_layers": str(LAYERS),
            "num_heads": str(HEADS),
            "head_dim": str(HEAD_DIM),
            "eos_token_id": str(EOS_ID),
        },
    )


def _lead(g: GraphBuilder, x: str) -> str:
    return g.op("Unsqueeze", x, g.const([0]))


def _past(g: GraphBuilder, form: str, index: int) -> tuple[str, str]:
    if form == "per_layer":
        return f"past_key_values.{index}.key", f"past_key_values.{index}.value"
    layer = g.op("Gather", "past_key_values", g.const(index), axis=0)  # [2, b, heads, kv, head_dim]
    return g.op("Gather", layer, g.const(0), axis=0), g.op("Gather", layer, g.const(1), axis=0)


def _cached_bias(g: GraphBuilder) -> str:
    """``[b, 1, s, kv + s]``: ``MASKED`` for keys the mask drops and for new keys in a query's future."""
    total = g.op("Gather", g.op("Shape", "attention_mask"), g.const(1), axis=0)
    seq = g.op("Gather", g.op("Shape", "input_ids"), g.const(1), axis=0)
    past = g.op("Sub", total, seq)
    rows = g.op("Unsqueeze", g.op("Range", past, total, g.const(1)), g.const([1]))  # query i sits at kv + i
    cols = g.op("Unsqueeze", g.op("Range", g.const(0), total, g.const(1)), g.const([0]))
    future = g.op("Where", g.op("Greater", cols, rows), g.const(MASKED, np.float32), g.const(0.0, np.float32))
    return g.op("Add", B.padding_bias(g, "attention_mask"), future)


def _decoder_layer(
    g: GraphBuilder,
    rng: np.random.Generator,
    index: int,
    h: str,
    bias: str,
    cos: str,
    sin: str,
    past: tuple[str, str] | None,
) -> tuple[str, tuple[str, str]]:
    def proj(name: str, fan_in: int, fan_out: int, scale: float = 1.0) -> Matrix:
        weights: Matrix = rng.standard_normal((fan_in, fan_out)) * (scale / np.sqrt(fan_in))
        return weights

    wq, wk = proj("q", HIDDEN, HIDDEN), proj("k", HIDDEN, HIDDEN)
    wv, wo = proj("v", HIDDEN, HIDDEN), proj("o", HIDDEN, HIDDEN, BRANCH_SCALE)
    bq, bk = np.zeros(HIDDEN), np.zeros(HIDDEN)
    if index == 0:
        _copy_heads(wq, wk, wv, wo, bq, bk)
    with g.scope("self_attn"):
        x = B.rms_norm(g, h, g.weight("input_layernorm", np.ones(HIDDEN)), RMS_EPS)
        q = B.split_heads(g, B.linear(g, x, g.weight("q_proj", wq), g.weight("q_bias", bq)), HEADS, HEAD_DIM)
        k = B.split_heads(g, B.linear(g, x, g.weight("k_proj", wk), g.weight("k_bias", bk)), HEADS, HEAD_DIM)
        v = B.split_heads(g, B.linear(g, x, g.weight("v_proj", wv)), HEADS, HEAD_DIM)
        q, k = _rotate(g, q, cos, sin), _rotate(g, k, cos, sin)
        keys, values = k, v
        if past is not None:
            keys, values = g.op("Concat", past[0], k, axis=2), g.op("Concat", past[1], v, axis=2)
        context = B.merge_heads(g, B.attend(g, q, keys, values, bias, HEAD_DIM), HIDDEN)
        h = g.op("Add", h, B.linear(g, context, g.weight("o_proj", wo)))
    with g.scope("mlp"):
        x = B.rms_norm(g, h, g.weight("post_attention_layernorm", np.ones(HIDDEN)), RMS_EPS)
        gate = B.linear(g, x, g.weight("gate_proj", proj("gate", HIDDEN, INTERMEDIATE)))
        up = B.linear(g, x, g.weight("up_proj", proj("up", HIDDEN, INTERMEDIATE)))
        swiglu = g.op("Mul", g.op("Mul", gate, g.op("Sigmoid", gate)), up)
        down = B.linear(g, swiglu, g.weight("down_proj", proj("down", INTERMEDIATE, HIDDEN, BRANCH_SCALE)))
        return g.op("Add", h, down), (k, v)


def _copy_heads(wq: Matrix, wk: Matrix, wv: Matrix, wo: Matrix, bq: Matrix, bk: Matrix) -> None:
    """Heads 0 and 1 of layer 0 become the copy heads (in place): constant rotated q and k, values that
    carry the normalised embedding (``√HIDDEN`` times the row) and an output into the upper half."""
    half = HEAD_DIM // 2
    angles = COPY_DISTANCE / ROPE_THETA ** (np.arange(0, HEAD_DIM, 2) / HEAD_DIM)
    key = np.concatenate([np.ones(half), np.zeros(half)])  # pair f = (1, 0)
    query = COPY_SCALE * np.concatenate([np.cos(-angles), np.sin(-angles)])  # pair f turned by -Δθ_f
    copy = slice(0, 2 * HEAD_DIM)
    wq[:, copy] = 0.0
    wk[:, copy] = 0.0
    for head in (0, 1):
        bq[head * HEAD_DIM : (head + 1) * HEAD_DIM] = query
        bk[head * HEAD_DIM : (head + 1) * HEAD_DIM] = key
    wv[:, copy] = 0.0
    wv[:EMBED_DIMS, copy] = np.eye(EMBED_DIMS) / np.sqrt(HIDDEN)
    wo[copy, :] = 0.0
    wo[copy, EMBED_DIMS:] = np.eye(EMBED_DIMS)


def _rotary_tables(g: GraphBuilder, positions: str) -> tuple[str, str]:
    """cos and sin ``[b, 1, s, head_dim]`` from ``positions [b, s]`` (``[1, s]`` for the reference)."""
    inv_freq = 1.0 / ROPE_THETA ** (np.arange(0, HEAD_DIM, 2) / HEAD_DIM)
    pos = g.op("Unsqueeze", g.op("Cast", positions, to=FLOAT), g.const([2]))
    freqs = g.op("Mul", pos, g.const(inv_freq, np.float32))
    angles = g.op("Unsqueeze", g.op("Concat", freqs, freqs, axis=-1), g.const([1]))
    return g.op("Cos", angles), g.op("Sin", angles)


def _rotate(g: GraphBuilder, x: str, cos: str, sin: str) -> str:
    half = HEAD_DIM // 2
    first = g.op("Slice", x, g.const([0]), g.const([half]), g.const([-1]))
    second = g.op("Slice", x, g.const([half]), g.const([HEAD_DIM]), g.const([-1]))
    rotated = g.op("Concat", g.op("Neg", second), first, axis=-1)
    return g.op("Add", g.op("Mul", x, cos), g.op("Mul", rotated, sin))
