"""Engine tests run on the simulator, with the sim OMs of tests/conftest.py (``oms``: the demo models and
``two_outputs``)."""

from __future__ import annotations

import os

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _fresh_sim_for_every_test(fresh_sim):
    """Every test here runs on a fresh simulator (tests/conftest.py)."""


def config(name: str, om: os.PathLike, inputs, outputs, *, max_batch_size: int = 8, **params: str) -> dict:
    """A model config in the JSON form Triton hands to initialize()."""
    parameters = {"om_model_path": {"string_value": str(om)}}
    parameters.update({k: {"string_value": v} for k, v in params.items()})
    return {
        "name": name,
        "backend": "ge",
        "max_batch_size": max_batch_size,
        "input": [{"name": n, "data_type": t, "dims": list(d)} for n, t, d in inputs],
        "output": [{"name": n, "data_type": t, "dims": list(d)} for n, t, d in outputs],
        "parameters": parameters,
    }


def llama_config(om, **params) -> dict:
    params.setdefault("output_dim_ties", "logits:0=input_ids:0")
    params.setdefault("pad_inputs", "input_ids")  # causal: padding after a sequence does not change it
    return config(
        "llama_model",
        om,
        [("input_ids", "TYPE_INT64", [-1])],
        [("logits", "TYPE_FP32", [-1, 32000])],
        **params,
    )


def bert_config(om, **params) -> dict:
    params.setdefault("output_dim_ties", "last_hidden_state:0=input_ids:0")
    params.setdefault("pad_inputs", "input_ids,attention_mask")  # padded positions are masked out
    return config(
        "bert_model",
        om,
        [("input_ids", "TYPE_INT64", [-1]), ("attention_mask", "TYPE_INT64", [-1])],
        [("last_hidden_state", "TYPE_FP32", [-1, 64])],
        **params,
    )


def identity_config(om, **kwargs) -> dict:
    return config("identity", om, [("INPUT0", "TYPE_FP32", [16])], [("OUTPUT0", "TYPE_FP32", [16])], **kwargs)


def tokens(rng: np.random.Generator, batch: int, seq: int) -> np.ndarray:
    return rng.integers(0, 32000, (batch, seq), dtype=np.int64)


class Configs:
    """The config builders above, handed to tests as a fixture (conftest is not importable by name)."""

    config = staticmethod(config)
    llama = staticmethod(llama_config)
    bert = staticmethod(bert_config)
    identity = staticmethod(identity_config)
    tokens = staticmethod(tokens)


@pytest.fixture(scope="session")
def cfg() -> type[Configs]:
    return Configs
