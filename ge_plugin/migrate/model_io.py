"""A model file's inputs and outputs, as the GE backend reads them when config.pbtxt leaves them out.

The GE backend compiles the ONNX (or TensorFlow frozen graph) in the model folder and, for an ONNX model,
takes the inputs and outputs the config omits from the graph (CANN's resnet example says so). ``read_io``
does the same for ``ge-plugin migrate``: ONNX through the ``onnx`` package (the ``sim`` extra), a frozen
graph through ``tf_graph`` (no TensorFlow needed). Symbolic or unknown dims become -1; the caller drops the
batch dim, as the GE backend does under ``max_batch_size``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import attrs

from ge_plugin import dtypes
from ge_plugin.errors import MigrateError
from ge_plugin.migrate import tf_graph


@attrs.frozen
class ModelTensor:
    """One input or output of the model file: the spec's dtype name and the graph's full dims."""

    name: str
    dtype: str
    dims: list[int]


def read_io(path: Path) -> tuple[list[ModelTensor], list[ModelTensor]]:
    """(inputs, outputs) of an ``.onnx`` or ``.pb`` model; MigrateError naming the file and what it lacks."""
    if path.suffix == ".pb":
        return _tensorflow(path)
    return _onnx(path)


def _onnx(path: Path) -> tuple[list[ModelTensor], list[ModelTensor]]:
    try:
        import onnx
    except ImportError:
        raise MigrateError(
            f"{path}: reading the model's inputs and outputs needs the onnx package (pip install "
            "'ge-plugin[sim]'), or list input and output in the config"
        ) from None
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # onnx raises DecodeError, OSError and others for a file that is not a model
        raise MigrateError(f"{path}: not an ONNX model the GE backend could have read: {exc}") from None
    graph = model.graph
    weights = {initializer.name for initializer in graph.initializer}

    def tensors(values: Any, kind: str) -> list[ModelTensor]:
        found = []
        for value in values:
            if value.name in weights:
                continue  # older exporters list the weights as inputs too
            if not value.type.HasField("tensor_type"):
                raise MigrateError(f"{path}: {kind} {value.name!r} is not a tensor (sequence or map)")
            tensor = value.type.tensor_type
            dtype = _short(dtypes.BY_ONNX, tensor.elem_type)
            if dtype is None:
                raise MigrateError(
                    f"{path}: {kind} {value.name!r} has ONNX element type {tensor.elem_type}, no OM tensor type"
                )
            if not tensor.HasField("shape"):
                raise MigrateError(
                    f"{path}: {kind} {value.name!r} has no shape in the graph: list it in the config"
                )
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim]
            found.append(ModelTensor(value.name, dtype, dims))
        return found

    return tensors(graph.input, "input"), tensors(graph.output, "output")


def _tensorflow(path: Path) -> tuple[list[ModelTensor], list[ModelTensor]]:
    try:
        graph = tf_graph.parse_graph(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise MigrateError(f"{path}: {exc}") from None

    def tensors(found: list[tf_graph.GraphTensor], kind: str) -> list[ModelTensor]:
        out = []
        for tensor in found:
            dtype: Optional[str] = _short(dtypes.BY_TF, tensor.dtype)
            if dtype is None or tensor.dims is None:
                what = "data type" if dtype is None else "shape (the exporter wrote no _output_shapes)"
                raise MigrateError(
                    f"{path}: the graph does not record the {what} of {kind} {tensor.name!r}: list {kind} "
                    "(name, data_type, dims) in the config"
                )
            out.append(ModelTensor(tensor.name, dtype, tensor.dims))
        if not out:
            raise MigrateError(
                f"{path}: the graph has no {kind}s ({'Placeholder nodes' if kind == 'input' else 'unread nodes'})"
            )
        return out

    return tensors(tf_graph.graph_inputs(graph), "input"), tensors(tf_graph.graph_outputs(graph), "output")


def _short(table: dict[int, dtypes.DType], code: Optional[int]) -> Optional[str]:
    """The short name of the type ``code`` means in ``table`` (ONNX's or TensorFlow's numbers); None if none."""
    dtype = table.get(code) if code is not None else None
    return dtype.short if dtype is not None else None
