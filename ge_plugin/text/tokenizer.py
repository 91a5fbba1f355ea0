"""A Hugging Face tokenizer as checkpoints ship it: ``tokenizer.json`` (the ``tokenizers`` library reads it)
and, where there is one, ``tokenizer_config.json`` (special tokens, whether a BOS is added, the chat template).

What a LLaMA-family checkpoint means by its files is what ``transformers`` does with them; this module does
the same without ``transformers``: a prompt gets the BOS the tokenizer's post-processor adds (or
``add_bos_token`` asks for), a chat is rendered by its template (``text.chat``) and encoded without adding
special tokens again (the template writes them), and generated ids decode without special tokens.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from tokenizers import Tokenizer as _HfTokenizer

from ge_plugin.errors import TokenizerError
from ge_plugin.text.chat import ChatTemplate

#: tokenizer_config.json keys naming special tokens, as transformers' SPECIAL_TOKENS_ATTRIBUTES has them
SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


@attrs.frozen
class SpecialTokens:
    """The special tokens a checkpoint names, as text and id (None where it names none)."""

    text: Mapping[str, str]  #: ``bos_token`` -> ``<s>`` ...: what a chat template sees
    bos_id: int | None
    eos_id: int | None
    pad_id: int | None


class Tokenizer:
    """One checkpoint's tokenizer: encode a prompt or a chat, decode ids (whole, or as a stream: ``text.stream``)."""

    def __init__(
        self,
        backend: _HfTokenizer,
        config: Mapping[str, Any] | None = None,
        *,
        source: str = "tokenizer.json",
    ):
        self.backend = backend
        self.source = source
        config = dict(config or {})
        text = {}
        for key in SPECIAL_KEYS:
            token = _token_text(config.get(key), f"{source}: {key}")
            if token is not None:
                text[key] = token
        self.special = SpecialTokens(
            text=text,
            bos_id=self._id_of(text.get("bos_token"), "bos_token"),
            eos_id=self._id_of(text.get("eos_token"), "eos_token"),
            pad_id=self._id_of(text.get("pad_token"), "pad_token"),
        )
        #: transformers' LlamaTokenizerFast adds a BOS itself when ``add_bos_token`` says so and the
        #: post-processor does not; the post-processor's own BOS is never doubled
        self.add_bos = bool(config.get("add_bos_token", False)) and self.special.bos_id is not None
        template = _chat_template(config.get("chat_template"), source)
        self.chat_template = ChatTemplate(template, text) if template is not None else None
        self.vocab_size = backend.get_vocab_size(with_added_tokens=True)
        self.byte_fallback_ids = _byte_fallback_ids(backend)

    @classmethod
    def from_files(cls, tokenizer_json: str | Path, tokenizer_config: str | Path | None = None) -> Tokenizer:
        """The tokenizer of these files; TokenizerError naming the file that cannot be read."""
        path = Path(tokenizer_json)
        try:
            backend = _HfTokenizer.from_str(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise TokenizerError(f"{path}: cannot read the tokenizer: {exc.strerror or exc}") from None
        except Exception as exc:  # tokenizers raises a bare Exception for a file it cannot parse
            raise TokenizerError(f"{path}: not a Hugging Face tokenizer.json: {exc}") from None
        config: dict[str, Any] = {}
        if tokenizer_config is not None:
            config_path = Path(tokenizer_config)
            try:
                config = json.loads(config_path.read_text(encoding="utf-8"))
            except OSError as exc:
                raise TokenizerError(f"{config_path}: cannot read: {exc.strerror or exc}") from None
            except ValueError as exc:
                raise TokenizerError(f"{config_path}: not JSON: {exc}") from None
            if not isinstance(config, dict):
                raise TokenizerError(f"{config_path}: a tokenizer_config.json holds a JSON object")
        return cls(backend, config, source=str(path))

    def _id_of(self, token: str | None, key: str) -> int | None:
        if token is None:
            return None
        found = self.backend.token_to_id(token)
        if found is None:
            raise TokenizerError(f"{self.source}: {key} {token!r} is not in the vocabulary")
        return int(found)

    # -- encoding ---------------------------------------------------------------------------------------

    def encode_prompt(self, text: str) -> list[int]:
        """A completion prompt's ids: the tokenizer's special tokens added (LLaMA: a BOS first)."""
        ids: list[int] = self.backend.encode(text, add_special_tokens=True).ids
        bos = self.special.bos_id
        if self.add_bos and bos is not None and (not ids or ids[0] != bos):
            ids.insert(0, bos)
        return ids

    def encode_chat(self, messages: Sequence[Mapping[str, Any]], **extra: Any) -> list[int]:
        """A chat's ids: rendered by the chat template (which writes BOS and the roles' markers itself),
        encoded without adding special tokens again, as transformers' ``apply_chat_template`` does."""
        if self.chat_template is None:
            raise TokenizerError(
                f"{self.source}: this tokenizer has no chat template (tokenizer_config.json)"
            )
        text = self.chat_template.render(messages, add_generation_prompt=True, **extra)
        return list(self.backend.encode(text, add_special_tokens=False).ids)

    # -- decoding ---------------------------------------------------------------------------------------

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        return str(self.backend.decode(list(ids), skip_special_tokens=skip_special_tokens))

    def check_vocab(self, model_vocab: int, model: str) -> None:
        """TokenizerError unless every id this tokenizer makes is one the model has: a model's vocabulary
        may be larger (padded to a round size, as many checkpoints are), never smaller."""
        if self.vocab_size > model_vocab:
            raise TokenizerError(
                f"{self.source}: the tokenizer has {self.vocab_size} tokens but model {model!r} has a "
                f"vocabulary of {model_vocab}: ids {model_vocab}..{self.vocab_size - 1} would be out of range"
            )


def _byte_fallback_ids(backend: _HfTokenizer) -> frozenset[int]:
    """The ids of ``<0x00>``..``<0xFF>`` when the model falls back to them (a BPE with ``byte_fallback``)."""
    model = json.loads(backend.model.__getstate__())
    if not model.get("byte_fallback"):
        return frozenset()
    found = (backend.token_to_id(f"<0x{byte:02X}>") for byte in range(256))
    return frozenset(int(i) for i in found if i is not None)


def _token_text(value: object, where: str) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, an AddedToken object, or null."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return str(value["content"])
    raise TokenizerError(f"{where} is {value!r}: a token is a string or an object with 'content'")


def _chat_template(value: object, source: str) -> str | None:
    """tokenizer_config.json's ``chat_template``: a string, or a list of named templates ("default" used)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        named = {item.get("name"): item.get("template") for item in value if isinstance(item, Mapping)}
        template = named.get("default")
        if isinstance(template, str):
            return template
    raise TokenizerError(f"{source}: chat_template is neither a string nor a list with a 'default' template")
