"""Text of a token stream, piece by piece, that adds up to the tokenizer's own decode of the whole.

A token is not a piece of text: a byte-level or byte-fallback token may hold half of a UTF-8 character, a
SentencePiece token's leading ``▁`` is a space only after another token, and a decoder may clean up around
tokens. So text is never decoded token by token. :class:`StreamDecoder` decodes a short window of ids (the
last few already shown, then the new ones) and sends what the window adds beyond the text of its shown part,
once that text does not end in U+FFFD (a character still incomplete); the window then slides on. This is
the offsets scheme of text-generation-inference and vLLM: a few ids decoded per token, not the whole text.
Should a decoder ever not extend its own earlier text (the window's text not starting with its shown part),
the decoder falls back to decoding the whole and sending the difference, so the stream stays exact.

Byte-fallback tokens (LLaMA-2's ``<0xE4>``) need one more rule: their decoder turns a run of them into text
only once the whole run is valid UTF-8, and into one U+FFFD per byte otherwise, so a character already
complete would become U+FFFD when an invalid byte joins its run. A run's text is sent when the run ends (a
token that is not a byte comes, or the stream ends): one token later than a byte-level tokenizer's.

:class:`StopText` holds back text that could be the start of a stop string, and cuts the stream where the
first stop string ends, without sending the stop string.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

#: what a tokenizer decodes an incomplete UTF-8 sequence to
REPLACEMENT = "\ufffd"
#: ids kept before the new ones when a prompt's tail gives the first generated token its context
CONTEXT_IDS = 6


class Decodes(Protocol):
    #: ids of byte-fallback tokens (``<0x00>``..``<0xFF>``), empty for a tokenizer without them
    byte_fallback_ids: frozenset[int]

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str: ...


class StreamDecoder:
    """``add(ids)`` -> the text those ids complete; ``finish()`` -> what is left (an incomplete tail)."""

    def __init__(self, tokenizer: Decodes, *, context: Sequence[int] = (), skip_special_tokens: bool = True):
        self.tokenizer = tokenizer
        self.skip = skip_special_tokens
        #: ids of the context (a prompt's tail: its text is not sent), then every generated id
        self.ids: list[int] = list(context[-CONTEXT_IDS:])
        self.start = len(self.ids)  #: where generated ids begin
        self.prefix = 0  #: the window starts here
        self.read = self.start  #: ids before this are shown (their text sent)
        self.sent: list[str] = []  #: every piece sent, for the fallback
        self.bytes = tokenizer.byte_fallback_ids

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip)

    def add(self, ids: Iterable[int]) -> str:
        self.ids.extend(ids)
        if len(self.ids) == self.read or self.ids[-1] in self.bytes:
            return ""  # nothing new, or a run of byte tokens that may still turn invalid
        shown = self._decode(self.ids[self.prefix : self.read])
        text = self._decode(self.ids[self.prefix :])
        if text.endswith(REPLACEMENT) or len(text) <= len(shown):
            return ""  # a character still incomplete, or nothing visible yet (a skipped special token)
        if not text.startswith(shown):
            return self._whole(final=False)
        self.prefix, self.read = self.read, len(self.ids)
        return self._sent(text[len(shown) :])

    def finish(self) -> str:
        """The text not sent yet (an incomplete character at the end decodes to U+FFFD, as in the whole)."""
        if len(self.ids) == self.read:
            return ""
        shown = self._decode(self.ids[self.prefix : self.read])
        text = self._decode(self.ids[self.prefix :])
        self.prefix, self.read = self.read, len(self.ids)
        if not text.startswith(shown):
            return self._whole(final=True)
        return self._sent(text[len(shown) :])

    def _whole(self, *, final: bool) -> str:
        """The slow, sure way: the whole generated text's decode, less what was sent."""
        whole = self._decode(self.ids[self.start :])
        if self.start:
            context = self._decode(self.ids[: self.start])
            both = self._decode(self.ids)
            if both.startswith(context):
                whole = both[len(context) :]
        done = "".join(self.sent)
        if not whole.startswith(done) or (not final and whole.endswith(REPLACEMENT)):
            return ""
        self.prefix = self.read = len(self.ids)
        return self._sent(whole[len(done) :])

    def _sent(self, piece: str) -> str:
        if piece:
            self.sent.append(piece)
        return piece


class StopText:
    """Cuts a text stream at the first stop string, which is not sent.

    "First" is where a stop string first ends, reading on character by character as the model writes (ties:
    the one that starts first), so the cut does not depend on how the text was split into pieces."""

    def __init__(self, stops: Sequence[str]):
        self.stops = tuple(s for s in stops if s)
        self.held = ""  #: text that may be the start of a stop string
        self.stopped = False

    def push(self, piece: str) -> str:
        """The text that can be sent now; ``stopped`` turns true when a stop string ended in it."""
        if self.stopped:
            return ""
        if not self.stops:
            return piece
        text = self.held + piece
        best: tuple[int, int] | None = None
        for stop in self.stops:
            at = text.find(stop)
            if at >= 0 and (best is None or (at + len(stop), at) < best):
                best = (at + len(stop), at)
        if best is not None:
            self.stopped = True
            self.held = ""
            return text[: best[1]]
        keep = 0
        for stop in self.stops:
            for size in range(min(len(stop) - 1, len(text)), keep, -1):
                if text.endswith(stop[:size]):
                    keep = size
                    break
        self.held = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def finish(self) -> str:
        """What was held back, at the end of a stream that met no stop string."""
        held, self.held = self.held, ""
        return "" if self.stopped else held
