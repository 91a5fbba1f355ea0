"""Tokenizers for the text tests: the demo's byte-level BPE, and a LLaMA-2-style one (SentencePiece's
``▁`` leading-space marker, ``<0xNN>`` byte-fallback tokens) built here the way Hugging Face converts
LLaMA's tokenizer.model, so both kinds of edge meet the stream decoder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer as HfTokenizer
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

from ge_plugin.text.demo import CORPUS, write_demo_tokenizer
from ge_plugin.text.tokenizer import Tokenizer


@pytest.fixture(scope="session")
def demo_files(tmp_path_factory) -> tuple[Path, Path]:
    return write_demo_tokenizer(tmp_path_factory.mktemp("demo-tokenizer"))


@pytest.fixture(scope="session")
def demo_tokenizer(demo_files) -> Tokenizer:
    return Tokenizer.from_files(*demo_files)


def llama_style_tokenizer() -> HfTokenizer:
    """A small BPE over a limited alphabet whose other characters fall back to byte tokens: LLaMA-2's
    tokenizer.json shape (Replace ▁, ByteFallback, Fuse, Strip decoders), trained on the demo corpus."""
    base = HfTokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    base.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    base.pre_tokenizer = pre_tokenizers.Split("▁", "merged_with_next")
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=60, show_progress=False
    )
    base.train_from_iterator(list(CORPUS) * 4, trainer)
    spec = json.loads(base.to_str())
    vocab = spec["model"]["vocab"]
    for byte in range(256):
        vocab.setdefault(f"<0x{byte:02X}>", len(vocab))
    spec["model"]["byte_fallback"] = True
    spec["decoder"] = json.loads(
        decoders.Sequence(
            [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
        ).__getstate__()
    )
    return HfTokenizer.from_str(json.dumps(spec))


@pytest.fixture(scope="session")
def llama_tokenizer() -> Tokenizer:
    return Tokenizer(
        llama_style_tokenizer(),
        {"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True},
        source="llama",
    )
