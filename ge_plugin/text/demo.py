"""The demo LLaMA's tokenizer: a byte-level BPE of 512 tokens trained here, offline, on a built-in text.

Contract B fixes what the generating demo model expects: ``<pad>`` = 0, ``<s>`` (BOS) = 1, ``</s>`` (EOS) = 2,
512 tokens in all. Byte-level BPE (GPT-2's and LLaMA-3's kind) has every byte among its first tokens, so any
text encodes and every id decodes; the corpus mixes English with accented, CJK and emoji text so that the
merges include multi-byte characters split over several tokens, which the stream decoder must get right.
Training is deterministic: the same corpus gives the same files, byte for byte, every run.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from ge_plugin._files import write_atomic

VOCAB_SIZE = 512
PAD, BOS, EOS = "<pad>", "<s>", "</s>"
SPECIALS = (PAD, BOS, EOS)  #: ids 0, 1, 2

#: transformers' Llama-2 chat template (the one Meta's checkpoints ship), as published
LLAMA2_CHAT_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}"
    "{% endfor %}"
)

CORPUS = (
    "Ascend NPUs run models compiled to OM files; Triton serves them to many users at once.",
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs on.",
    "A tokenizer turns text into ids and ids back into text, one token at a time, as the model streams.",
    "Hello, world! How are you today? I am fine, thank you. What is the capital of France? It is Paris.",
    "[INST] <<SYS>> You are a helpful assistant. <</SYS>> Tell me a story about a small robot. [/INST]",
    "Once upon a time there was a small robot who wanted to learn how to write poems in every language.",
    "Café, naïve, résumé, façade, coöperate, Straße, smörgåsbord, jalapeño, crème brûlée.",
    "日本語のテキストも少し含めます。東京は日本の首都です。中文文本：你好，世界！我们在测试分词器。",
    "Emoji stream in several tokens each: 🙂 🚀 🎉 👍🏽 ❤️ and symbols € £ ¥ © ™ → ≤ ≥ ∞.",
    "Numbers 0 1 2 3 4 5 6 7 8 9 10 100 1000 2026, and code: def f(x): return x + 1  # done",
    "Русский текст: привет, мир. Ελληνικά: γειά σου κόσμε. עברית: שלום עולם. العربية: مرحبا بالعالم.",
)


def train_demo_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(CORPUS) * 4, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, 1)]
    )
    if tokenizer.get_vocab_size() != VOCAB_SIZE or [tokenizer.token_to_id(t) for t in SPECIALS] != [0, 1, 2]:
        raise AssertionError("the demo tokenizer did not train to 512 tokens with <pad>, <s>, </s> first")
    return tokenizer


def tokenizer_config() -> dict[str, object]:
    """tokenizer_config.json as a LLaMA checkpoint writes it (the fields a server reads)."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "unk_token": None,
        "add_bos_token": True,
        "add_eos_token": False,
        "model_max_length": 1024,
        "chat_template": LLAMA2_CHAT_TEMPLATE,
    }


def write_demo_tokenizer(directory: str | Path) -> tuple[Path, Path]:
    """``tokenizer.json`` and ``tokenizer_config.json`` in ``directory``; a file whose bytes would not change
    is left alone. Returns both paths."""
    paths = [path for path, _ in write_demo_tokenizer_files(directory)]
    return paths[0], paths[1]


def write_demo_tokenizer_files(directory: str | Path) -> list[tuple[Path, bool]]:
    """As :func:`write_demo_tokenizer`, with whether each file was written (False: it was already so)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    files = (
        (directory / "tokenizer.json", train_demo_tokenizer().to_str(pretty=True) + "\n"),
        (
            directory / "tokenizer_config.json",
            json.dumps(tokenizer_config(), indent=2, ensure_ascii=False) + "\n",
        ),
    )
    done = []
    for path, text in files:
        data = text.encode("utf-8")
        same = path.is_file() and path.read_bytes() == data
        if not same:
            write_atomic(path, data)
        done.append((path, not same))
    return done
