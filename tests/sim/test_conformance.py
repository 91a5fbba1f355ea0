"""The simulator refuses what pyACL refuses: argument parsing as in pyACL's open-source C extension.

Each case names the wrapper in hicann/runtime ``python/pyACL`` whose ``PyArg_ParseTuple`` format or hand-written
check it mirrors. Where the simulator is deliberately stricter than pyACL, docs/simulator.md lists it; a test
here pins the strictness too, so it cannot loosen silently.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from ge_plugin import acl_constants as C

# -- acl.mdl.set_input_dynamic_dims (mdl_wrap.cpp WrapAclMdlSetInputDynamicDims: "IkkO" + a hand-parsed dict)


@pytest.fixture
def dims_model(load, oms):
    model = load(oms["dims"])
    return model, model.inputs[0], model.mbatch


def test_set_input_dynamic_dims_accepts_a_list_of_ints(acl, dims_model):
    model, ds, idx = dims_model
    assert (
        acl.mdl.set_input_dynamic_dims(model.id, ds, idx, {"dimCount": 4, "name": "", "dims": [1, 4, 1, 4]})
        == 0
    )


def test_set_input_dynamic_dims_refuses_a_tuple_of_dims(acl, dims_model):
    model, ds, idx = dims_model
    with pytest.raises(TypeError, match="list"):
        acl.mdl.set_input_dynamic_dims(model.id, ds, idx, {"dimCount": 4, "name": "", "dims": (1, 4, 1, 4)})


@pytest.mark.parametrize("position", [0, 3])
def test_set_input_dynamic_dims_refuses_numpy_integers_anywhere_in_the_dims(acl, dims_model, position):
    model, ds, idx = dims_model
    dims: list = [1, 4, 1, 4]
    dims[position] = np.int64(dims[position])
    with pytest.raises(TypeError, match=rf"dims\['dims'\]\[{position}\]"):
        acl.mdl.set_input_dynamic_dims(model.id, ds, idx, {"dimCount": 4, "name": "", "dims": dims})


def test_set_input_dynamic_dims_refuses_a_numpy_dim_count(acl, dims_model):
    model, ds, idx = dims_model
    with pytest.raises(TypeError, match="dimCount"):
        acl.mdl.set_input_dynamic_dims(model.id, ds, idx, {"dimCount": np.int64(4), "dims": [1, 4, 1, 4]})


def test_set_input_dynamic_dims_with_fewer_dims_than_its_count_is_a_type_error(acl, dims_model):
    model, ds, idx = dims_model
    with pytest.raises(TypeError, match="fewer than its count"):
        acl.mdl.set_input_dynamic_dims(model.id, ds, idx, {"dimCount": 5, "dims": [1, 4, 1, 4]})


def test_set_input_dynamic_dims_name_that_is_not_a_str_is_a_runtime_error(acl, dims_model):
    model, ds, idx = dims_model
    with pytest.raises(RuntimeError, match="PyUnicode_AsUTF8String"):
        acl.mdl.set_input_dynamic_dims(model.id, ds, idx, {"dimCount": 4, "name": b"", "dims": [1, 4, 1, 4]})


def test_set_input_dynamic_dims_refuses_the_arguments_before_anything_else(acl):
    """Parsing comes first in pyACL: no acl.init is needed to get the TypeError."""
    with pytest.raises(TypeError):
        acl.mdl.set_input_dynamic_dims(1, 2, 3, {"dimCount": 1, "dims": (1,)})


# -- acl.create_tensor_desc (py_init_acl.cpp WrapAclCreateTensorDesc: "iOi", PyList_Check, GetValuesFromPyList)


def test_create_tensor_desc_refuses_a_tuple_of_dims(acl):
    with pytest.raises(TypeError, match="list"):
        acl.create_tensor_desc(C.ACL_FLOAT, (2, 3), C.ACL_FORMAT_ND)


def test_create_tensor_desc_refuses_numpy_integer_dims(acl):
    with pytest.raises(TypeError):
        acl.create_tensor_desc(C.ACL_FLOAT, [np.int64(2), 3], C.ACL_FORMAT_ND)


def test_create_tensor_desc_takes_numpy_integers_for_its_dtype_and_format(acl):
    """ "i" goes through __index__, so numpy integers pass there (and only there)."""
    desc = acl.create_tensor_desc(np.int32(C.ACL_FLOAT), [2, 3], np.int64(C.ACL_FORMAT_ND))
    assert acl.get_tensor_desc_size(desc) == 24


# -- acl.util (util/bytes_convert.cpp, util/numpy_convert.cpp)


def test_numpy_to_ptr_of_a_list_is_a_value_error(acl):
    with pytest.warns(Warning), pytest.raises(ValueError, match="ndarray"):
        acl.util.numpy_to_ptr([1])


def test_numpy_contiguous_to_ptr_of_a_list_is_a_value_error(acl):
    with pytest.warns(Warning), pytest.raises(ValueError, match="ndarray"):
        acl.util.numpy_contiguous_to_ptr([1])


def test_deprecated_numpy_calls_warn_with_the_base_warning_class(acl):
    """pyACL warns with PyExc_Warning, which Python shows by default (a DeprecationWarning would be hidden)."""
    array = np.zeros(4, np.float32)
    for call in (
        lambda: acl.util.numpy_to_ptr(array),
        lambda: acl.util.numpy_contiguous_to_ptr(array),
        lambda: acl.util.ptr_to_numpy(array.ctypes.data, (4,), 11),
    ):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        assert [w.category for w in caught][:1] == [Warning]


def test_ptr_to_bytes_of_nothing_is_empty_bytes(acl):
    assert acl.util.ptr_to_bytes(0, 0) == b""
    assert acl.util.ptr_to_bytes(12345, 0) == b""


def test_ptr_to_bytes_of_a_null_pointer_with_a_size_is_refused(acl):
    """pyACL would hand back uninitialised bytes here; the simulator is stricter."""
    with pytest.raises(ValueError, match="null"):
        acl.util.ptr_to_bytes(0, 4)


def test_ptr_to_numpy_wants_a_tuple_shape_of_non_negative_ints(acl):
    array = np.zeros(4, np.float32)
    with pytest.warns(Warning), pytest.raises(ValueError):
        acl.util.ptr_to_numpy(array.ctypes.data, [4], 11)
    with pytest.warns(Warning), pytest.raises(TypeError):
        acl.util.ptr_to_numpy(array.ctypes.data, (np.int64(4),), 11)
    with pytest.warns(Warning), pytest.raises(ValueError, match="negative"):
        acl.util.ptr_to_numpy(array.ctypes.data, (-1,), 11)


def test_bytes_to_ptr_of_anything_but_bytes_is_a_value_error(acl):
    with pytest.raises(ValueError):
        acl.util.bytes_to_ptr("abc")


# -- float conversions (py_init_acl.cpp: "f" and "H")


@pytest.mark.parametrize("value", [np.float32(1), np.float64(1.0), np.int64(1), 1, 1.0])
def test_float_to_float16_takes_any_real_number(acl, value):
    assert acl.float_to_float16(value) == 0x3C00


def test_float_to_float16_rounds_through_a_c_float_first(acl):
    """2049.0000000001 is 2049.0 as a float32, which ties to the even float16 2048 (0x6800)."""
    assert acl.float_to_float16(2049.0000000001) == 0x6800


def test_float_to_float16_refuses_strings(acl):
    with pytest.raises(TypeError):
        acl.float_to_float16("1.0")


def test_float16_to_float_masks_to_16_bits_and_takes_numpy_integers(acl):
    assert acl.float16_to_float(np.uint16(0x3C00)) == 1.0
    assert acl.float16_to_float(0x3C00 + (1 << 40)) == 1.0  # "H" does not check overflow


# -- handles and sizes ("k"): exact ints, as PyLong_Check


@pytest.mark.parametrize("bad", [np.uint64(64), 64.0, "64", None])
def test_pointer_and_size_arguments_must_be_python_ints(acl, ready, bad):
    with pytest.raises(TypeError):
        acl.rt.malloc(bad, 0)
    with pytest.raises(TypeError):
        acl.rt.synchronize_stream(bad if bad is not None else None)


def test_bool_is_refused_where_pyacl_would_take_it_as_an_int(acl):
    """Deliberately stricter than CPython's "k"/"i" (documented)."""
    with pytest.raises(TypeError):
        acl.create_data_buffer(True, 4)
    with pytest.raises(TypeError):
        acl.data_type_size(False)


def test_calls_without_arguments_refuse_extra_ones(acl):
    """pyACL's METH_VARARGS wrappers that never parse ignore extra arguments; the simulator refuses them
    (documented as stricter)."""
    with pytest.raises(TypeError):
        acl.mdl.create_dataset(1)
    with pytest.raises(TypeError):
        acl.get_version(0)
