"""The loops benchmarks/generate.py compares ge-plugin with are what the issue names: (b) static batching runs
a batch until its longest member ends, every decode step on the gear holding the whole batch, after every
member's prefill; (a) moves each decode step's keys and values through the host."""

from __future__ import annotations

import attrs
import numpy as np

from benchmarks.generate import PublicLoop, StaticBatching
from ge_plugin.generate import SamplingParams
from ge_plugin.models import llama_kv
from ge_plugin.sim import counters

from .conftest import CONFIGS


def _prompt(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(3, llama_kv.VOCAB, n)


def test_static_batching_decodes_the_whole_batch_until_its_longest_member_ends(oms):
    config = attrs.evolve(CONFIGS["llama_kv"], prefill_tokens_per_step=10_000)
    engine = StaticBatching(str(oms["llama_kv"]), config)
    try:
        outputs = (2, 9, 5)
        sequences = [
            engine.submit(
                _prompt(6 + n, n), SamplingParams(max_tokens=count, ignore_eos=True), lambda *a: None
            )
            for n, count in enumerate(outputs)
        ]
        device = counters.device(0)
        engine.step()  # every member prefilled, its first token; nothing decoded yet
        assert engine.stats.decode_executes == 0 and all(len(s.generated) == 1 for s in sequences)
        executes = dict(device.executes_by_gear)
        late = engine.submit(_prompt(7, 9), SamplingParams(max_tokens=3), lambda *a: None)
        while engine.active:
            engine.step()
        decoded = {
            gear: n - executes.get(gear, 0)
            for gear, n in device.executes_by_gear.items()
            if n > executes.get(gear, 0)
        }
        context = engine.layout.context
        assert decoded == {f"4,1,4,{context + 1},4,1,4": max(outputs) - 1}  # gear 4 holds 3, ended ones too
        assert [len(s.generated) for s in sequences] == list(outputs)
        assert late.generated == [] and list(engine.waiting) == [late]  # it waited for the whole batch
        engine.run_until_idle()
    finally:
        engine.close()


def test_the_public_loop_moves_the_cache_through_the_host_every_step(oms):
    engine = PublicLoop(str(oms["llama_kv"]), CONFIGS["llama_kv"])
    try:
        engine.submit(_prompt(8, 1), SamplingParams(max_tokens=4), lambda *a: None)
        engine.step()
        device = counters.device(0)
        before = dict(device.memcpy_bytes)
        engine.step()
        moved = engine.cache.slot_bytes * engine.cache.blocks  # one sequence's keys and values
        assert device.memcpy_bytes["d2h"] - before["d2h"] >= moved
        assert device.memcpy_bytes["h2d"] - before["h2d"] >= moved
    finally:
        engine.close()
