"""A model whose inputs and outputs are bfloat16, as ONNX exported from a bf16 network is.

``x`` bfloat16 [batch, 8] -> ``y`` = bfloat16(float32(x) * scale + shift) [batch, 8]: the arithmetic is
float32 and the result is rounded to bfloat16 once, to nearest even, so a client can compute the expected
bits exactly (ml_dtypes, or numpy bit manipulation) and check a server bit for bit.
"""

from __future__ import annotations

import numpy as np
import onnx
from numpy.typing import NDArray

from ge_plugin.models._graph import GraphBuilder, tensor

WIDTH = 8
#: per column; not powers of two, so most products need rounding
SCALE = np.array([0.3, -1.7, 2.9, 0.11, -0.013, 5.5, 1.0 / 3.0, -7.25], dtype=np.float32)
SHIFT = np.array([1.0, 0.5, -2.25, 0.0, 3.0e-3, -1.0e3, 0.7, 17.0], dtype=np.float32)
BF16 = onnx.TensorProto.BFLOAT16


def bf16_affine() -> onnx.ModelProto:
    """``x`` bfloat16 [batch, 8] -> ``y`` bfloat16 [batch, 8] = bf16(float(x) * SCALE + SHIFT)."""
    g = GraphBuilder()
    wide = g.op("Cast", "x", to=onnx.TensorProto.FLOAT)
    scaled = g.op("Add", g.op("Mul", wide, g.weight("scale", SCALE)), g.weight("shift", SHIFT))
    g.op("Cast", scaled, out="y", to=BF16)
    return g.build(
        "bf16_affine",
        [tensor("x", BF16, ["batch", WIDTH])],
        [tensor("y", BF16, ["batch", WIDTH])],
        doc="bf16 in, bf16 out: y = bf16(float(x) * scale + shift), rounded to nearest even.",
        metadata={"ge_plugin.model": "bf16_affine"},
    )


def bf16_affine_reference(x_bits: NDArray[np.uint16]) -> NDArray[np.uint16]:
    """The bits of ``y`` for the bits of ``x`` (both uint16), computed with numpy alone: float32 arithmetic,
    then round to nearest even on the upper 16 bits (NaN quieted)."""
    wide = (x_bits.astype(np.uint32) << 16).view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        y = (wide * SCALE + SHIFT).astype(np.float32)
    bits = y.view(np.uint32)
    rounded = ((bits + (0x7FFF + ((bits >> 16) & 1))) >> 16).astype(np.uint16)
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, ((bits >> 16) | 0x0040).astype(np.uint16), rounded)
