"""An ONNX model with bfloat16 inputs and outputs, built into a sim OM and run by the simulator on the words
the device would hold: bit for bit what float32 arithmetic rounded to bfloat16 (nearest even) gives."""

from __future__ import annotations

import numpy as np
import onnx

from ge_plugin import acl_constants as C
from ge_plugin.atc import simbuild, simom
from ge_plugin.atc.flags import parse_args
from ge_plugin.models import bf16_affine, bf16_affine_reference


def build(tmp_path, *flags: str):
    source = tmp_path / "bf16_affine.onnx"
    onnx.save(bf16_affine(), source)
    argv = [
        f"--model={source}",
        "--framework=5",
        f"--output={tmp_path / 'bf16'}",
        "--soc_version=Ascend910B3",
    ]
    return simbuild.build(parse_args([*argv, "--input_shape=x:3,8", *flags])).path


def run(acl, path, words: np.ndarray, out_dtype) -> np.ndarray:
    model_id, ret = acl.mdl.load_from_file(str(path))
    assert ret == 0, acl.get_recent_err_msg()
    desc = acl.mdl.create_desc()
    assert acl.mdl.get_desc(desc, model_id) == 0
    ins, outs = acl.mdl.create_dataset(), acl.mdl.create_dataset()
    in_size = acl.mdl.get_input_size_by_index(desc, 0)
    out_size = acl.mdl.get_output_size_by_index(desc, 0)
    src, _ = acl.rt.malloc(in_size, 0)
    dst, _ = acl.rt.malloc(out_size, 0)
    assert acl.rt.memcpy(src, in_size, words.ctypes.data, words.nbytes, 1) == 0
    acl.mdl.add_dataset_buffer(ins, acl.create_data_buffer(src, in_size))
    acl.mdl.add_dataset_buffer(outs, acl.create_data_buffer(dst, out_size))
    assert acl.mdl.execute(model_id, ins, outs) == 0, acl.get_recent_err_msg()
    out = np.empty(words.shape, out_dtype)
    assert acl.rt.memcpy(out.ctypes.data, out.nbytes, dst, out.nbytes, 2) == 0
    return out


def words_with_ties() -> np.ndarray:
    """Inputs whose results need rounding, among them one exactly halfway between two bfloat16 values."""
    rng = np.random.default_rng(5)
    words = rng.integers(0x3000, 0x4800, (3, 8), dtype=np.uint16)  # 2**-31 .. 2**17, positive, finite
    words[0, 6] = 0x3F80  # x = 1.0: column 6 gives 1/3 + 0.7, which is not a bfloat16
    words[1, 3] = 0x4300  # x = 128.0: column 3 gives 128 * 0.11 = 14.08..., rounded
    return words


def test_a_bf16_onnx_model_builds_an_om_that_takes_and_gives_bf16(tmp_path):
    header = simom.read(build(tmp_path, "--precision_mode=must_keep_origin_dtype")).header
    assert header["inputs"][0]["dtype"] == header["inputs"][0]["graph_dtype"] == C.ACL_BF16
    assert header["outputs"][0]["dtype"] == header["outputs"][0]["graph_dtype"] == C.ACL_BF16


def test_the_simulator_computes_a_bf16_om_bit_for_bit(acl, tmp_path):
    path = build(tmp_path, "--precision_mode=must_keep_origin_dtype")
    words = words_with_ties()
    out = run(acl, path, words, np.uint16)
    expected = bf16_affine_reference(words)
    assert np.array_equal(out, expected)
    # rounded to nearest even, not truncated: somewhere truncating would have given other bits
    wide = (words.astype(np.uint32) << 16).view(np.float32)
    from ge_plugin.models.bf16 import SCALE, SHIFT

    truncated = ((wide * SCALE + SHIFT).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    assert not np.array_equal(out, truncated)


def test_a_bf16_output_given_as_fp32_carries_the_bf16_value(acl, tmp_path):
    path = build(tmp_path, "--precision_mode=must_keep_origin_dtype", "--output_type=FP32")
    assert simom.read(path).header["outputs"][0]["dtype"] == C.ACL_FLOAT
    words = words_with_ties()
    out = run(acl, path, words, np.float32)
    assert np.array_equal(out.view(np.uint32), bf16_affine_reference(words).astype(np.uint32) << 16)
