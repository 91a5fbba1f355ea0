"""Reading a TensorFlow frozen graph (``GraphDef``, a ``.pb``) without TensorFlow: the few messages of
tensorflow/core/framework (graph.proto, node_def.proto, attr_value.proto, tensor_shape.proto) that name a
graph's nodes, their inputs, dtypes and shapes, declared here at run time and parsed with protobuf, which
ge-plugin has anyway. Fields not declared (constant tensors, functions, versions) are skipped by the parser.

Inputs are the ``Placeholder`` nodes (their ``dtype`` and ``shape`` attributes); outputs are the nodes no
other node reads (their ``T``/``dtype`` attribute, and the shape the exporter recorded in ``_output_shapes``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, Optional

import attrs
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_PACKAGE = "ge_plugin.tf_graph"
F = descriptor_pb2.FieldDescriptorProto

#: ops that produce no tensor a client could ask for
_NOT_OUTPUTS = {"NoOp", "Placeholder", "PlaceholderWithDefault", "Const", "Assert", "SaveV2", "RestoreV2"}


def _field(name: str, number: int, kind: Any, *, repeated: bool = False, type_name: str = "") -> F:
    field = F(name=name, number=number, type=kind, label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
    if type_name:
        field.type_name = f".{_PACKAGE}.{type_name}"
    return field


@cache
def _messages() -> dict[str, Any]:
    """The message classes, built once per process in a pool of their own."""
    file = descriptor_pb2.FileDescriptorProto(
        name="ge_plugin_tf_graph.proto", package=_PACKAGE, syntax="proto3"
    )
    dim = descriptor_pb2.DescriptorProto(
        name="Dim", field=[_field("size", 1, F.TYPE_INT64), _field("name", 2, F.TYPE_STRING)]
    )
    file.message_type.add(
        name="TensorShapeProto",
        field=[
            _field("dim", 2, F.TYPE_MESSAGE, repeated=True, type_name="TensorShapeProto.Dim"),
            _field("unknown_rank", 3, F.TYPE_BOOL),
        ],
        nested_type=[dim],
    )
    list_value = descriptor_pb2.DescriptorProto(
        name="ListValue",
        field=[
            _field("type", 6, F.TYPE_INT32, repeated=True),  # DataType enum values, kept as numbers
            _field("shape", 7, F.TYPE_MESSAGE, repeated=True, type_name="TensorShapeProto"),
        ],
    )
    file.message_type.add(
        name="AttrValue",
        field=[
            _field("list", 1, F.TYPE_MESSAGE, type_name="AttrValue.ListValue"),
            _field("type", 6, F.TYPE_INT32),
            _field("shape", 7, F.TYPE_MESSAGE, type_name="TensorShapeProto"),
        ],
        nested_type=[list_value],
    )
    entry = descriptor_pb2.DescriptorProto(
        name="AttrEntry",
        field=[_field("key", 1, F.TYPE_STRING), _field("value", 2, F.TYPE_MESSAGE, type_name="AttrValue")],
    )
    entry.options.map_entry = True
    file.message_type.add(
        name="NodeDef",
        field=[
            _field("name", 1, F.TYPE_STRING),
            _field("op", 2, F.TYPE_STRING),
            _field("input", 3, F.TYPE_STRING, repeated=True),
            _field("attr", 5, F.TYPE_MESSAGE, repeated=True, type_name="NodeDef.AttrEntry"),
        ],
        nested_type=[entry],
    )
    file.message_type.add(
        name="GraphDef", field=[_field("node", 1, F.TYPE_MESSAGE, repeated=True, type_name="NodeDef")]
    )
    # protobuf's pool publishes no types for these calls
    pool: Any = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name in ("GraphDef", "NodeDef", "AttrValue", "TensorShapeProto")
    }


def message(name: str) -> Any:
    """A class of this module's messages (``GraphDef``, ``NodeDef``, ``AttrValue``, ``TensorShapeProto``);
    tests build graphs with them."""
    return _messages()[name]


@attrs.frozen
class GraphTensor:
    """A graph input or output: its dtype number, and its dims (-1 unknown) or None when no shape is recorded."""

    name: str
    dtype: Optional[int]
    dims: Optional[list[int]]


def _dims(shape: Any) -> Optional[list[int]]:
    if shape.unknown_rank:
        return None
    return [int(d.size) if d.size >= 0 else -1 for d in shape.dim]


def parse_graph(data: bytes) -> Any:
    """A GraphDef from a frozen graph's bytes; ValueError when they are not one."""
    graph = message("GraphDef")()
    try:
        graph.ParseFromString(data)
    except Exception as exc:  # protobuf's DecodeError, or a wire type that does not match a declared field
        raise ValueError(f"not a TensorFlow GraphDef: {exc}") from None
    if not graph.node:
        raise ValueError("not a TensorFlow GraphDef: no nodes")
    return graph


def graph_inputs(graph: Any) -> list[GraphTensor]:
    """The Placeholder nodes, in graph order."""
    found = []
    for node in graph.node:
        if node.op == "Placeholder":
            attr = node.attr
            dims = _dims(attr["shape"].shape) if "shape" in attr else None
            found.append(GraphTensor(node.name, attr["dtype"].type if "dtype" in attr else None, dims))
    return found


def _read_names(nodes: Sequence[Any]) -> set[str]:
    """Every node another node reads: ``name``, ``name:1`` and control inputs ``^name`` alike."""
    return {text.lstrip("^").split(":", 1)[0] for node in nodes for text in node.input}


def graph_outputs(graph: Any) -> list[GraphTensor]:
    """The nodes no other node reads (but constants, placeholders and no-ops), in graph order."""
    read = _read_names(graph.node)
    found = []
    for node in graph.node:
        if node.name in read or node.op in _NOT_OUTPUTS:
            continue
        attr = node.attr
        dtype = next((attr[key].type for key in ("T", "dtype", "out_type", "DstT") if key in attr), None)
        shapes = attr["_output_shapes"].list.shape if "_output_shapes" in attr else []
        found.append(GraphTensor(node.name, dtype, _dims(shapes[0]) if shapes else None))
    return found
