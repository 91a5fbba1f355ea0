"""Generation tests run on a fresh simulator each, with the generating LLaMA's sim OMs (tests/conftest.py)
and its cache-free reference run by onnxruntime."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import onnxruntime as ort
import pytest

from ge_plugin.generate import GenerateConfig
from ge_plugin.models import llama_kv

CONFIGS = {
    "llama_kv": GenerateConfig(form="stacked"),
    "llama_kv_layers": GenerateConfig(
        form="per_layer", past="past_key_values.{layer}.{kind}", present="present.{layer}.{kind}"
    ),
}


@pytest.fixture(autouse=True)
def _fresh_sim_for_every_test(fresh_sim):
    """Every test here runs on a fresh simulator (tests/conftest.py)."""


@pytest.fixture(scope="session")
def full_recompute() -> Callable[[Sequence[int], int, int], tuple[list[int], list[np.ndarray]]]:
    """Greedy generation the slow way: the cache-free model over the whole sequence at every step.
    Returns the ids and the logits row each was chosen from; stops at EOS or after ``max_tokens``."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        llama_kv.tiny_llama_gen().SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    memo: dict[tuple[tuple[int, ...], int], tuple[list[int], list[np.ndarray]]] = {}

    def run(prompt: Sequence[int], max_tokens: int, eos: int = llama_kv.EOS_ID):
        key = (tuple(int(t) for t in prompt), max_tokens)
        if key not in memo:
            ids, tokens, rows = list(key[0]), [], []
            while len(tokens) < max_tokens:
                row = session.run(None, {"input_ids": np.array([ids], np.int64)})[0][0, -1]
                token = int(row.argmax())
                tokens.append(token)
                rows.append(row)
                ids.append(token)
                if token == eos:
                    break
            memo[key] = (tokens, rows)
        return memo[key]

    return run
