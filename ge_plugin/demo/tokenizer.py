"""A toy whitespace tokenizer that makes the counting tiny LLaMA readable in a demo.

The tiny LLaMA predicts ``id + 1`` after every token (see docs/models.md), so the tokenizer keeps numbers
visible: a word that is a plain decimal number below ``NUMBER_LIMIT`` is its own id (``"1 2 3"`` ->
``[1, 2, 3]``, and the model's predictions decode to ``"2 3 4"``). Any other word gets a stable hashed id in
``[NUMBER_LIMIT, VOCAB)`` and decodes as ``<id>``; ``<id>`` encodes back to ``id``, so ``encode(decode(ids))``
returns ``ids`` for every valid id. The hash is blake2b, not ``hash()``, whose per-process salt would give a
different id on every run. Distinct words may share a hashed id; it is a demo, not a vocabulary.
"""

from __future__ import annotations

import hashlib
import operator
import re
from collections.abc import Iterable

from ge_plugin.errors import RequestError

#: the tiny LLaMA's vocabulary size; ids are in [0, VOCAB)
VOCAB = 32000
#: words "0" .. "9999" are their own ids; every other word hashes into [NUMBER_LIMIT, VOCAB)
NUMBER_LIMIT = 10000

_NUMBER = re.compile(r"0|[1-9][0-9]{0,3}")  # canonical decimals below 10000: no sign, no leading zeros
_SPELLED_ID = re.compile(r"<(0|[1-9][0-9]{0,4})>")


def encode(text: str) -> list[int]:
    """Token ids of the whitespace-separated words of ``text``."""
    return [word_id(word) for word in text.split()]


def decode(ids: Iterable[int]) -> str:
    """Numbers below ``NUMBER_LIMIT`` as digits, other ids as ``<id>``, joined by single spaces."""
    words = []
    for position, value in enumerate(ids):
        try:
            token = operator.index(value)
        except TypeError:
            raise RequestError(f"token {position} is {value!r}, not an integer id") from None
        if not 0 <= token < VOCAB:
            raise RequestError(f"token {position} is id {token}, outside the vocabulary [0, {VOCAB})")
        words.append(str(token) if token < NUMBER_LIMIT else f"<{token}>")
    return " ".join(words)


def word_id(word: str) -> int:
    """The id of one word (no whitespace inside)."""
    if _NUMBER.fullmatch(word):
        return int(word)
    spelled = _SPELLED_ID.fullmatch(word)
    if spelled and int(spelled.group(1)) < VOCAB:
        return int(spelled.group(1))
    digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
    return NUMBER_LIMIT + int.from_bytes(digest, "big") % (VOCAB - NUMBER_LIMIT)
