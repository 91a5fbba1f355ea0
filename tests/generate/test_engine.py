"""The generation engine's promises besides exactness: what crosses the host boundary per step, no
allocation per step, limits and errors, sampling, stop ids, cancellation, the OM checks."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

from ge_plugin.errors import RequestError, UnavailableError
from ge_plugin.generate import GenerateConfig, Generator, LayoutError, SamplingParams
from ge_plugin.models import llama_kv
from ge_plugin.sim import counters, device_time

from .conftest import CONFIGS

CONTEXT = 64


@pytest.fixture(params=list(CONFIGS))
def generator(request, oms):
    engine = Generator(str(oms[request.param]), CONFIGS[request.param])
    yield engine
    engine.close()


def _collect():
    events: list[tuple[list[int], str]] = []
    return events, lambda sequence, ids, finish: events.append((ids, finish))


def _prompt(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(3, llama_kv.VOCAB, n)


def test_a_decode_step_moves_only_ids_positions_masks_and_logits_and_allocates_nothing(generator):
    for n in range(5):
        generator.submit(_prompt(10 + n, n), SamplingParams(max_tokens=40), lambda *a: None)
    generator.step()  # prefills, and the first tokens
    generator.step()  # a decode step
    device, pinned = counters.device(0), counters.host_pinned
    before = (device.mallocs, pinned.mallocs, dict(device.memcpy_bytes), device.executes)
    steps = 6
    for _ in range(steps):
        generator.step()
    assert (device.mallocs, pinned.mallocs) == before[:2]  # 0 allocations per step
    assert device.executes - before[3] == steps  # one decode execute per step for the 5 sequences
    batch = 8  # the smallest batch gear holding 5
    per_step_h2d = batch * 8 + batch * 8 + batch * (CONTEXT + 1) * 8  # ids, positions, mask rows
    h2d = device.memcpy_bytes["h2d"] - before[2]["h2d"]
    d2h = device.memcpy_bytes["d2h"] - before[2]["d2h"]
    assert h2d == steps * per_step_h2d  # no key/value byte from the host
    assert d2h == steps * 5 * llama_kv.VOCAB * 4  # the 5 sequences' logits rows, nothing else
    assert device.memcpy_bytes["d2d"] > before[2]["d2d"]  # the new keys/values went device to device


@pytest.mark.parametrize("om_name", list(CONFIGS))
def test_a_long_prompt_is_prefilled_a_budget_a_step_while_the_others_decode(oms, om_name):
    """prefill_tokens_per_step bounds how long a step keeps the decoding sequences waiting: a 50-token
    prompt on seq gears (1, 4, 16) with 16 tokens a step takes 4 steps (16, 16, 16, then 2 on gear 4), and
    the sequence already decoding gets a token at each of them."""
    config = attrs.evolve(CONFIGS[om_name], prefill_tokens_per_step=16)
    engine = Generator(str(oms[om_name]), config)
    try:
        decoding = engine.submit(_prompt(6), SamplingParams(max_tokens=40), lambda *a: None)
        engine.step()
        assert engine.active == [decoding] and len(decoding.generated) == 1
        events, listener = _collect()
        long = engine.submit(_prompt(50, 1), SamplingParams(max_tokens=3), listener)
        prefills = [engine.stats.prefill_executes]
        for _ in range(4):
            engine.step()
            prefills.append(engine.stats.prefill_executes)
            assert engine.stats.decode_executes == len(prefills) - 1  # a decode step every step
        assert prefills == [prefills[0] + n for n in range(5)]  # one 16-token chunk a step, then 2 tokens
        assert engine.prefilling is None and engine.active == [decoding, long]
        assert long.cached == 50 and events == [([long.generated[0]], "")]  # its first token, at the end
        assert len(decoding.generated) == 5
        engine.run_until_idle()
        assert long.finish == "length" and len(long.generated) == 3
    finally:
        engine.close()


def test_a_sequence_cancelled_while_its_prompt_is_prefilled_frees_its_slot(oms):
    engine = Generator(str(oms["llama_kv"]), attrs.evolve(CONFIGS["llama_kv"], prefill_tokens_per_step=4))
    try:
        events, listener = _collect()
        long = engine.submit(_prompt(40), SamplingParams(max_tokens=5), listener)
        engine.step()
        assert engine.prefilling is long and long.slot == 0 and 0 < long.cached < 40
        engine.cancel(long)
        after = engine.submit(_prompt(3, 2), SamplingParams(max_tokens=2), lambda *a: None)
        engine.step()
        assert events == [([], "cancelled")] and long.slot == -1
        assert engine.prefilling is None and engine.active == [after] and after.slot == 0
        engine.run_until_idle()
        assert after.finish == "length" and engine.idle
    finally:
        engine.close()


def test_the_models_acl_json_initialises_pyacl(oms):
    """A spec's acl_json reaches acl.init for a generating model too (here: the simulator's device time)."""
    config = '{"ge_plugin_sim": {"execute_latency_ms": 7}}'
    engine = Generator(str(oms["llama_kv"]), CONFIGS["llama_kv"], acl_json=config)
    try:
        assert device_time.profile().base_ms == 7
    finally:
        engine.close()


def test_a_prompt_longer_than_the_context_is_refused_naming_the_limit(generator):
    with pytest.raises(RequestError, match=r"65 tokens, longer than the model's context of 64 tokens"):
        generator.submit(_prompt(CONTEXT + 1), SamplingParams(), lambda *a: None)
    with pytest.raises(RequestError, match="empty"):
        generator.submit([], SamplingParams(), lambda *a: None)
    with pytest.raises(RequestError, match=r"token ids in \[0, 511\]"):
        generator.submit([5, 512], SamplingParams(), lambda *a: None)
    assert generator.idle  # nothing half-queued


def test_a_prompt_that_fills_the_context_ends_with_length(generator):
    events, listener = _collect()
    generator.submit(_prompt(CONTEXT - 2), SamplingParams(max_tokens=50), listener)
    generator.run_until_idle()
    assert [len(ids) for ids, _ in events] == [1, 1, 1]  # positions 62 and 63 cached, then no room
    assert events[-1][1] == "length"


def test_bad_sampling_values_are_request_errors():
    for bad in ({"max_tokens": 0}, {"temperature": -1.0}, {"top_p": 0.0}, {"top_p": 1.5}, {"top_k": -2}):
        with pytest.raises(RequestError):
            SamplingParams(**bad)


def test_seeded_sampling_is_reproducible_whatever_runs_beside_it(generator):
    params = SamplingParams(max_tokens=12, temperature=1.5, top_k=50, top_p=0.9, seed=7)
    alone = generator.submit(_prompt(9), params, lambda *a: None)
    generator.run_until_idle()
    crowd = [
        generator.submit(_prompt(5 + n, 100 + n), SamplingParams(max_tokens=12), lambda *a: None)
        for n in range(6)
    ]
    again = generator.submit(_prompt(9), params, lambda *a: None)
    other = generator.submit(
        _prompt(9), SamplingParams(max_tokens=12, temperature=1.5, seed=8), lambda *a: None
    )
    generator.run_until_idle()
    assert again.generated == alone.generated
    assert other.generated != alone.generated
    assert all(len(s.generated) == 12 for s in crowd)


def test_stop_ids_and_ignore_eos(generator):
    prompt = _prompt(20)
    prompt[20 - 1 - llama_kv.COPY_DISTANCE] = llama_kv.EOS_ID  # the first generated token is EOS
    prompt[20 - 1 - llama_kv.COPY_DISTANCE + 2] = 77  # the third
    stopped = generator.submit(prompt, SamplingParams(max_tokens=8), lambda *a: None)
    ignoring = generator.submit(
        prompt, SamplingParams(max_tokens=8, ignore_eos=True, stop_ids=(77,)), lambda *a: None
    )
    generator.run_until_idle()
    assert stopped.generated == [llama_kv.EOS_ID] and stopped.finish == "stop"
    assert ignoring.generated[-1] == 77 and len(ignoring.generated) == 3 and ignoring.finish == "stop"


def test_a_cancelled_sequence_leaves_at_the_next_step_and_frees_its_slot(generator):
    events, listener = _collect()
    long = generator.submit(_prompt(8), SamplingParams(max_tokens=50), listener)
    other = generator.submit(_prompt(8, 1), SamplingParams(max_tokens=50), lambda *a: None)
    generator.step()
    generator.step()
    assert len(generator.active) == 2
    generator.cancel(long)
    generator.step()
    assert generator.active == [other] and other.slot == 0
    assert events[-1] == ([], "cancelled")
    queued = generator.submit(_prompt(8, 2), SamplingParams(), listener)
    generator.cancel(queued)
    generator.step()
    assert events[-1] == ([], "cancelled") and queued not in generator.active


def test_a_full_queue_is_unavailable(oms):
    engine = Generator(str(oms["llama_kv"]), GenerateConfig(max_queue=2))
    try:
        engine.submit(_prompt(4), SamplingParams(), lambda *a: None)
        engine.submit(_prompt(4), SamplingParams(), lambda *a: None)
        with pytest.raises(UnavailableError, match="slots is busy"):
            engine.submit(_prompt(4), SamplingParams(), lambda *a: None)
    finally:
        engine.close()


def test_an_om_that_does_not_fit_the_config_is_refused_naming_every_tensor(oms):
    wrong = GenerateConfig(form="stacked", attention_mask="mask", logits="scores")
    with pytest.raises(LayoutError) as caught:
        Generator(str(oms["llama_kv"]), wrong)
    wheres = [where for where, _ in caught.value.problems]
    assert wheres == ["attention_mask", "logits"]
    assert "the OM has no input 'mask'" in str(caught.value)
    with pytest.raises(LayoutError, match=r"must have 6 dims"):
        Generator(str(oms["llama_kv_layers"]), GenerateConfig(form="stacked", past="past_key_values.0.key"))
    with pytest.raises(LayoutError, match=r"no input .attention_mask. \(its inputs: input_ids\)"):
        Generator(str(oms["llama"]), GenerateConfig(form="stacked"))
    assert counters.device(0).live_bytes == 0  # nothing left allocated by the failed loads
