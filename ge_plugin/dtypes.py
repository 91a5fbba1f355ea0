"""One table of tensor data types, as Triton, pyACL, numpy, ONNX, TensorFlow, ATC and spec authors name them.

Spec authors write short names (``fp32``, ``int64``, ``bf16``) or Triton's (``TYPE_FP32``); config.pbtxt and
the Triton client use Triton's; the OM reports pyACL's ``aclDataType``; ATC builds from ONNX element types and
names output types its own way (``--output_type=FP16``); ``ge-plugin migrate`` reads ONNX and TensorFlow
graphs. numpy has no bfloat16, so bf16
tensors travel as their uint16 bit patterns everywhere in ge-plugin (Triton hands TYPE_BF16 over as DLPack,
which the fast path reads and writes as those words).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from ge_plugin import acl_constants as C


@attrs.frozen
class DType:
    """One data type under all its names."""

    short: str  #: the spec's name, e.g. ``fp32``
    triton: str  #: config.pbtxt's name, e.g. ``TYPE_FP32``
    acl: int  #: pyACL's aclDataType
    numpy: np.dtype[Any] = attrs.field(converter=np.dtype)  #: how the bytes look on the host
    onnx: int  #: ONNX's TensorProto.DataType
    tf: int  #: TensorFlow's DataType (types.proto)
    atc: str | None = None  #: ATC's ``--output_type`` name; None: ATC cannot make an output this type

    @property
    def wire(self) -> str:
        """The KServe/Triton protocol name used by clients (``FP32``, ``BYTES``)."""
        return "BYTES" if self.short == "string" else self.triton[len("TYPE_") :]

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @property
    def is_float(self) -> bool:
        """Floating point (bf16 included, though its host bytes are uint16)."""
        return self.short in ("fp16", "fp32", "fp64", "bf16")

    def __str__(self) -> str:
        return self.short


_TABLE = (
    DType("bool", "TYPE_BOOL", C.ACL_BOOL, np.bool_, onnx=9, tf=10),
    DType("uint8", "TYPE_UINT8", C.ACL_UINT8, np.uint8, onnx=2, tf=4, atc="UINT8"),
    DType("uint16", "TYPE_UINT16", C.ACL_UINT16, np.uint16, onnx=4, tf=17, atc="UINT16"),
    DType("uint32", "TYPE_UINT32", C.ACL_UINT32, np.uint32, onnx=12, tf=22, atc="UINT32"),
    DType("uint64", "TYPE_UINT64", C.ACL_UINT64, np.uint64, onnx=13, tf=23, atc="UINT64"),
    DType("int8", "TYPE_INT8", C.ACL_INT8, np.int8, onnx=3, tf=6, atc="INT8"),
    DType("int16", "TYPE_INT16", C.ACL_INT16, np.int16, onnx=5, tf=5, atc="INT16"),
    DType("int32", "TYPE_INT32", C.ACL_INT32, np.int32, onnx=6, tf=3, atc="INT32"),
    DType("int64", "TYPE_INT64", C.ACL_INT64, np.int64, onnx=7, tf=9, atc="INT64"),
    DType("fp16", "TYPE_FP16", C.ACL_FLOAT16, np.float16, onnx=10, tf=19, atc="FP16"),
    DType("fp32", "TYPE_FP32", C.ACL_FLOAT, np.float32, onnx=1, tf=1, atc="FP32"),
    DType("fp64", "TYPE_FP64", C.ACL_DOUBLE, np.float64, onnx=11, tf=2, atc="DOUBLE"),
    DType("bf16", "TYPE_BF16", C.ACL_BF16, np.uint16, onnx=16, tf=14),
    DType("string", "TYPE_STRING", C.ACL_STRING, np.object_, onnx=8, tf=7),
)

#: short names, Triton names, wire names and the common numpy spellings, all lower-cased
_BY_NAME: dict[str, DType] = {}
for _d in _TABLE:
    for _alias in (_d.short, _d.triton, _d.wire):
        _BY_NAME[_alias.lower()] = _d
for _alias, _short in {
    "float32": "fp32",
    "float16": "fp16",
    "float64": "fp64",
    "float": "fp32",
    "half": "fp16",
    "double": "fp64",
    "bfloat16": "bf16",
    "u8": "uint8",
    "i8": "int8",
    "i32": "int32",
    "i64": "int64",
}.items():
    _BY_NAME[_alias] = _BY_NAME[_short]

_BY_ACL = {d.acl: d for d in _TABLE}
#: ONNX element types -> ge-plugin's types, in ONNX's order (string included: a model file may have it)
BY_ONNX = {d.onnx: d for d in sorted(_TABLE, key=lambda d: d.onnx)}
#: TensorFlow's DataType numbers -> ge-plugin's types
BY_TF = {d.tf: d for d in _TABLE}
#: ATC's ``--output_type`` names -> ge-plugin's types
BY_ATC_OUTPUT_TYPE = {d.atc: d for d in _TABLE if d.atc is not None}

#: the names an unknown name's error offers: only types a tensor can be served as. ``by_name`` also knows
#: string (an OM reports it), but specs and configs refuse it, so suggesting it would mislead.
SHORT_NAMES = tuple(d.short for d in _TABLE if d.short != "string")
TRITON_NAMES = tuple(d.triton for d in _TABLE if d.short != "string")


def by_name(name: str) -> DType:
    """The data type called ``name`` (any spelling above); KeyError names what is accepted."""
    try:
        return _BY_NAME[name.strip().lower()]
    except (KeyError, AttributeError):
        raise KeyError(
            f"unknown data type {name!r}; use one of {', '.join(SHORT_NAMES)} or {', '.join(TRITON_NAMES)}"
        ) from None


def by_acl(code: int) -> DType:
    """The data type pyACL reports as ``code``."""
    try:
        return _BY_ACL[code]
    except KeyError:
        raise KeyError(f"aclDataType {code} is not supported by ge-plugin") from None


def all_dtypes() -> tuple[DType, ...]:
    return _TABLE
