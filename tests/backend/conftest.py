"""The backend adapter with a stand-in for what Triton's C++ stub injects into triton_python_backend_utils.

The real ``triton_python_backend_utils.py`` from the nvidia-pytriton wheel is loaded as is; only the
classes the stub binds in C++ (Tensor, InferenceRequest/Response, TritonError, MetricFamily, Logger,
TritonModelException) are replaced by small Python fakes that record what the model did with them.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import logging
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest


class TritonError:
    UNKNOWN, INTERNAL, NOT_FOUND, INVALID_ARG, UNAVAILABLE, UNSUPPORTED, ALREADY_EXISTS, CANCELLED = range(8)

    def __init__(self, message: str, code: int = 1):
        self._message, self._code = message, code

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code


class TritonModelException(Exception):
    pass


class Tensor:
    """A stub tensor. ``bf16=True``: a TYPE_BF16 tensor over ``array``'s uint16 words, which, like the real
    stub's (observed on tritonserver 2.51), refuses ``as_numpy`` and exports DLPack dtype (kDLBfloat, 16)."""

    #: what the stub calls once Triton is done with a tensor it was lent through DLPack, when it was
    dlpack_release: Callable[[], None] | None = None

    def __init__(self, name: str, array: np.ndarray, bf16: bool = False):
        self._name, self._array, self.bf16 = name, array, bf16

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        if self.bf16:
            raise TritonModelException(
                "Tensor dtype is BF16 and cannot be converted to NumPy. Use to_dlpack() and from_dlpack() instead."
            )
        return self._array.copy()

    def words(self) -> np.ndarray:
        """A bf16 output's bits (what a client receives)."""
        return self._array.copy()

    def __dlpack__(self, stream=None):
        view = self._array.view()
        view.flags.writeable = False  # like the stub's view of Triton's shared memory
        if self.bf16:
            from ge_plugin import _fastpath_py

            return _fastpath_py.bf16_capsule(view)  # a producer of kDLBfloat capsules, as the stub is
        return view.__dlpack__()

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    @staticmethod
    def from_dlpack(name: str, capsule) -> Tensor:
        """As the stub: takes the tensor (renaming the capsule ``used_dlpack``), keeps it until it is sent,
        then calls its deleter; a bf16 one (code 4, 16 bits) becomes a TYPE_BF16 tensor."""
        from ge_plugin import _fastpath_py as twin

        managed = twin._DLManagedTensor.from_address(_capsule_pointer(capsule))
        _rename_used(capsule)
        t = managed.dl_tensor
        assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (4, 16, 1), "the stub checks for BF16"
        shape = tuple(t.shape[k] for k in range(t.ndim))
        size = int(np.prod(shape)) if shape else 1
        words = np.ctypeslib.as_array((ctypes.c_uint16 * size).from_address(t.data)).reshape(shape)
        tensor = Tensor(name, words, bf16=True)
        tensor.dlpack_release = lambda: managed.deleter(ctypes.pointer(managed))
        LENT.append(tensor)
        return tensor


#: from_dlpack tensors whose memory is still the producer's (a test sends them: their deleters run)
LENT: list = []


def _capsule_pointer(capsule) -> int:
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get(capsule, b"dltensor")


_USED = b"used_dlpack"


def _rename_used(capsule) -> None:
    rename = ctypes.pythonapi.PyCapsule_SetName
    rename.argtypes = [ctypes.py_object, ctypes.c_char_p]
    rename(capsule, _USED)


def send_lent() -> None:
    """What the stub does once it has sent the responses: copies each from_dlpack tensor into its shared memory
    and calls the producer's deleter."""
    while LENT:
        tensor = LENT.pop()
        tensor._array = tensor._array.copy()
        tensor.dlpack_release()


class ResponseSender:
    """Records what was sent; like the stub's, it copies the tensors before send() returns."""

    def __init__(self):
        self.sent: list = []

    def send(self, response=None, flags=0):
        if response is not None:
            for tensor in response.output_tensors():
                tensor._array = tensor._array.copy()
                if tensor in LENT:  # a from_dlpack tensor: sent, so the producer's memory is released
                    LENT.remove(tensor)
                    tensor.dlpack_release()
        self.sent.append((response, flags))


class InferenceRequest:
    def __init__(
        self,
        tensors: dict,
        requested: set | None = None,
        bf16: frozenset = frozenset(),
        cancelled: bool = False,
        parameters: str = "{}",
    ):
        self._inputs = [Tensor(k, v, bf16=k in bf16) for k, v in tensors.items()]
        self._requested = requested
        self.sender = ResponseSender()
        self.cancelled, self._parameters = cancelled, parameters

    def is_cancelled(self) -> bool:
        return self.cancelled

    def parameters(self) -> str:
        return self._parameters

    def get_response_sender(self):
        return self.sender

    def inputs(self):
        return self._inputs

    def requested_output_names(self):
        return self._requested


class InferenceResponse:
    def __init__(self, output_tensors=(), error=None):
        self._outputs, self._error = list(output_tensors), error

    def output_tensors(self):
        return self._outputs

    def has_error(self) -> bool:
        return self._error is not None

    def error(self):
        return self._error


class MetricFamily:
    COUNTER, GAUGE, HISTOGRAM = range(3)
    calls: ClassVar[list] = []  # every IPC the real stub would make, in order

    def __init__(self, name, description, kind):
        self.name, self.kind = name, kind
        MetricFamily.calls.append(("family", name))

    def Metric(self, labels=None, buckets=None):
        return Metric(self.name, labels or {})


class Metric:
    def __init__(self, family: str, labels: dict):
        self.family, self.labels, self.value = family, labels, 0.0

    def increment(self, value):
        MetricFamily.calls.append(("increment", self.family))
        self.value += value

    def set(self, value):
        MetricFamily.calls.append(("set", self.family))
        self.value = value


class Logger:
    lines: ClassVar[list] = []

    @staticmethod
    def log_info(message):
        Logger.lines.append(message)

    log_warn = log_error = log_verbose = log_info


@pytest.fixture
def pb_utils(monkeypatch):
    from ge_plugin.serve import find_distribution

    path = find_distribution().python_backend / "triton_python_backend_utils.py"
    spec = importlib.util.spec_from_file_location("triton_python_backend_utils", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for cls in (
        TritonError,
        TritonModelException,
        Tensor,
        InferenceRequest,
        InferenceResponse,
        MetricFamily,
        Logger,
    ):
        setattr(module, cls.__name__, cls)
    MetricFamily.calls = []
    Logger.lines = []
    LENT.clear()
    # the adapter sends ge_plugin's log records to Triton's log; undone after the test
    logger = logging.getLogger("ge_plugin")
    monkeypatch.setattr(logger, "handlers", [])
    monkeypatch.setattr(logger, "propagate", True)
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", module)
    monkeypatch.delitem(sys.modules, "ge_plugin.backend.model", raising=False)
    return module


@pytest.fixture(autouse=True)
def _fresh_sim_for_every_test(fresh_sim):
    """Every test here runs on a fresh simulator (tests/conftest.py)."""


@pytest.fixture(scope="session")
def identity_repo(oms, tmp_path_factory) -> Path:
    """<repo>/identity/1/identity.om: the shared ``identity`` sim OM, batch gears 1,2,4,8."""
    repo = tmp_path_factory.mktemp("repo")
    version = repo / "identity" / "1"
    version.mkdir(parents=True)
    shutil.copyfile(oms["identity"], version / "identity.om")
    return repo


def initialize_args(repo: Path, **parameters: str) -> dict:
    config = {
        "name": "identity",
        "backend": "ge",
        "max_batch_size": 8,
        "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [16]}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [16]}],
        "parameters": {
            k: {"string_value": v} for k, v in {"om_model_path": "identity.om", **parameters}.items()
        },
    }
    return {
        "model_config": json.dumps(config),
        "model_instance_kind": "CPU",
        "model_instance_name": "npu0_0",
        "model_instance_device_id": "0",
        "model_repository": str(repo / "identity"),
        "model_version": "1",
        "model_name": "identity",
    }


@pytest.fixture
def args_for():
    return initialize_args


@pytest.fixture
def stub_sends():
    """``stub_sends()``: the stub sends what it was handed (from_dlpack tensors copied, their deleters run)."""
    return send_lent
