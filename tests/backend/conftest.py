"""The backend adapter with a stand-in for what Triton's C++ stub injects into triton_python_backend_utils.

The real ``triton_python_backend_utils.py`` from the nvidia-pytriton wheel is loaded as is; only the
classes the stub binds in C++ (Tensor, InferenceRequest/Response, TritonError, MetricFamily, Logger,
TritonModelException) are replaced by small Python fakes that record what the model did with them.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import shutil
import sys
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
    def __init__(self, name: str, array: np.ndarray):
        self._name, self._array = name, array

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._array.copy()

    def __dlpack__(self, stream=None):
        view = self._array.view()
        view.flags.writeable = False  # like the stub's view of Triton's shared memory
        return view.__dlpack__()

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


class ResponseSender:
    """Records what was sent; like the stub's, it copies the tensors before send() returns."""

    def __init__(self):
        self.sent: list = []

    def send(self, response=None, flags=0):
        if response is not None:
            for tensor in response.output_tensors():
                tensor._array = tensor._array.copy()
        self.sent.append((response, flags))


class InferenceRequest:
    def __init__(self, tensors: dict, requested: set | None = None):
        self._inputs = [Tensor(k, v) for k, v in tensors.items()]
        self._requested = requested
        self.sender = ResponseSender()

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
