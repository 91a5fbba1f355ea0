"""Tiny, deterministic ONNX models for demos, tests and benchmarks, built with ``onnx.helper`` only.

``tiny_llama`` (a counting LLM: the next token is always ``input_id + 1``), ``tiny_bert`` (ids + mask ->
hidden states), ``identity`` (the overhead floor), ``tiny_cnn`` (any image size, for image-size gears) and
``bf16_affine`` (bfloat16 in and out), and the generating LLaMA ``tiny_llama_gen`` / ``tiny_llama_kv`` /
``tiny_llama_kv_layers`` (a copy pattern, with and without a KV cache: models/llama_kv.py). Building one twice gives byte-identical files, so the
sim OMs and model repositories made from them are reproducible. See docs/models.md.
"""

from __future__ import annotations

from ge_plugin.models import bert as _bert
from ge_plugin.models import cnn as _cnn
from ge_plugin.models import identity_model as _identity
from ge_plugin.models import llama as _llama
from ge_plugin.models.bert import tiny_bert
from ge_plugin.models.bf16 import bf16_affine, bf16_affine_reference
from ge_plugin.models.cnn import tiny_cnn
from ge_plugin.models.files import DEMO_MODELS, write_demo_models, write_model
from ge_plugin.models.identity_model import identity
from ge_plugin.models.llama import tiny_llama
from ge_plugin.models.llama_kv import tiny_llama_gen, tiny_llama_kv, tiny_llama_kv_layers

LLAMA_VOCAB = _llama.VOCAB
LLAMA_HIDDEN = _llama.HIDDEN
BERT_VOCAB = _bert.VOCAB
BERT_HIDDEN = _bert.HIDDEN
BERT_MAX_POSITIONS = _bert.MAX_POSITIONS
IDENTITY_WIDTH = _identity.WIDTH
CNN_CLASSES = _cnn.CLASSES
CNN_FEATURES = _cnn.FEATURES

__all__ = [
    "BERT_HIDDEN",
    "BERT_MAX_POSITIONS",
    "BERT_VOCAB",
    "CNN_CLASSES",
    "CNN_FEATURES",
    "DEMO_MODELS",
    "IDENTITY_WIDTH",
    "LLAMA_HIDDEN",
    "LLAMA_VOCAB",
    "bf16_affine",
    "bf16_affine_reference",
    "identity",
    "tiny_bert",
    "tiny_cnn",
    "tiny_llama",
    "tiny_llama_gen",
    "tiny_llama_kv",
    "tiny_llama_kv_layers",
    "write_demo_models",
    "write_model",
]
