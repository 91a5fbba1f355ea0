"""Typed surface of the compiled ``ge_plugin._fastpath``; mirrors ``ge_plugin._fastpath_py`` (a test checks)."""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from numpy.typing import NDArray

from ge_plugin._fastpath_tables import PlannedGear, PlannedInput, PlannedOutput
from ge_plugin.errors import RequestError

IMPLEMENTATION: str

CASTS: frozenset[tuple[str, str]]

__all__ = [
    "CASTS",
    "IMPLEMENTATION",
    "Chunk",
    "Planner",
    "TensorSpec",
    "bf16_capsule",
    "bf16_view",
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

def validate(specs: Sequence[TensorSpec], tensors: Mapping[str, object]) -> list[NDArray[Any]]: ...
def gather(
    dst: object,
    dst_shape: Sequence[int],
    dst_type: str,
    srcs: Sequence[object],
    src_type: str,
    pad_value: float,
) -> int: ...
def scatter(
    src: object,
    src_shape: Sequence[int],
    src_type: str,
    out_type: str,
    rows: Sequence[int],
    shapes: Sequence[Sequence[int]],
) -> list[NDArray[Any]]: ...
def bf16_view(tensor: object) -> NDArray[Any]: ...
def bf16_capsule(words: NDArray[Any]) -> object: ...

class Chunk:
    indices: list[int]
    arrays: list[list[NDArray[Any]]] | None
    shapes: list[tuple[tuple[int, ...], ...]]
    need: tuple[int, ...]
    gear: int
    rows: int
    elements: int
    in_bytes: list[int]
    outputs: list[int]
    out_index: list[int]
    out_bytes: list[int]
    wanted: list[list[int]] | None
    staged: bool

class Planner:
    def __init__(
        self,
        inputs: Sequence[PlannedInput],
        outputs: Sequence[PlannedOutput],
        gears: Sequence[PlannedGear],
        *,
        batched: bool = True,
        exact: Sequence[bool] = (),
        pad_value: float = 0,
        refusal: Callable[[list[NDArray[Any]]], str] | None = None,
    ) -> None: ...
    def choose(self, need: Sequence[int]) -> int | None: ...
    def plan(
        self, requests: Sequence[Mapping[str, object]], wanted: Sequence[Any] | None = None
    ) -> tuple[list[Chunk], list[tuple[int, RequestError]]]: ...
    def chunk(
        self,
        indices: Sequence[int],
        arrays: Sequence[Sequence[NDArray[Any]]],
        wanted: Sequence[Sequence[int]] | None = None,
        *,
        staged: bool = False,
    ) -> Chunk: ...
    def extend(self, chunk: Chunk, more: Chunk) -> Chunk | None: ...
    def stage(self, chunk: Chunk, staging: Sequence[object], first: int = 0) -> None: ...
    def launch_args(self, chunk: Chunk) -> tuple[Any, list[int], list[int], list[int]]: ...
    def count(self, chunk: Chunk) -> None: ...
    def split(
        self, chunk: Chunk, staging: Sequence[NDArray[Any]], views: bool = False
    ) -> tuple[list[dict[str, NDArray[Any]]], bool]: ...
    def tally(self) -> tuple[list[int], int, int, int]: ...
