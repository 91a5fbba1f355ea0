"""acl.util: host pointers and buffers, and the simulator's refusal to dereference device pointers."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

#: these tests use the deprecated acl.util.ptr_to_numpy on purpose (pyACL warns on every call)
pytestmark = pytest.mark.filterwarnings("ignore:acl.util.ptr_to_numpy will be deprecated")


def test_bytes_to_ptr_points_at_the_bytes_without_copying(acl):
    data = b"\x01\x02\x03\x04"
    ptr = acl.util.bytes_to_ptr(data)
    assert ctypes.string_at(ptr, 4) == data
    assert acl.util.ptr_to_bytes(ptr, 4) == data
    with pytest.raises(ValueError):
        acl.util.bytes_to_ptr(bytearray(data))


def test_ptr_to_numpy_wraps_host_memory(acl):
    array = np.arange(6, dtype=np.int32)
    view = acl.util.ptr_to_numpy(array.ctypes.data, (2, 3), 5)
    assert view.shape == (2, 3) and view.dtype == np.int32
    view[0, 0] = 42
    assert array[0] == 42
    half = acl.util.ptr_to_numpy(np.ones(2, np.float16).ctypes.data, (2,), 23)
    assert half.dtype == np.float16
    with pytest.warns(Warning), pytest.raises(ValueError):
        acl.util.ptr_to_numpy(array.ctypes.data, [2, 3], 5)  # pyACL: PyTuple_Size fails, "shape is empty"
    with pytest.raises(ValueError):
        acl.util.ptr_to_numpy(array.ctypes.data, (2,), 99)


def test_numpy_to_ptr_is_deprecated_but_works(acl):
    array = np.arange(4, dtype=np.float32)
    with pytest.warns(Warning, match="will be deprecated"):
        assert acl.util.numpy_to_ptr(array) == array.ctypes.data
    with pytest.warns(Warning, match="will be deprecated"):
        ptr, contiguous = acl.util.numpy_contiguous_to_ptr(array[::2])
    assert ptr == contiguous.ctypes.data and contiguous.tolist() == [0.0, 2.0]
    with pytest.warns(Warning), pytest.raises(ValueError, match="needs an ndarray"):
        acl.util.numpy_to_ptr([1, 2])


def test_util_refuses_device_pointers(acl, ready):
    dev, _ = acl.rt.malloc(16, 0)
    with pytest.raises(ValueError, match=r"acl\.rt\.memcpy"):
        acl.util.ptr_to_bytes(dev, 16)
    with pytest.raises(ValueError):
        acl.util.ptr_to_numpy(dev, (4,), 11)
