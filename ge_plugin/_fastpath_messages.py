"""The words both fast paths use when they refuse something, so that their errors are equal by construction.

``ge_plugin._fastpath`` (compiled) and ``ge_plugin._fastpath_py`` (its pure-Python twin) each keep their own
checks; what is here runs only once a check has failed, or once per model while a spec is built (reading a
value range), never per request on the happy path. Neither implementation imports the other's privates:
the twin stays a specification written on its own, and the compiled module stays free to check in C.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, cast

import numpy as np

from ge_plugin.errors import RequestError

#: the integer range of each integer type name, for pad values and value ranges
INT_RANGE: dict[str, tuple[int, int]] = {
    name: (int(np.iinfo(np.dtype(code)).min), int(np.iinfo(np.dtype(code)).max))
    for name, code in (
        ("uint8", "u1"),
        ("uint16", "u2"),
        ("uint32", "u4"),
        ("uint64", "u8"),
        ("int8", "i1"),
        ("int16", "i2"),
        ("int32", "i4"),
        ("int64", "i8"),
    )
}
INT_RANGE["bool"] = (0, 1)


class Spec(Protocol):
    """What the messages read of a TensorSpec (either implementation's)."""

    @property
    def name(self) -> str: ...
    @property
    def value_range(self) -> tuple[float, float] | None: ...
    @property
    def same_shape_as(self) -> str | None: ...


def describe(dtype: np.dtype[Any]) -> str:
    """A dtype as an error names it."""
    return dtype.name if dtype.isnative else f"{dtype.str} (non-native byte order)"


def pair_names(pairs: Iterable[tuple[str, str]]) -> list[str]:
    """``a<->b`` once per pair of conversions both ways, in table order (for messages)."""
    seen: list[tuple[str, str]] = []
    for a, b in pairs:
        if (b, a) not in seen:
            seen.append((a, b))
    return [f"{a}<->{b}" for a, b in seen]


def number(value: object, what: str) -> float:
    """``value`` as a float; only real numbers: float("1.5") would accept a string, always a caller's mistake."""
    if isinstance(value, (str, bytes, bytearray)):
        raise ValueError(f"{what}: {value!r} is not a number")
    try:
        return float(cast(Any, value))
    except (TypeError, ValueError):
        raise ValueError(f"{what}: {value!r} is not a number") from None


def value_range(name: str, type_name: str, bounds: object) -> tuple[float, float]:
    """(low, high) as a TensorSpec keeps them: ints for integer types, floats for float types."""
    try:
        low, high = cast(Any, bounds)  # anything that unpacks into two
    except (TypeError, ValueError):
        raise ValueError(f"TensorSpec {name!r}: value_range must be (low, high), got {bounds!r}") from None
    integral = type_name in INT_RANGE
    kept: list[float] = []
    for which, bound in (("low", low), ("high", high)):
        value = number(bound, f"TensorSpec {name!r}: value_range {which}")
        if value != value:
            raise ValueError(f"TensorSpec {name!r}: value_range {which} is NaN")
        if integral:
            if isinstance(bound, (int, np.integer)):
                kept.append(int(bound))
                continue
            if not value.is_integer():
                raise ValueError(
                    f"TensorSpec {name!r}: value_range {which} {bound!r} is not an integer, and {type_name} "
                    "holds integers"
                )
            kept.append(int(value))
        else:
            kept.append(value)
    if kept[0] > kept[1]:
        raise ValueError(f"TensorSpec {name!r}: value_range low {kept[0]} is above high {kept[1]}")
    return (kept[0], kept[1])


def range_problem(spec: Spec, values: np.ndarray[Any, Any], flat: int) -> RequestError:
    """The error for the first value outside the spec's range, at flat index ``flat`` (bf16 already widened)."""
    value = values.flat[flat]
    shown = repr(float(value)) if values.dtype.kind == "f" else str(int(value))
    index = ", ".join(str(int(i)) for i in np.unravel_index(flat, values.shape))
    assert spec.value_range is not None
    low, high = spec.value_range
    return RequestError(
        f"input {spec.name!r}: value {shown} at [{index}] is outside the accepted range [{low}, {high}]"
    )


def check_ties(specs: Sequence[Spec], arrays: Sequence[np.ndarray[Any, Any]]) -> None:
    """Raise the error for the first ``same_shape_as`` that does not hold: an unknown name (a spec's
    mistake, ValueError) or shapes that differ (the request's, RequestError)."""
    for k, spec in enumerate(specs):
        other = spec.same_shape_as
        if other is None:
            continue
        j = next((j for j, candidate in enumerate(specs) if candidate.name == other), None)
        if j is None:
            raise ValueError(f"TensorSpec {spec.name!r}: same_shape_as {other!r} is not one of the inputs")
        if arrays[k].shape != arrays[j].shape:
            raise RequestError(
                f"input {spec.name!r}: shape {list(arrays[k].shape)} differs from input {other!r}'s "
                f"{list(arrays[j].shape)}; the model takes them with the same shape"
            )
