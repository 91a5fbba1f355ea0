"""The stream decoder and the stop strings, property-tested against the tokenizer's own full decode.

Whatever the ids (random ones too: a sampling model writes invalid UTF-8 byte sequences as readily as
valid ones) and however they arrive (one per response, several, all at once), the pieces sent add up to
``decode(ids)``: no character is broken in a piece and none is sent twice."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ge_plugin.text.stream import StopText, StreamDecoder

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
TEXT = st.text(
    st.sampled_from(
        [*"abc xyz.,!\n", "é", "ß", "世", "界", "🙂", "👍", "\U0001f3fd", "€", "\u0301", "\ufffd", "ç"]
    ),
    max_size=40,
)


def chunked(ids: list[int], cuts: list[int]) -> list[list[int]]:
    """``ids`` split at the positions ``cuts`` names (taken modulo the length)."""
    points = sorted({c % (len(ids) + 1) for c in cuts} | {0, len(ids)})
    return [ids[a:b] for a, b in itertools.pairwise(points)]


def streamed(tokenizer, chunks, **kwargs) -> list[str]:
    decoder = StreamDecoder(tokenizer, **kwargs)
    pieces = [decoder.add(chunk) for chunk in chunks]
    pieces.append(decoder.finish())
    return pieces


@pytest.fixture(params=["demo", "llama"])
def tokenizer(request, demo_tokenizer, llama_tokenizer):
    return demo_tokenizer if request.param == "demo" else llama_tokenizer


@SETTINGS
@given(data=st.data())
def test_stream_decoder_random_ids_add_up_to_the_full_decode(tokenizer, data):
    ids = data.draw(st.lists(st.integers(0, tokenizer.vocab_size - 1), max_size=30))
    cuts = data.draw(st.lists(st.integers(0, 40), max_size=10))
    skip = data.draw(st.booleans())
    pieces = streamed(tokenizer, chunked(ids, cuts), skip_special_tokens=skip)
    assert "".join(pieces) == tokenizer.decode(ids, skip_special_tokens=skip)


@SETTINGS
@given(text=TEXT, cuts=st.lists(st.integers(0, 60), max_size=12))
def test_stream_decoder_text_round_trips_one_token_at_a_time_and_in_chunks(tokenizer, text, cuts):
    ids = tokenizer.backend.encode(text, add_special_tokens=False).ids
    whole = tokenizer.decode(ids)
    one_by_one = streamed(tokenizer, [[i] for i in ids])
    assert "".join(one_by_one) == whole
    assert "".join(streamed(tokenizer, chunked(ids, cuts))) == whole
    # never a broken character: each piece is valid text of the whole, and a piece that holds U+FFFD holds
    # it because the text does
    for piece in one_by_one:
        assert "\ufffd" not in piece or "\ufffd" in text


@SETTINGS
@given(prompt=TEXT, text=TEXT)
def test_stream_decoder_after_a_prompt_sends_the_text_the_prompt_continues_with(tokenizer, prompt, text):
    """With the prompt's tail as context, a first generated token's leading-space marker is the space it is
    after the prompt (SentencePiece's decoder drops it at the start of a text)."""
    context = tokenizer.encode_prompt(prompt)
    ids = tokenizer.backend.encode(" " + text, add_special_tokens=False).ids
    both = tokenizer.decode(context + ids)
    before = tokenizer.decode(context)
    pieces = streamed(tokenizer, [[i] for i in ids], context=context)
    if both.startswith(before):
        assert "".join(pieces) == both[len(before) :]


def test_stream_decoder_holds_a_split_character_until_it_is_whole(demo_tokenizer):
    ids = demo_tokenizer.backend.encode("🙂", add_special_tokens=False).ids
    assert len(ids) > 1  # the emoji spans tokens, or this test proves nothing
    decoder = StreamDecoder(demo_tokenizer)
    assert [decoder.add([i]) for i in ids] == [""] * (len(ids) - 1) + ["🙂"]


def test_stream_decoder_byte_fallback_run_is_sent_when_it_ends(llama_tokenizer):
    """``<0xE2><0x82><0xAC>`` is one €, sent with the next token that is not a byte (a later invalid byte in
    the same run would have made the tokenizer decode all of it as U+FFFD)."""
    backend = llama_tokenizer.backend
    tokens = [backend.token_to_id(f"<0x{b:02X}>") for b in "€".encode()]
    decoder = StreamDecoder(llama_tokenizer)
    assert [decoder.add([t]) for t in tokens] == ["", "", ""]
    assert decoder.add([backend.token_to_id("a")]) == "€a"
    decoder = StreamDecoder(llama_tokenizer)
    assert [decoder.add([t]) for t in [*tokens, tokens[0]]] == [""] * 4
    assert decoder.finish() == llama_tokenizer.decode([*tokens, tokens[0]]) == "\ufffd" * 4


def test_stream_decoder_incomplete_tail_ends_as_the_full_decode_does(demo_tokenizer):
    ids = demo_tokenizer.backend.encode("a🙂", add_special_tokens=False).ids[:-1]
    decoder = StreamDecoder(demo_tokenizer)
    pieces = [decoder.add([i]) for i in ids] + [decoder.finish()]
    assert "".join(pieces) == demo_tokenizer.decode(ids) == "a\ufffd"


def test_stream_decoder_skips_special_tokens(demo_tokenizer):
    decoder = StreamDecoder(demo_tokenizer)
    hello = demo_tokenizer.backend.encode("hi", add_special_tokens=False).ids
    assert decoder.add([1]) == "" and "".join(decoder.add([i]) for i in hello) == "hi"
    assert decoder.add([2]) == "" and decoder.finish() == ""


# -- stop strings ------------------------------------------------------------------------------------------


def first_stop(text: str, stops: list[str]) -> tuple[str, bool]:
    """The reference: read the text character by character; stop as soon as what was read ends with a stop
    string (the longest, when two end there), cutting it off."""
    for end in range(1, len(text) + 1):
        ended = [s for s in stops if s and text[:end].endswith(s)]
        if ended:
            return text[: end - max(map(len, ended))], True
    return text, False


STOP_ALPHABET = st.sampled_from([*"ab c", "é", "🙂"])


@settings(max_examples=400, deadline=None)
@given(
    text=st.text(STOP_ALPHABET, max_size=30),
    stops=st.lists(st.text(STOP_ALPHABET, min_size=1, max_size=4), max_size=4),
    cuts=st.lists(st.integers(0, 40), max_size=10),
)
def test_stop_text_cuts_where_the_first_stop_string_ends_however_the_text_is_split(text, stops, cuts):
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    stop = StopText(stops)
    sent = "".join(stop.push(text[a:b]) for a, b in itertools.pairwise(points)) + stop.finish()
    expected, stopped = first_stop(text, stops)
    assert (sent, stop.stopped) == (expected, stopped)


def test_stop_text_spanning_pieces_is_not_sent():
    stop = StopText(["\nUser:"])
    assert stop.push("Sure.\nUs") == "Sure."
    assert stop.push("er: next") == ""
    assert stop.stopped and stop.finish() == ""


def test_stop_text_false_start_is_sent_once_it_cannot_be_a_stop():
    stop = StopText(["END"])
    assert stop.push("the EN") == "the "
    assert stop.push("Dless") == ""  # "ENDless" holds END
    stop = StopText(["END"])
    assert stop.push("the EN") == "the "
    assert stop.push("d") == "ENd"
