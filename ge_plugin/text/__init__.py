"""Text in, text out: a checkpoint's tokenizer (``text.tokenizer``), its chat template (``text.chat``), a
stream decoder that is right at the edges (``text.stream``: split UTF-8 characters, byte-fallback tokens,
leading-space markers, special tokens, stop strings), the demo LLaMA's tokenizer (``text.demo``) and where a
model repository keeps a model's tokenizer (``text.files``).

Knows neither Triton nor HTTP. Importing this package imports nothing heavy: ``text.files`` is read by the
renderer and the front, which must not need the ``tokenizers`` library for a model without a tokenizer.
"""
