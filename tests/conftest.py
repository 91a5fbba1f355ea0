"""Fixtures shared by the test folders: a fresh simulator, and every sim OM the tests build, in one table."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Union

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge_plugin.atc import flags, simbuild
from ge_plugin.atc.generate import GenerateShapes, atc_flags
from ge_plugin.device import runtime
from ge_plugin.models import IDENTITY_WIDTH, write_demo_models
from ge_plugin.sim import _state, sanitizer

#: simulator knobs read from the environment; a test that wants one sets it itself
SIM_ENVIRONMENT = (
    "GE_PLUGIN_SIM_FAULTS",
    "GE_PLUGIN_SIM_EXECUTE_LATENCY_MS",
    "GE_PLUGIN_SIM_REPORT_DIR",
    "GE_PLUGIN_SIM_TIMING_ONLY",
    "GE_PLUGIN_SIM_DEVICE_LOCK_DIR",
)


def pytest_configure(config: pytest.Config) -> None:
    """The simulator runs as a sanitizer for the whole session, in this process and the ones it starts
    (``GE_PLUGIN_SIM_CHECK=0`` in the environment opts out)."""
    os.environ.setdefault(sanitizer.ENV, "1")
    sanitizer.reset()


#: tests that make memory bugs on purpose and assert the findings themselves
_PROVOKING = Path(__file__).parent / "sim"


@pytest.fixture(autouse=True)
def sanitizer_clean(request: pytest.FixtureRequest) -> Iterator[None]:
    """ge-plugin's own use of pyACL (engine, backend, device layer) must give the sanitizer nothing to
    report: a test during which it caught an error or a leak fails, with the findings (raw pointers the
    tests themselves pass are only warnings)."""
    sanitizer.clear()
    yield
    if _PROVOKING in Path(str(request.node.path)).parents:
        return
    caught = [f for f in sanitizer.findings() if f.severity != sanitizer.WARNING]
    if caught:
        pytest.fail(
            "the simulator's sanitizer caught memory bugs during this test:\n" + "\n".join(map(str, caught)),
            pytrace=False,
        )


@pytest.fixture
def fresh_sim(monkeypatch):
    """A fresh simulated process around the test: pyACL not initialised, no counters, no faults, and the
    device layer holding no users (acl.init runs once per process, so tests cannot simply re-init)."""
    monkeypatch.setenv("GE_PLUGIN_DEVICE", "sim")
    for name in SIM_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    _state.reset_for_tests()
    runtime.reset_for_tests()
    yield
    _state.reset_for_tests()
    runtime.reset_for_tests()


# -- small graphs ------------------------------------------------------------------------------------------

W = np.arange(12, dtype=np.float32).reshape(4, 3) / 7.0
B = np.array([0.5, -1.25, 2.0], dtype=np.float32)


def matmul_add() -> onnx.ModelProto:
    """x [batch, seq, 4] float -> y = x @ W + b, [batch, seq, 3]."""
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["xw"], name="mm"),
            helper.make_node("Add", ["xw", "b"], ["y"], name="add"),
        ],
        "matmul_add",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 3])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "b")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def ids_mask() -> onnx.ModelProto:
    """ids, mask int64 [batch, seq] -> summed = float(ids * mask) [batch, seq], count = sum(mask, 1) [batch]."""
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["ids", "mask"], ["prod"]),
            helper.make_node("Cast", ["prod"], ["summed"], to=TensorProto.FLOAT),
            helper.make_node("ReduceSum", ["mask", "axis"], ["count"], keepdims=0),
        ],
        "ids_mask",
        [
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [
            helper.make_tensor_value_info("summed", TensorProto.FLOAT, ["batch", "seq"]),
            helper.make_tensor_value_info("count", TensorProto.INT64, ["batch"]),
        ],
        [numpy_helper.from_array(np.array([1], dtype=np.int64), "axis")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def image() -> onnx.ModelProto:
    """x [1, 3, h, w] float -> y = x * 3 + 1."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "three"], ["x3"]), helper.make_node("Add", ["x3", "one"], ["y"])],
        "image",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, "h", "w"])],
        [
            numpy_helper.from_array(np.array(3, dtype=np.float32), "three"),
            numpy_helper.from_array(np.array(1, dtype=np.float32), "one"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def two_outputs() -> onnx.ModelProto:
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


def plus_one() -> onnx.ModelProto:
    """identity.onnx's tensors (``INPUT0`` -> ``OUTPUT0``, float32 [batch, IDENTITY_WIDTH]), computing
    INPUT0 + 1: a second version of the identity model that answers differently."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "one"], ["OUTPUT0"])],
        "plus_one",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["batch", IDENTITY_WIDTH])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["batch", IDENTITY_WIDTH])],
        [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray], outputs: Sequence[str] | None = None):
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(list(outputs) if outputs else None, feeds)


# -- sim OMs -----------------------------------------------------------------------------------------------

ORIGIN = "--precision_mode=must_keep_origin_dtype"


def build_sim_om(directory: Path, name: str, model: Path | onnx.ModelProto, *atc: str) -> Path:
    """``directory/name.om`` built by the sim ATC from ``model`` (a graph is first written as ``name.onnx``)
    with ``--framework=5 --soc_version=Ascend910B3`` and the flags ``atc``."""
    if isinstance(model, onnx.ModelProto):
        source = directory / f"{name}.onnx"
        onnx.save(model, source)
    else:
        source = model
    argv = [f"--model={source}", "--framework=5", f"--output={directory / name}", "--soc_version=Ascend910B3"]
    return simbuild.build(flags.parse_args([*argv, *atc])).path


#: a demo model's file name (``ge_plugin.models``), or a graph builder above
Source = Union[str, Callable[[], onnx.ModelProto]]

_LLAMA_GRID = ";".join(f"{b},{s}" for b in (1, 4, 8) for s in (16, 32, 64, 128))
_BERT_GRID = ";".join(f"{b},{s},{b},{s}" for b in (1, 2, 4, 8) for s in (16, 32, 64))
_IDENTITY_BATCH = ("--input_shape=INPUT0:-1,16", "--dynamic_batch_size=1,2,4,8")

#: every sim OM the test folders share: name -> (source, ATC flags besides --model/--output/--soc_version)
SIM_OMS: dict[str, tuple[Source, tuple[str, ...]]] = {
    # the small graphs: static, batch gears, dims gears (a (batch, seq) grid), hw, the precisions
    "static": (matmul_add, ("--input_shape=x:2,3,4", ORIGIN)),
    "batch": (matmul_add, ("--input_shape=x:-1,3,4", "--dynamic_batch_size=1,2,4", ORIGIN)),
    "dims": (
        ids_mask,
        (
            "--input_shape=ids:-1,-1;mask:-1,-1",
            "--input_format=ND",
            "--dynamic_dims=1,4,1,4;1,8,1,8;2,4,2,4;2,8,2,8",
            ORIGIN,
        ),
    ),
    "hw": (image, ("--input_shape=x:1,3,-1,-1", "--dynamic_image_size=2,2;4,6", ORIGIN)),
    "fp16": (matmul_add, ("--input_shape=x:2,3,4",)),
    "bf16": (matmul_add, ("--input_shape=x:2,3,4", "--precision_mode=allow_mix_precision_bf16")),
    "two_outputs": (two_outputs, ("--input_shape=x:-1,4", "--dynamic_batch_size=1,4", ORIGIN)),
    # the demo models, as the engine and the backend serve them
    "llama": (
        "tiny_llama.onnx",
        ("--input_shape=input_ids:-1,-1", "--input_format=ND", f"--dynamic_dims={_LLAMA_GRID}", ORIGIN),
    ),
    "bert": (
        "tiny_bert.onnx",
        (
            "--input_shape=input_ids:-1,-1;attention_mask:-1,-1",
            "--input_format=ND",
            f"--dynamic_dims={_BERT_GRID}",
            ORIGIN,
        ),
    ),
    "identity": ("identity.onnx", (*_IDENTITY_BATCH, ORIGIN)),
    "identity_fp16": (
        "identity.onnx",
        (*_IDENTITY_BATCH, "--precision_mode=force_fp16", "--input_fp16_nodes=INPUT0", "--output_type=FP16"),
    ),
    "identity_static": ("identity.onnx", ("--input_shape=INPUT0:4,16", ORIGIN)),
    # the small CNN: static, image-size gears with a fixed batch of 2, and the same sizes as dims gears
    "cnn_static": ("tiny_cnn.onnx", ("--input_shape=images:1,3,8,8", ORIGIN)),
    "cnn_hw": ("tiny_cnn.onnx", ("--input_shape=images:2,3,-1,-1", "--dynamic_image_size=8,8;16,16", ORIGIN)),
    "cnn_dims": (
        "tiny_cnn.onnx",
        ("--input_shape=images:1,3,-1,-1", "--input_format=ND", "--dynamic_dims=8,8;16,16", ORIGIN),
    ),
    # bfloat16 in and out (the ONNX graph's own types)
    "bf16_affine": ("bf16_affine.onnx", ("--input_shape=x:-1,8", "--dynamic_batch_size=1,4", ORIGIN)),
}


#: the generating LLaMA's test OMs: a context of 64, 32 slots, prompts prefilled in chunks of 4 and 16
GEN_CONTEXT = 64
GEN_BATCH_GEARS = (1, 2, 4, 8, 16, 32)
GEN_SEQ_GEARS = (1, 4, 16)
for _name, _source, _form, _past in (
    ("llama_kv", "tiny_llama_kv.onnx", "stacked", "past_key_values"),
    ("llama_kv_layers", "tiny_llama_kv_layers.onnx", "per_layer", "past_key_values.{layer}.{kind}"),
):
    _shapes = GenerateShapes(_form, 2, 4, 16, GEN_CONTEXT, GEN_BATCH_GEARS, GEN_SEQ_GEARS, past=_past)
    SIM_OMS[_name] = (_source, (*atc_flags(_shapes), ORIGIN))


class SimOms(Mapping[str, Path]):
    """The OMs of SIM_OMS by name, each built on first use and kept for the session."""

    def __init__(self, directory: Path, demo_models: Path):
        self._directory = directory
        self._demo_models = demo_models
        self._built: dict[str, Path] = {}

    def __getitem__(self, name: str) -> Path:
        if name not in self._built:
            source, atc = SIM_OMS[name]
            model = self._demo_models / source if isinstance(source, str) else source()
            self._built[name] = build_sim_om(self._directory, name, model, *atc)
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(SIM_OMS)

    def __len__(self) -> int:
        return len(SIM_OMS)


@pytest.fixture(scope="session")
def demo_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo ONNX models (ge_plugin.models), written once."""
    directory = tmp_path_factory.mktemp("demo-models")
    write_demo_models(directory)
    return directory


@pytest.fixture(scope="session")
def oms(tmp_path_factory: pytest.TempPathFactory, demo_models_dir: Path) -> SimOms:
    """name -> sim OM path, for every OM of SIM_OMS; built on first use, once per session."""
    return SimOms(tmp_path_factory.mktemp("oms"), demo_models_dir)


@pytest.fixture(scope="session")
def graphs() -> SimpleNamespace:
    """The graph builders and constants above, for tests (a conftest is not importable under importlib mode)."""
    return SimpleNamespace(
        W=W,
        B=B,
        matmul_add=matmul_add,
        ids_mask=ids_mask,
        image=image,
        two_outputs=two_outputs,
        plus_one=plus_one,
        reference=reference,
        build_om=build_sim_om,
        ORIGIN=ORIGIN,
    )
