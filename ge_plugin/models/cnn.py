"""A tiny fully convolutional image classifier: any height and width, for image-size gears.

``images`` [batch, 3, H, W] -> a 3x3 convolution (stride 1, zero padding 1) and ReLU give ``features``
[batch, 4, H, W]; their global average, through a dense layer, gives ``logits`` [batch, 10]. It is the kind
of model ATC compiles with ``--dynamic_image_size``, and it shows why ge-plugin does not pad images by
default: zeros added around an image change the features along the old border and the average over the
whole map, so a padded image gets different logits than the image itself.
"""

from __future__ import annotations

import numpy as np
import onnx

from ge_plugin.models._graph import FLOAT, GraphBuilder, tensor

CHANNELS = 3
FEATURES = 4
CLASSES = 10
SEED = 20240901


def tiny_cnn() -> onnx.ModelProto:
    """``images`` float32 [batch, 3, H, W] -> ``logits`` float32 [batch, 10], ``features`` float32
    [batch, 4, H, W]."""
    rng = np.random.default_rng(SEED)
    g = GraphBuilder()
    kernel = g.weight("conv.weight", rng.standard_normal((FEATURES, CHANNELS, 3, 3)) / 3.0)
    bias = g.weight("conv.bias", rng.standard_normal(FEATURES) * 0.1)
    conv = g.op("Conv", "images", kernel, bias, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    g.op("Relu", conv, out="features")
    pooled = g.op("Flatten", g.op("GlobalAveragePool", "features"), axis=1)
    dense = g.weight("fc.weight", rng.standard_normal((FEATURES, CLASSES)))
    g.op("Gemm", pooled, dense, g.weight("fc.bias", rng.standard_normal(CLASSES) * 0.1), out="logits")
    return g.build(
        "tiny_cnn",
        [tensor("images", FLOAT, ["batch", CHANNELS, "height", "width"])],
        [
            tensor("logits", FLOAT, ["batch", CLASSES]),
            tensor("features", FLOAT, ["batch", FEATURES, "height", "width"]),
        ],
        doc="Tiny CNN for ge-plugin demos: any image size; padding an image changes its logits.",
        metadata={"ge_plugin.model": "tiny_cnn", "classes": str(CLASSES)},
    )
