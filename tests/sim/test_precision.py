"""Precision modes: fp32 exact, fp16 and bf16 rounding of outputs, fp16 inputs, output types."""

from __future__ import annotations

import numpy as np

from ge_plugin import acl_constants as C


def _x():
    return np.random.default_rng(7).standard_normal((2, 3, 4)).astype(np.float32) * 3.3


def test_origin_is_exact(acl, load, oms, graphs):
    x = _x()
    (y,) = load(oms["static"]).run([x])
    np.testing.assert_array_equal(y, graphs.reference(graphs.matmul_add(), {"x": x})[0])


def test_default_precision_rounds_outputs_through_fp16(acl, load, oms, graphs):
    x = _x()
    (y,) = load(oms["fp16"]).run([x])
    exact = graphs.reference(graphs.matmul_add(), {"x": x})[0]
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, exact.astype(np.float16).astype(np.float32))
    assert not np.array_equal(y, exact)


def test_bf16_modes_round_outputs_to_the_nearest_bfloat16(acl, load, oms, graphs):
    x = _x()
    (y,) = load(oms["bf16"]).run([x])
    exact = graphs.reference(graphs.matmul_add(), {"x": x})[0]
    bits = y.view(np.uint32)
    assert not (bits & 0xFFFF).any(), "bf16 keeps only the top 16 bits"
    down = (exact.view(np.uint32) & 0xFFFF0000).view(np.float32)
    up = ((exact.view(np.uint32) & 0xFFFF0000) + 0x10000).view(np.float32)
    nearest = np.where(np.abs(exact - down) <= np.abs(up - exact), down, up)
    np.testing.assert_array_equal(y, nearest)
    assert not np.array_equal(y, exact)


def test_fp16_inputs_and_output_type(acl, load, graphs, tmp_path):
    path = graphs.build_om(
        tmp_path,
        "half",
        graphs.matmul_add(),
        "--input_shape=x:2,3,4",
        "--input_fp16_nodes=x",
        "--output_type=FP16",
        "--precision_mode_v2=origin",
    )
    model = load(path)
    assert acl.mdl.get_input_data_type(model.desc, 0) == C.ACL_FLOAT16
    assert acl.mdl.get_output_data_type(model.desc, 0) == C.ACL_FLOAT16
    assert acl.mdl.get_input_size_by_index(model.desc, 0) == 2 * 3 * 4 * 2
    x = _x().astype(np.float16)
    (y,) = model.run([x], [np.float16])
    exact = graphs.reference(graphs.matmul_add(), {"x": x.astype(np.float32)})[0]
    np.testing.assert_array_equal(y, exact.astype(np.float16))
