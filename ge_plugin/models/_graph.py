"""A small helper around ``onnx.helper`` so each model file reads like its maths, one line per op.

Names are deterministic (a scope prefix plus a per-op counter) and the model carries no timestamp or library
version, so building the same model twice serialises to the same bytes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper

#: ATC accepts ONNX opsets 11-18; 17 is the newest whose ReduceMean still takes ``axes`` as an attribute.
OPSET = 17
#: Pinned rather than onnx's default so that a newer onnx package does not change the bytes we write.
IR_VERSION = 8
PRODUCER = "ge-plugin demo-models"

#: Additive attention bias for positions a query must not see. Finite and fp16-representable, so a model
#: compiled with reduced precision does not turn it into NaN; exp(-1e4) is exactly 0 in fp32.
MASKED = -1.0e4

DimSpec = Sequence["int | str"]


class GraphBuilder:
    """Collects nodes and initializers; every ``op`` call returns the name of its (first) output."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._scopes: list[str] = []
        self._counts: dict[str, int] = {}

    @contextlib.contextmanager
    def scope(self, name: str) -> Iterator[None]:
        """Prefix names made inside with ``name/`` so a graph viewer groups a layer's nodes."""
        self._scopes.append(name)
        try:
            yield
        finally:
            self._scopes.pop()

    def _fresh(self, stem: str) -> str:
        full = "/".join([*self._scopes, stem])
        count = self._counts.get(full, 0)
        self._counts[full] = count + 1
        return full if count == 0 else f"{full}_{count}"

    def weight(self, name: str, array: NDArray[Any]) -> str:
        """A float32 initializer named after its role (``layers.0/q_proj``)."""
        return self._initializer(self._fresh(name), np.ascontiguousarray(array, dtype=np.float32))

    def const(
        self, values: float | int | Sequence[int] | Sequence[float] | NDArray[Any], dtype: type = np.int64
    ) -> str:
        """A small constant (an axis list, a shape, a scalar); a Python scalar gives a 0-d tensor."""
        return self._initializer(self._fresh("const"), np.asarray(values, dtype=dtype))

    def _initializer(self, name: str, array: NDArray[Any]) -> str:
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def op(self, op_type: str, *inputs: str, out: str | None = None, **attrs: Any) -> str:
        """Append one single-output node; ``out`` names a graph output, otherwise the node names it."""
        name = self._fresh(op_type)
        self.nodes.append(helper.make_node(op_type, list(inputs), [out or name], name=name, **attrs))
        return out or name

    def build(
        self,
        name: str,
        inputs: Sequence[onnx.ValueInfoProto],
        outputs: Sequence[onnx.ValueInfoProto],
        doc: str,
        metadata: dict[str, str],
    ) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, name, list(inputs), list(outputs), self.initializers, doc_string=doc
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)],
            ir_version=IR_VERSION,
            producer_name=PRODUCER,
            doc_string=doc,
        )
        helper.set_model_props(model, metadata)
        return model


def tensor(name: str, elem_type: int, dims: DimSpec) -> onnx.ValueInfoProto:
    """A graph input or output; string dims are symbolic (``batch``, ``seq``)."""
    return helper.make_tensor_value_info(name, elem_type, list(dims))


FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
