"""Choosing the next token from one row of logits: greedy, or seeded sampling with temperature, top-k, top-p.

Each sequence owns its random generator (seeded from the request's ``seed``, or from fresh entropy), so a
seeded request draws the same tokens whatever else runs beside it.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from ge_plugin.errors import RequestError


def _positive(instance: object, attribute: attrs.Attribute[Any], value: int) -> None:
    if value < 1:
        raise RequestError(f"{attribute.name} must be at least 1, got {value}")


def _not_negative(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value >= 0:  # NaN too
        raise RequestError(f"{attribute.name} must be >= 0, got {value}")


def _probability(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not 0 < value <= 1:
        raise RequestError(f"{attribute.name} must be in (0, 1], got {value}")


@attrs.frozen
class SamplingParams:
    """One request's generation parameters; RequestError (400) for a value out of range."""

    max_tokens: int = attrs.field(default=16, validator=_positive)
    temperature: float = attrs.field(default=0.0, validator=_not_negative)  # 0: greedy
    top_k: int = attrs.field(default=0, validator=_not_negative)  # 0: all
    top_p: float = attrs.field(default=1.0, validator=_probability)
    seed: int | None = None
    ignore_eos: bool = False
    stop_ids: tuple[int, ...] = ()

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def generator(params: SamplingParams) -> np.random.Generator | None:
    """The sequence's own generator (None when greedy)."""
    if params.greedy:
        return None
    return np.random.default_rng(params.seed)


def sample(logits: NDArray[np.float32], params: SamplingParams, rng: np.random.Generator | None) -> int:
    """The next token id from ``logits [vocab]``."""
    if rng is None:
        return int(np.argmax(logits))
    scaled = logits.astype(np.float64) / params.temperature
    if params.top_k and params.top_k < scaled.size:
        cut = np.partition(scaled, -params.top_k)[-params.top_k]
        scaled = np.where(scaled >= cut, scaled, -np.inf)
    probs = np.exp(scaled - scaled.max())
    probs /= probs.sum()
    if params.top_p < 1.0:
        order = np.argsort(-probs, kind="stable")
        cumulative = np.cumsum(probs[order])
        keep = order[: int(np.searchsorted(cumulative, params.top_p)) + 1]
        kept = np.zeros_like(probs)
        kept[keep] = probs[keep]
        probs = kept / kept.sum()
    return int(rng.choice(probs.size, p=probs))
