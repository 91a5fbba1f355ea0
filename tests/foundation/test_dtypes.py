"""ge_plugin.dtypes is the one table of tensor types: every other vocabulary (ONNX, TensorFlow, ATC's
--output_type, onnxruntime's names) is read from it, so each row has to agree with the outside world."""

import numpy as np
import pytest

from ge_plugin import acl_constants as C
from ge_plugin import dtypes
from ge_plugin.atc import flags, simbuild

onnx = pytest.importorskip("onnx")


@pytest.mark.parametrize("dtype", dtypes.all_dtypes(), ids=str)
def test_dtypes_onnx_code_is_onnx_s_own_type_with_the_same_host_bytes(dtype):
    expected = onnx.helper.tensor_dtype_to_np_dtype(dtype.onnx)
    if dtype.short == "bf16":  # numpy has no bfloat16: ge-plugin carries its uint16 words
        assert expected.itemsize == dtype.numpy.itemsize == 2 and dtype.numpy == np.uint16
    else:
        assert expected == dtype.numpy


def test_dtypes_every_vocabulary_names_each_type_once():
    table = dtypes.all_dtypes()
    for field in ("short", "triton", "acl", "onnx", "tf"):
        values = [getattr(d, field) for d in table]
        assert len(set(values)) == len(values), field
    assert len(dtypes.BY_ATC_OUTPUT_TYPE) == sum(d.atc is not None for d in table)


def test_dtypes_derive_what_atc_and_migrate_read():
    assert simbuild.ONNX_TO_ACL[onnx.TensorProto.BFLOAT16] == C.ACL_BF16
    assert onnx.TensorProto.STRING not in simbuild.ONNX_TO_ACL
    assert simbuild.OUTPUT_TYPE_TO_ACL["DOUBLE"] == C.ACL_DOUBLE
    assert set(flags.OUTPUT_TYPES) == set(simbuild.OUTPUT_TYPE_TO_ACL)
    assert dtypes.BY_TF[14].short == "bf16" and dtypes.BY_TF[19].short == "fp16"  # TF's types.proto


def test_dtypes_onnxruntime_names_come_from_onnx_s_type_names():
    names = simbuild._ort_onnx()
    assert names["tensor(float)"] == onnx.TensorProto.FLOAT
    assert names["tensor(bfloat16)"] == onnx.TensorProto.BFLOAT16
    assert names["tensor(double)"] == onnx.TensorProto.DOUBLE
    assert len(names) == len(simbuild.ONNX_TO_ACL)
