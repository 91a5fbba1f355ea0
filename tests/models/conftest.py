"""Models are built once per session: the LLaMA alone is 16 MB of weights."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from ge_plugin import models


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _weights(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Initializers by name, in float64, for the numpy reference implementations."""
    return {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}


def _untyped_tensors(model: onnx.ModelProto) -> list[str]:
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True).graph
    typed = {v.name for v in (*inferred.value_info, *inferred.output) if v.type.tensor_type.elem_type}
    return [name for node in model.graph.node for name in node.output if name and name not in typed]


@pytest.fixture(scope="session")
def untyped_tensors() -> Callable[[onnx.ModelProto], list[str]]:
    """Checks a model as ``onnx.checker`` does in full (raising on any violation), then names the node
    outputs strict shape inference could not give a type: a model the simulator's ATC builds has none."""
    return _untyped_tensors


@pytest.fixture(scope="session")
def llama() -> onnx.ModelProto:
    return models.tiny_llama()


@pytest.fixture(scope="session")
def bert() -> onnx.ModelProto:
    return models.tiny_bert()


@pytest.fixture(scope="session")
def llama_weights(llama) -> dict[str, np.ndarray]:
    return _weights(llama)


@pytest.fixture(scope="session")
def bert_weights(bert) -> dict[str, np.ndarray]:
    return _weights(bert)


@pytest.fixture(scope="session")
def llama_run(llama):
    session = _session(llama)
    return lambda ids: session.run(["logits"], {"input_ids": np.asarray(ids, dtype=np.int64)})[0]


@pytest.fixture(scope="session")
def bert_run(bert):
    session = _session(bert)

    def run(ids, mask=None):
        ids = np.asarray(ids, dtype=np.int64)
        mask = np.ones_like(ids) if mask is None else np.asarray(mask, dtype=np.int64)
        return session.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})[0]

    return run


@pytest.fixture(scope="session")
def identity_run():
    session = _session(models.identity())
    return lambda x: session.run(["OUTPUT0"], {"INPUT0": x})[0]
