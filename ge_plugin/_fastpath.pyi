"""Typed surface of the compiled ``ge_plugin._fastpath``; mirrors ``ge_plugin._fastpath_py`` (a test checks)."""

from collections.abc import Mapping, Sequence

import numpy as np

IMPLEMENTATION: str

CASTS: frozenset[tuple[str, str]]

__all__ = [
    "CASTS",
    "IMPLEMENTATION",
    "TensorSpec",
    "bf16_capsule",
    "bf16_view",
    "copy_bytes",
    "fill",
    "gather",
    "scatter",
    "validate",
]

class TensorSpec:
    name: str
    type: str
    dims: tuple[int, ...]
    limits: tuple[int, ...]
    batched: bool
    value_range: tuple[float, float] | None
    same_shape_as: str | None

    def __init__(
        self,
        name: str,
        type: str,
        dims: Sequence[int],
        limits: Sequence[int],
        *,
        batched: bool = True,
        value_range: Sequence[float] | None = None,
        same_shape_as: str | None = None,
    ) -> None: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

def validate(specs: Sequence[TensorSpec], tensors: Mapping[str, object]) -> list: ...
def gather(
    dst, dst_shape: Sequence[int], dst_type: str, srcs: Sequence, src_type: str, pad_value: float
) -> int: ...
def scatter(
    src,
    src_shape: Sequence[int],
    src_type: str,
    out_type: str,
    rows: Sequence[int],
    shapes: Sequence[Sequence[int]],
) -> list: ...
def copy_bytes(dst, src) -> None: ...
def fill(dst, type: str, value: float, start: int = 0, count: int = -1) -> None: ...
def bf16_view(tensor: object) -> np.ndarray: ...
def bf16_capsule(words: np.ndarray) -> object: ...
