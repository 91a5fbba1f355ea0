"""Text in, text out: a checkpoint's tokenizer, its chat template, and a stream decoder that is right at the
edges (split UTF-8 characters, byte-fallback tokens, leading-space markers, special tokens, stop strings).

Knows neither Triton nor HTTP: the front (``serve/front/openai.py``) and the tests use it.
"""

from ge_plugin.text.stream import StopText, StreamDecoder
from ge_plugin.text.tokenizer import Tokenizer

__all__ = ["StopText", "StreamDecoder", "Tokenizer"]
