"""Building sim OMs: model-dependent ATC checks, gears, outputs, dtypes, and models never seen before."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge_plugin import acl_constants as C
from ge_plugin.atc import simbuild, simom
from ge_plugin.atc.flags import parse_args
from ge_plugin.errors import AtcError


def build(argv):
    return simbuild.build(parse_args(argv))


def rejected(argv) -> str:
    with pytest.raises(AtcError) as caught:
        build(argv)
    return str(caught.value)


def run_om(acl, path, feeds, *, gear=None, out_dtypes):
    """Load ``path`` in the simulator, set ``gear`` (dims dict or batch int), run, return outputs."""
    model_id, ret = acl.mdl.load_from_file(str(path))
    assert ret == 0, acl.get_recent_err_msg()
    desc = acl.mdl.create_desc()
    acl.mdl.get_desc(desc, model_id)
    ins, outs = acl.mdl.create_dataset(), acl.mdl.create_dataset()
    for i in range(acl.mdl.get_num_inputs(desc)):
        size = acl.mdl.get_input_size_by_index(desc, i)
        ptr, _ = acl.rt.malloc(size, 0)
        if i < len(feeds):
            data = np.ascontiguousarray(feeds[i])
            assert acl.rt.memcpy(ptr, size, data.ctypes.data, data.nbytes, 1) == 0
        acl.mdl.add_dataset_buffer(ins, acl.create_data_buffer(ptr, size))
    ptrs = []
    for j in range(acl.mdl.get_num_outputs(desc)):
        size = acl.mdl.get_output_size_by_index(desc, j)
        ptr, _ = acl.rt.malloc(size, 0)
        ptrs.append(ptr)
        acl.mdl.add_dataset_buffer(outs, acl.create_data_buffer(ptr, size))
    if isinstance(gear, dict):
        assert acl.mdl.set_input_dynamic_dims(model_id, ins, len(feeds), gear) == 0, acl.get_recent_err_msg()
    elif gear is not None:
        assert acl.mdl.set_dynamic_batch_size(model_id, ins, len(feeds), gear) == 0, acl.get_recent_err_msg()
    assert acl.mdl.execute(model_id, ins, outs) == 0, acl.get_recent_err_msg()
    results = []
    for j, (ptr, dtype) in enumerate(zip(ptrs, out_dtypes)):
        dims, _ = acl.mdl.get_cur_output_dims(desc, j)
        out = np.empty(dims["dims"], dtype)
        assert acl.rt.memcpy(out.ctypes.data, out.nbytes, ptr, out.nbytes, 2) == 0
        results.append(out)
    return desc, results


def test_dims_gears_follow_input_shape_order(base, tmp_path):
    result = build(
        [*base, "--input_shape=x:-1,-1,4;ids:-1,-1", "--input_format=ND", "--dynamic_dims=1,2,1,2;3,5,3,5"]
    )
    header = simom.read(result.path).header
    assert [i["name"] for i in header["inputs"]] == ["ids", "x"]  # the model's input order
    assert header["dynamic"]["mode"] == "dims"
    first, second = header["dynamic"]["gears"]
    assert first["values"] == [1, 2, 1, 2] and first["inputs"] == [[1, 2], [1, 2, 4]]
    assert second["inputs"] == [[3, 5], [3, 5, 4]] and second["outputs"] == [[3, 5, 2], [3, 5]]
    assert header["outputs"][0]["dims"] == [-1, -1, 2]
    assert header["atc_options"]["dynamic_dims"] == "1,2,1,2;3,5,3,5"
    assert header["atc_command"].startswith("atc --model=")
    assert header["soc_version"] == "Ascend910B3" and header["precision"] == "fp16"


def test_om_file_is_readable_by_others(base):
    mask = os.umask(0o022)
    try:
        path = build([*base, "--input_shape=ids:1,2;x:1,2,4"]).path
    finally:
        os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_unknown_input_name(base):
    message = rejected([*base, "--input_shape=input_ids:1,2;x:1,2,4"])
    assert message.startswith(
        "E10016: Opname [input_ids] specified in [--input_shape] is not found in the model"
    )
    assert "ids, x" in message


def test_rank_and_fixed_dims_must_match(base):
    assert rejected([*base, "--input_shape=ids:1,2;x:1,2"]).startswith("E10049:")
    assert "fixed at 4" in rejected([*base, "--input_shape=ids:1,2;x:1,2,5"])
    message = rejected(
        [*base, "--input_shape=ids:-1,2;x:-1,2,-1", "--input_format=ND", "--dynamic_dims=1,1,4;2,2,4"]
    )
    assert "only its dynamic dims can be -1" in message


def test_inputs_left_out_must_be_fully_known(base):
    message = rejected([*base, "--input_shape=ids:1,2"])
    assert message.startswith("E11005: The shape of input x is not fully defined in the model ([?,?,4])")


def test_minus_one_dims_need_gears_in_the_model_checks_too(base):
    assert rejected([*base, "--input_shape=ids:-1,2;x:-1,2,4"]).startswith("E10011:")


def test_model_file_problems(base, tmp_path):
    missing = [f"--model={tmp_path / 'nope.onnx'}", *base[1:], "--input_shape=ids:1,2;x:1,2,4"]
    assert "the file does not exist" in rejected(missing)
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\xff\xfe not a protobuf")
    assert rejected([f"--model={junk}", *base[1:]]).startswith("E10041:")


def test_out_nodes_by_name_and_by_node_index(acl, base):
    shape = "--input_shape=ids:1,2;x:1,2,4"
    by_node = build([*base, shape, "--out_nodes=mm:0", "--precision_mode=must_keep_origin_dtype"])
    header = simom.read(by_node.path).header
    assert [o["name"] for o in header["outputs"]] == ["h"]
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 4)
    _, (h,) = run_om(acl, by_node.path, [np.zeros((1, 2), np.int64), x], out_dtypes=[np.float32])
    np.testing.assert_array_equal(h, x @ np.arange(8, dtype=np.float32).reshape(4, 2))
    by_name = build([*base, shape, "--out_nodes=n;y"])
    assert [o["name"] for o in simom.read(by_name.path).header["outputs"]] == ["n", "y"]
    assert rejected([*base, shape, "--out_nodes=mm:3"]).startswith(
        "E10016: Opname [mm:3] specified in [--out_nodes]"
    )


def test_output_type_global_and_per_node(acl, base):
    shape = "--input_shape=ids:1,2;x:1,2,4"
    every = simom.read(build([*base, shape, "--output_type=FP16"]).path).header
    assert [o["dtype"] for o in every["outputs"]] == [C.ACL_FLOAT16, C.ACL_FLOAT16]
    per = build([*base, shape, "--out_nodes=add:0;double:0", "--output_type=double:0:INT32"])
    header = simom.read(per.path).header
    assert [o["dtype"] for o in header["outputs"]] == [C.ACL_FLOAT, C.ACL_INT32]
    ids = np.array([[3, -4]], np.int64)
    desc, (_, n) = run_om(
        acl, per.path, [ids, np.zeros((1, 2, 4), np.float32)], out_dtypes=[np.float32, np.int32]
    )
    assert acl.mdl.get_output_data_type(desc, 1) == C.ACL_INT32
    np.testing.assert_array_equal(n, [[6, -8]])
    assert rejected([*base, shape, "--out_nodes=y", "--output_type=double:0:INT32"]).startswith("E10016:")


def test_input_fp16_nodes_must_be_float_inputs(base):
    shape = "--input_shape=ids:1,2;x:1,2,4"
    assert rejected([*base, shape, "--input_fp16_nodes=z"]).startswith("E10016:")
    assert "not a float input" in rejected([*base, shape, "--input_fp16_nodes=ids"])


def test_data_dependent_outputs_fall_back_to_a_run(tmp_path, graphs):
    path = tmp_path / "nz.onnx"
    onnx.save(graphs.nonzero(), path)
    result = build([f"--model={path}", "--framework=5", f"--output={tmp_path / 'nz'}", "--soc_version=A"])
    assert simom.read(result.path).header["outputs"][0]["dims"] == [1, 0]  # zeros in, nothing non-zero


def test_batch_model_never_seen_before_loads_and_runs(acl, tmp_path):
    """A small CNN built here (NCHW, dynamic batch, ATC's default fp16 precision)."""
    rng = np.random.default_rng(3)
    conv = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    fc = rng.standard_normal((4, 5)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["image", "conv"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["r"]),
            helper.make_node("GlobalAveragePool", ["r"], ["p"]),
            helper.make_node("Flatten", ["p"], ["f"]),
            helper.make_node("MatMul", ["f", "fc"], ["logits"]),
        ],
        "cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 5])],
        [numpy_helper.from_array(conv, "conv"), numpy_helper.from_array(fc, "fc")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, tmp_path / "cnn.onnx")
    result = build(
        [
            f"--model={tmp_path / 'cnn.onnx'}",
            "--framework=5",
            f"--output={tmp_path / 'cnn'}",
            "--soc_version=Ascend310P3",
            "--input_shape=image:-1,3,8,8",
            "--dynamic_batch_size=1,3",
        ]
    )
    image = rng.standard_normal((3, 3, 8, 8)).astype(np.float32)
    desc, (logits,) = run_om(acl, result.path, [image], gear=3, out_dtypes=[np.float32])
    assert acl.mdl.get_input_format(desc, 0) == C.ACL_FORMAT_NCHW
    import onnxruntime as ort

    want = ort.InferenceSession(model.SerializeToString()).run(None, {"image": image})[0]
    np.testing.assert_array_equal(logits, want.astype(np.float16).astype(np.float32))


def test_header_is_plain_json(base):
    result = build([*base, "--input_shape=ids:-1,2;x:-1,2,4", "--dynamic_batch_size=1,8"])
    header = simom.read(result.path).header
    assert json.loads(json.dumps(header)) == header
    assert [g["values"] for g in header["dynamic"]["gears"]] == [[1], [8]]
