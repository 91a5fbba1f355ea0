"""Engine tests run on the simulator, with sim OMs built from the demo models by the sim ATC."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ge_plugin.atc.flags import parse_args
from ge_plugin.atc.simbuild import build
from ge_plugin.models import write_demo_models

SOC = "--soc_version=Ascend910B3"
ORIGIN = "--precision_mode=must_keep_origin_dtype"


@pytest.fixture(autouse=True)
def _fresh_sim_for_every_test(fresh_sim):
    """Every test here runs on a fresh simulator (tests/conftest.py)."""


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("models")
    write_demo_models(directory)
    onnx.save(two_outputs_model(), directory / "two_outputs.onnx")
    return directory


def build_om(output: Path, *flags: str) -> Path:
    build(parse_args([*flags, f"--output={output}"]))
    return Path(f"{output}.om")


@pytest.fixture(scope="session")
def oms(models_dir, tmp_path_factory) -> dict[str, Path]:
    """name -> sim OM path for every model the engine tests serve."""
    out = tmp_path_factory.mktemp("oms")
    m = models_dir
    grid = ";".join(f"{b},{s}" for b in (1, 4, 8) for s in (16, 32, 64, 128))
    bert_grid = ";".join(f"{b},{s},{b},{s}" for b in (1, 2, 4, 8) for s in (16, 32, 64))
    return {
        "llama": build_om(
            out / "llama",
            f"--model={m / 'tiny_llama.onnx'}",
            "--framework=5",
            "--input_shape=input_ids:-1,-1",
            "--input_format=ND",
            f"--dynamic_dims={grid}",
            SOC,
            ORIGIN,
        ),
        "bert": build_om(
            out / "bert",
            f"--model={m / 'tiny_bert.onnx'}",
            "--framework=5",
            "--input_shape=input_ids:-1,-1;attention_mask:-1,-1",
            "--input_format=ND",
            f"--dynamic_dims={bert_grid}",
            SOC,
            ORIGIN,
        ),
        "identity": build_om(
            out / "identity",
            f"--model={m / 'identity.onnx'}",
            "--framework=5",
            "--input_shape=INPUT0:-1,16",
            "--dynamic_batch_size=1,2,4,8",
            SOC,
            ORIGIN,
        ),
        "identity_fp16": build_om(
            out / "identity_fp16",
            f"--model={m / 'identity.onnx'}",
            "--framework=5",
            "--input_shape=INPUT0:-1,16",
            "--dynamic_batch_size=1,2,4,8",
            SOC,
            "--precision_mode=force_fp16",
            "--input_fp16_nodes=INPUT0",
            "--output_type=FP16",
        ),
        "identity_static": build_om(
            out / "identity_static",
            f"--model={m / 'identity.onnx'}",
            "--framework=5",
            "--input_shape=INPUT0:4,16",
            SOC,
            ORIGIN,
        ),
        "two_outputs": build_om(
            out / "two_outputs",
            f"--model={m / 'two_outputs.onnx'}",
            "--framework=5",
            "--input_shape=x:-1,4",
            "--dynamic_batch_size=1,4",
            SOC,
            ORIGIN,
        ),
    }


def two_outputs_model() -> onnx.ModelProto:
    """x [batch, 4] fp32 -> doubled = 2x, summed = sum(x, axis 1) [batch, 1]."""
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "two"], ["doubled"]),
            helper.make_node("ReduceSum", ["x", "axes"], ["summed"], keepdims=1),
        ],
        "two_outputs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [
            helper.make_tensor_value_info("doubled", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("summed", TensorProto.FLOAT, ["batch", 1]),
        ],
        [two, axes],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def config(name: str, om: os.PathLike, inputs, outputs, *, max_batch_size: int = 8, **params: str) -> dict:
    """A model config in the JSON form Triton hands to initialize()."""
    parameters = {"om_model_path": {"string_value": str(om)}}
    parameters.update({k: {"string_value": v} for k, v in params.items()})
    return {
        "name": name,
        "backend": "ge",
        "max_batch_size": max_batch_size,
        "input": [{"name": n, "data_type": t, "dims": list(d)} for n, t, d in inputs],
        "output": [{"name": n, "data_type": t, "dims": list(d)} for n, t, d in outputs],
        "parameters": parameters,
    }


def llama_config(om, **params) -> dict:
    params.setdefault("output_dim_ties", "logits:0=input_ids:0")
    return config(
        "llama_model",
        om,
        [("input_ids", "TYPE_INT64", [-1])],
        [("logits", "TYPE_FP32", [-1, 32000])],
        **params,
    )


def bert_config(om, **params) -> dict:
    params.setdefault("output_dim_ties", "last_hidden_state:0=input_ids:0")
    return config(
        "bert_model",
        om,
        [("input_ids", "TYPE_INT64", [-1]), ("attention_mask", "TYPE_INT64", [-1])],
        [("last_hidden_state", "TYPE_FP32", [-1, 64])],
        **params,
    )


def identity_config(om, **kwargs) -> dict:
    return config("identity", om, [("INPUT0", "TYPE_FP32", [16])], [("OUTPUT0", "TYPE_FP32", [16])], **kwargs)


def tokens(rng: np.random.Generator, batch: int, seq: int) -> np.ndarray:
    return rng.integers(0, 32000, (batch, seq), dtype=np.int64)


class Configs:
    """The config builders above, handed to tests as a fixture (conftest is not importable by name)."""

    config = staticmethod(config)
    llama = staticmethod(llama_config)
    bert = staticmethod(bert_config)
    identity = staticmethod(identity_config)
    tokens = staticmethod(tokens)


@pytest.fixture(scope="session")
def cfg() -> type[Configs]:
    return Configs
