"""The demo tokenizer: numbers stay numbers, other words hash stably, ids round-trip."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ge_plugin import models
from ge_plugin.demo import tokenizer
from ge_plugin.errors import RequestError


def test_tokenizer_encodes_numbers_as_their_own_ids():
    assert tokenizer.encode("1 2 3") == [1, 2, 3]
    assert tokenizer.encode("  0\t9999\n42 ") == [0, 9999, 42]


def test_tokenizer_decodes_a_counting_prediction_as_digits():
    assert tokenizer.decode([2, 3, 4]) == "2 3 4"


def test_tokenizer_hashes_other_words_above_the_numbers():
    words = ["hello", "world", "10000", "007", "-1", "3.5", "Ünïcode", "<32000>"]
    ids = tokenizer.encode(" ".join(words))
    assert all(tokenizer.NUMBER_LIMIT <= i < tokenizer.VOCAB for i in ids)
    assert len(set(ids)) == len(ids)
    assert tokenizer.encode("hello hello") == [ids[0], ids[0]]


def test_tokenizer_hashed_ids_decode_as_spelled_ids_and_back():
    (hello,) = tokenizer.encode("hello")
    assert tokenizer.decode([hello]) == f"<{hello}>"
    assert tokenizer.encode(f"<{hello}>") == [hello]


def test_tokenizer_hash_does_not_depend_on_the_python_hash_seed():
    code = "from ge_plugin.demo.tokenizer import encode; print(encode('hello ascend triton'))"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert outputs == {f"{tokenizer.encode('hello ascend triton')}\n"}


def test_tokenizer_vocabulary_is_the_llama_vocabulary():
    assert tokenizer.VOCAB == models.LLAMA_VOCAB


@given(st.lists(st.integers(0, tokenizer.VOCAB - 1), max_size=50))
def test_tokenizer_encode_inverts_decode_for_every_id(ids):
    assert tokenizer.encode(tokenizer.decode(ids)) == ids


@given(st.lists(st.integers(0, tokenizer.NUMBER_LIMIT - 1), max_size=50))
def test_tokenizer_decode_inverts_encode_for_numbers(numbers):
    text = " ".join(map(str, numbers))
    assert tokenizer.decode(tokenizer.encode(text)) == text


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ([1, 32000], "token 1 is id 32000, outside the vocabulary [0, 32000)"),
        ([-1], "token 0 is id -1, outside the vocabulary [0, 32000)"),
        ([1, 2, 3.0], "token 2 is 3.0, not an integer id"),
    ],
)
def test_tokenizer_decode_rejects_ids_outside_the_vocabulary(ids, message):
    with pytest.raises(RequestError) as caught:
        tokenizer.decode(ids)
    assert str(caught.value) == message
