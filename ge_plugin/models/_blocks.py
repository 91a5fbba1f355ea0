"""Transformer pieces shared by the tiny LLaMA and the tiny BERT, spelled in standard ONNX ops only.

Everything takes its sequence length from the input tensor at run time (Shape/Gather/Range), never from a
constant, so one graph runs at every gear shape the simulator or ATC asks for.
"""

from __future__ import annotations

import numpy as np

from ge_plugin.models._graph import FLOAT, MASKED, GraphBuilder


def seq_positions(g: GraphBuilder, ids: str) -> str:
    """int64 ``[seq]`` = 0, 1, …, seq-1, where seq is dim 1 of ``ids`` ([batch, seq])."""
    seq = g.op("Gather", g.op("Shape", ids), g.const(1), axis=0)
    return g.op("Range", g.const(0), seq, g.const(1))


def causal_bias(g: GraphBuilder, positions: str) -> str:
    """float ``[seq, seq]``: 0 where key j <= query i, ``MASKED`` where j is in i's future."""
    rows = g.op("Unsqueeze", positions, g.const([1]))
    cols = g.op("Unsqueeze", positions, g.const([0]))
    future = g.op("Greater", cols, rows)
    return g.op("Where", future, g.const(MASKED, np.float32), g.const(0.0, np.float32))


def padding_bias(g: GraphBuilder, attention_mask: str) -> str:
    """float ``[batch, 1, 1, seq]``: 0 for keys with mask 1, ``MASKED`` for keys with mask 0."""
    keep = g.op("Cast", attention_mask, to=FLOAT)
    dropped = g.op("Sub", g.const(1.0, np.float32), keep)
    bias = g.op("Mul", dropped, g.const(MASKED, np.float32))
    return g.op("Unsqueeze", bias, g.const([1, 2]))


def rms_norm(g: GraphBuilder, x: str, weight: str, eps: float) -> str:
    """LLaMA's RMSNorm: x / sqrt(mean(x²) + eps) · weight, over the hidden axis."""
    mean_square = g.op("ReduceMean", g.op("Mul", x, x), axes=[-1], keepdims=1)
    rms = g.op("Sqrt", g.op("Add", mean_square, g.const(eps, np.float32)))
    return g.op("Mul", g.op("Div", x, rms), weight)


def layer_norm(g: GraphBuilder, x: str, weight: str, bias: str, eps: float) -> str:
    """LayerNorm decomposed into Reduce/Sub/Sqrt ops (the fused op only exists from opset 17 and not every
    ATC release maps it)."""
    centred = g.op("Sub", x, g.op("ReduceMean", x, axes=[-1], keepdims=1))
    variance = g.op("ReduceMean", g.op("Mul", centred, centred), axes=[-1], keepdims=1)
    std = g.op("Sqrt", g.op("Add", variance, g.const(eps, np.float32)))
    return g.op("Add", g.op("Mul", g.op("Div", centred, std), weight), bias)


def split_heads(g: GraphBuilder, x: str, heads: int, head_dim: int) -> str:
    """``[batch, seq, heads·head_dim]`` -> ``[batch, heads, seq, head_dim]``."""
    shaped = g.op("Reshape", x, g.const([0, 0, heads, head_dim]))
    return g.op("Transpose", shaped, perm=[0, 2, 1, 3])


def merge_heads(g: GraphBuilder, x: str, hidden: int) -> str:
    """``[batch, heads, seq, head_dim]`` -> ``[batch, seq, hidden]``."""
    return g.op("Reshape", g.op("Transpose", x, perm=[0, 2, 1, 3]), g.const([0, 0, hidden]))


def attend(g: GraphBuilder, q: str, k: str, v: str, bias: str, head_dim: int) -> str:
    """softmax(q·kᵀ/√d + bias)·v on ``[batch, heads, seq, head_dim]``; ``bias`` broadcasts to the scores."""
    scores = g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2]))
    scaled = g.op("Mul", scores, g.const(1.0 / np.sqrt(head_dim), np.float32))
    weights = g.op("Softmax", g.op("Add", scaled, bias), axis=-1)
    return g.op("MatMul", weights, v)


def linear(g: GraphBuilder, x: str, weight: str, bias: str | None = None) -> str:
    """x·W (+ b); weights are stored ``[in, out]`` so no Transpose is needed."""
    y = g.op("MatMul", x, weight)
    return y if bias is None else g.op("Add", y, bias)
