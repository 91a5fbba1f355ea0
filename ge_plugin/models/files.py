"""Writing the demo models to disk so that a second run of the demo costs no disk writes.

A file is rewritten only when its bytes would change, and then atomically (temporary file + rename), so a
simulator or ATC reading the directory never sees half a model.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import onnx

from ge_plugin._files import write_atomic
from ge_plugin.models.bert import tiny_bert
from ge_plugin.models.bf16 import bf16_affine
from ge_plugin.models.cnn import tiny_cnn
from ge_plugin.models.identity_model import identity
from ge_plugin.models.llama import tiny_llama
from ge_plugin.models.llama_kv import tiny_llama_gen, tiny_llama_kv, tiny_llama_kv_layers

#: file stem -> builder; ``write_demo_models`` writes ``<stem>.onnx`` for each, in this order.
DEMO_MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "tiny_llama": tiny_llama,
    "tiny_bert": tiny_bert,
    "identity": identity,
    "tiny_cnn": tiny_cnn,
    "bf16_affine": bf16_affine,
    "tiny_llama_gen": tiny_llama_gen,
    "tiny_llama_kv": tiny_llama_kv,
    "tiny_llama_kv_layers": tiny_llama_kv_layers,
}


def write_model(path: str | os.PathLike[str], model: onnx.ModelProto) -> bool:
    """Write ``model`` to ``path`` unless the file already holds exactly these bytes; True if written."""
    path = Path(path)
    data = model.SerializeToString()
    if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return False
    write_atomic(path, data)
    return True


def write_demo_models(directory: str | os.PathLike[str]) -> dict[str, Path]:
    """Write every model of ``DEMO_MODELS`` into ``directory`` (created if missing); stem -> path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for stem, build in DEMO_MODELS.items():
        paths[stem] = directory / f"{stem}.onnx"
        write_model(paths[stem], build())
    return paths
