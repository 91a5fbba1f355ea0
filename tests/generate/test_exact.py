"""Item 5 of issue 29: greedy generation through the KV cache on the device equals the full recompute,
token for token and logits within 1e-4, for 32 prompts of different lengths joining and leaving while
others run; on both OM forms and on both fast-path implementations."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

from ge_plugin import fastpath
from ge_plugin.generate import Generator, SamplingParams
from ge_plugin.models import llama_kv

from .conftest import CONFIGS

CONTEXT = 64


def _prompts() -> list[tuple[np.ndarray, int]]:
    """32 (prompt, max_tokens): lengths 1 to 47, outputs 1 to 16, one prompt whose copy reaches EOS."""
    rng = np.random.default_rng(29)
    cases = []
    for n in range(32):
        length = 1 + (n * 11) % 47
        prompt = rng.integers(3, llama_kv.VOCAB, length)
        cases.append((prompt, 1 + (n * 5) % 16))
    eos_prompt = rng.integers(3, llama_kv.VOCAB, 20)
    eos_prompt[20 - llama_kv.COPY_DISTANCE + 2] = llama_kv.EOS_ID  # copied as the 4th generated token
    cases[7] = (eos_prompt, 16)
    return cases


@pytest.mark.parametrize("impl", [fastpath.COMPILED, fastpath.TWIN], ids=str)
@pytest.mark.parametrize("om_name", list(CONFIGS))
@pytest.mark.parametrize("prefill_tokens", [256, 4], ids=["prefill256", "prefill4"])
def test_32_prompts_joining_and_leaving_equal_the_full_recompute(
    oms, full_recompute, om_name, impl, prefill_tokens
):
    """With 4 prefill tokens a step, each prompt takes one chunk a step, so a prompt is half prefilled while
    others decode, finish and leave (its partial keys/values move slot with it)."""
    config = attrs.evolve(CONFIGS[om_name], prefill_tokens_per_step=prefill_tokens)
    generator = Generator(str(oms[om_name]), config, fastpath=impl.load())
    try:
        assert generator.layout.slots == 32 and generator.layout.context == CONTEXT
        cases = _prompts()
        finishes: dict[int, list[str]] = {}
        sequences = []

        def submit(batch):
            for prompt, max_tokens in batch:
                sequence = generator.submit(
                    prompt,
                    SamplingParams(max_tokens=max_tokens),
                    lambda s, ids, finish: finishes.setdefault(id(s), []).append(finish),
                    record=True,
                )
                sequences.append(sequence)

        submit(cases[:12])
        active_sizes = []
        #: (prefilling sequence, its slot) after each step: a prompt half prefilled, and whether it moved
        halfway: list[tuple[int, int]] = []

        def step() -> None:
            generator.step()
            active_sizes.append(len(generator.active))
            if generator.prefilling is not None and generator.active:
                halfway.append((id(generator.prefilling), generator.prefilling.slot))

        for _ in range(3):
            step()
        submit(cases[12:22])  # join while the first ones decode
        for _ in range(2):
            step()
        submit(cases[22:])
        while not generator.idle:
            step()
        assert len(set(active_sizes)) > 5  # sequences really joined and left
        if prefill_tokens == 256:
            assert max(active_sizes) > 12
        else:  # prompts prefilled over steps beside decoding ones, some moving slot as others left
            slots: dict[int, set[int]] = {}
            for key, slot in halfway:
                slots.setdefault(key, set()).add(slot)
            assert len(slots) > 5 and any(len(seen) > 1 for seen in slots.values())

        worst = 0.0
        for (prompt, max_tokens), sequence in zip(cases, sequences):
            tokens, rows = full_recompute(prompt, max_tokens)
            assert sequence.generated == tokens, f"prompt of {prompt.size}: {sequence.generated} != {tokens}"
            worst = max(worst, max(float(np.abs(a - b).max()) for a, b in zip(sequence.logits, rows)))
            expected = "stop" if tokens[-1] == llama_kv.EOS_ID else "length"
            assert finishes[id(sequence)][-1] == expected
            assert all(f == "" for f in finishes[id(sequence)][:-1])
        assert worst <= 1e-4
        assert sequences[7].finish == "stop" and len(sequences[7].generated) == 4
    finally:
        generator.close()
