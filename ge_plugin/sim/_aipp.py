"""A static AIPP as the device carries it out before the graph: the sim OM header's section (``ge_plugin.atc.aipp``
wrote it) applied to the uint8 images an execute reads.

YUV420SP_U8: the luma plane then the interleaved (U, V) plane, chroma repeated over its 2x2 block; RGB888_U8:
packed pixels. ``rbuv_swap_switch`` swaps U and V (R and B). With CSC each output channel ``r`` is
``(sum_c matrix[r][c] * (in_c - input_bias_c)) >> 8``, saturated to 0..255, in row order; then every channel is
``(x - mean_chn - min_chn) * var_reci_chn`` in the graph's float type, NCHW. The CSC is integer arithmetic as the
ATC guide writes it; how a real AI Core upsamples chroma and rounds is its own, so pixels may differ from a
card's by a level (docs/simulator.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

_YUV420SP = "YUV420SP_U8"


def convert(
    section: Mapping[str, Any], images: npt.NDArray[np.uint8], dtype: np.dtype[Any]
) -> npt.NDArray[Any]:
    """``images`` as the execute read them (n, h x 1.5, w, 1 for YUV420SP_U8; n, h, w, 3 for RGB888_U8) ->
    the graph's input, n x 3 x h x w of ``dtype``."""
    n = images.shape[0]
    if section["input_format"] == _YUV420SP:
        rows, width = images.shape[1], images.shape[2]
        height = rows * 2 // 3
        planes = images.reshape(n, rows, width)
        luma = planes[:, :height]
        pairs = planes[:, height:].reshape(n, height // 2, width // 2, 2)
        u, v = pairs[..., 0], pairs[..., 1]
        if section["rbuv_swap_switch"]:
            u, v = v, u
        chroma = [c.repeat(2, axis=1).repeat(2, axis=2) for c in (u, v)]
        pixels = np.stack([luma, *chroma], axis=1).astype(np.int32)
    else:
        pixels = images.transpose(0, 3, 1, 2).astype(np.int32)
        if section["rbuv_swap_switch"]:
            pixels = pixels[:, ::-1]
    if section["csc_switch"]:
        matrix = np.asarray(section["matrix"], dtype=np.int32).reshape(3, 3)
        centred = pixels - np.asarray(section["input_bias"], dtype=np.int32).reshape(1, 3, 1, 1)
        mixed = np.empty_like(centred)
        for r in range(3):  # the matrix's non-zero terms only: CSC matrices are mostly zeros and 256s
            row = mixed[:, r]
            row[...] = 0
            for c in range(3):
                if matrix[r, c]:
                    row += matrix[r, c] * centred[:, c]
        mixed >>= 8
        pixels = np.clip(mixed, 0, 255)
    mean = np.asarray(section["mean_chn"][:3], dtype=np.float32).reshape(1, 3, 1, 1)
    low = np.asarray(section["min_chn"][:3], dtype=np.float32).reshape(1, 3, 1, 1)
    scale = np.asarray(section["var_reci_chn"][:3], dtype=np.float32).reshape(1, 3, 1, 1)
    converted: npt.NDArray[Any] = ((pixels.astype(np.float32) - mean - low) * scale).astype(dtype)
    return converted
