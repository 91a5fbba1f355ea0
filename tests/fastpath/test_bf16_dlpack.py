"""bf16 through DLPack: a bf16 tensor's words as a uint16 view, and uint16 words as a bf16 capsule, the way
Triton 2.51's Python backend hands bf16 over (checked on the real stub: its input's ``__dlpack__`` gives a
``dltensor`` capsule of dtype (4, 16, 1); ``Tensor.from_dlpack`` renames the capsule ``used_dlpack`` and
calls the deleter once the response is sent)."""

from __future__ import annotations

import ctypes
import gc
import weakref
from types import ModuleType

import numpy as np
import pytest

from ge_plugin import _fastpath_py as twin

api = ctypes.pythonapi
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_GetName.restype = ctypes.c_char_p
api.PyCapsule_GetName.argtypes = [ctypes.py_object]
USED_DLPACK = b"used_dlpack"  # Triton's name for a capsule it took (kept alive: the capsule points at it)


class Producer:
    """A DLPack producer of any dtype and strides (ctypes, like a C++ one), recording its deleter's calls."""

    def __init__(self, data: np.ndarray, code: int, bits: int, strides: tuple[int, ...] | None = None):
        self.data, self.deleted = data, 0
        self._shape = (ctypes.c_int64 * max(data.ndim, 1))(*data.shape)
        self._strides = (ctypes.c_int64 * len(strides))(*strides) if strides else None
        self._deleter = twin._DELETER(self._delete)
        managed = self.managed = twin._DLManagedTensor()
        t = managed.dl_tensor
        t.data = data.ctypes.data
        t.device = twin._DLDevice(1, 0)
        t.ndim = data.ndim
        t.dtype = twin._DLDataType(code, bits, 1)
        t.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        t.strides = (
            ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64)) if self._strides is not None else None
        )
        managed.deleter = self._deleter

    def _delete(self, _managed) -> None:
        self.deleted += 1

    def __dlpack__(self, stream=None):
        api.PyCapsule_New.restype = ctypes.py_object
        api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return api.PyCapsule_New(ctypes.addressof(self.managed), twin._DLPACK, None)

    def __dlpack_device__(self):
        return (1, 0)


def triton_takes(capsule) -> twin._DLManagedTensor:
    """What pb_utils.Tensor.from_dlpack does with a capsule: take the tensor, rename the capsule."""
    managed = twin._DLManagedTensor.from_address(api.PyCapsule_GetPointer(capsule, twin._DLPACK))
    api.PyCapsule_SetName(capsule, USED_DLPACK)
    return managed


def bits(values) -> np.ndarray:
    return np.asarray(values, dtype=np.uint16)


def test_bf16_view_is_the_tensors_words_read_only_and_keeps_the_tensor_until_it_goes(fp: ModuleType) -> None:
    words = bits([[0x3F80, 0xC020, 0x4049], [0x3A83, 0x7F80, 0xFFC0]])
    producer = Producer(words, 4, 16)
    view = fp.bf16_view(producer)
    assert view.dtype == np.uint16 and view.shape == (2, 3)
    assert np.shares_memory(view, words) and np.array_equal(view, words)
    assert not view.flags.writeable
    assert producer.deleted == 0
    part = view[1:]  # a view of the view keeps it too
    del view
    gc.collect()
    assert producer.deleted == 0
    del part
    gc.collect()
    assert producer.deleted == 1


def test_bf16_view_takes_a_capsule_and_renames_it_used(fp: ModuleType) -> None:
    capsule = Producer(bits([1, 2]), 4, 16).__dlpack__()
    assert fp.bf16_view(capsule).tolist() == [1, 2]
    assert api.PyCapsule_GetName(capsule) == b"used_dltensor"
    with pytest.raises(ValueError, match=r"bf16_view: the capsule is not an unconsumed DLPack tensor"):
        fp.bf16_view(capsule)


def test_bf16_view_of_a_scalar_and_of_strides_that_are_compact(fp: ModuleType) -> None:
    assert fp.bf16_view(Producer(bits(0x3F80), 4, 16)).shape == ()
    words = bits([[1, 2, 3], [4, 5, 6]])
    assert fp.bf16_view(Producer(words, 4, 16, strides=(3, 1))).tolist() == words.tolist()


@pytest.mark.parametrize(
    ("producer", "message"),
    [
        (
            lambda: np.zeros(3, np.float32),
            r"the tensor's DLPack dtype is \(code 2, 32 bits, 1 lanes\), not bf16",
        ),
        (
            lambda: np.zeros(3, np.uint16),
            r"the tensor.s DLPack dtype is \(code 1, 16 bits, 1 lanes\), not bf16 \(code 4, 16 bits, 1 lane\)",
        ),
        (
            lambda: Producer(bits([[1, 2], [3, 4]]), 4, 16, strides=(1, 2)),
            r"the tensor \[2, 2\] is not C-contiguous",
        ),
        (lambda: [1, 2], r"expected a DLPack tensor \(an object with __dlpack__, or its capsule\), got list"),
    ],
)
def test_bf16_view_refuses_what_is_not_a_contiguous_cpu_bf16_tensor(
    fp: ModuleType, producer, message
) -> None:
    with pytest.raises(ValueError, match=f"bf16_view: {message}"):
        fp.bf16_view(producer())


def test_bf16_view_refuses_a_tensor_on_a_device(fp: ModuleType) -> None:
    producer = Producer(bits([1]), 4, 16)
    producer.managed.dl_tensor.device = twin._DLDevice(2, 0)  # kDLCUDA
    with pytest.raises(ValueError, match="on DLPack device type 2; ge-plugin reads CPU tensors"):
        fp.bf16_view(producer)
    assert producer.deleted == 0  # refused: still the producer's


def test_bf16_capsule_is_a_bf16_dlpack_tensor_over_the_same_memory(fp: ModuleType) -> None:
    words = bits([[0x3F80, 0x4000], [0xC000, 0x0001]])
    capsule = fp.bf16_capsule(words)
    assert api.PyCapsule_GetName(capsule) == b"dltensor"
    managed = triton_takes(capsule)
    t = managed.dl_tensor
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (4, 16, 1)
    assert (t.device.device_type, t.device.device_id) == (1, 0)
    assert [t.shape[k] for k in range(t.ndim)] == [2, 2]
    assert not t.strides and t.byte_offset == 0 and t.data == words.ctypes.data
    managed.deleter(ctypes.pointer(managed))


def test_bf16_capsule_keeps_the_words_alive_until_triton_calls_the_deleter(fp: ModuleType) -> None:
    """As a numpy view of a lane's staging lives until the stub has copied the response, so does the capsule's."""
    words = np.arange(8, dtype=np.uint16)
    gone = weakref.ref(words)
    capsule = fp.bf16_capsule(words)
    del words
    managed = triton_takes(capsule)
    del capsule
    gc.collect()
    assert gone() is not None  # Triton took the tensor: the capsule going does not release it
    managed.deleter(ctypes.pointer(managed))
    gc.collect()
    assert gone() is None


def test_bf16_capsule_that_nobody_takes_releases_the_words_when_it_goes(fp: ModuleType) -> None:
    words = np.arange(4, dtype=np.uint16)
    gone = weakref.ref(words)
    capsule = fp.bf16_capsule(words)
    del words
    gc.collect()
    assert gone() is not None
    del capsule
    gc.collect()
    assert gone() is None


def test_bf16_capsule_and_view_round_trip_between_the_two_implementations(both) -> None:
    compiled, python = both
    words = np.random.default_rng(1).integers(0, 2**16, (3, 5), dtype=np.uint16)
    for producer, consumer in ((compiled, python), (python, compiled)):
        view = consumer.bf16_view(producer.bf16_capsule(words))
        assert np.shares_memory(view, words) and np.array_equal(view, words)


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (np.zeros(3, np.float32), r"expected uint16 \(bf16 bit patterns\), got float32"),
        (np.zeros((4, 4), np.uint16)[:, ::2], r"the array \[4, 2\] is not C-contiguous"),
        (memoryview(b"ab"), "expected a numpy uint16 array, got memoryview"),
    ],
)
def test_bf16_capsule_refuses_what_is_not_a_contiguous_uint16_array(fp: ModuleType, words, message) -> None:
    with pytest.raises(ValueError, match=f"bf16_capsule: {message}"):
        fp.bf16_capsule(words)


def test_bf16_round_trips_leak_nothing(fp: ModuleType) -> None:
    words = np.arange(64, dtype=np.uint16)
    import sys

    before = sys.getrefcount(words)
    for _ in range(2000):
        view = fp.bf16_view(fp.bf16_capsule(words))
        del view
    gc.collect()
    assert sys.getrefcount(words) == before
