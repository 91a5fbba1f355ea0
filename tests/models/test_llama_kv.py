"""The generating LLaMA: it copies from far back, and its two cache forms equal the cache-free reference."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from ge_plugin.models import llama_kv as K

CONTEXT = 48


def _session(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def sessions():
    return {form: _session(K._build(form)) for form in K.FORMS}


@pytest.fixture(scope="module")
def prompt():
    return np.random.default_rng(3).integers(3, K.VOCAB, (2, 40))


def test_the_next_token_is_the_one_copy_distance_back(sessions, prompt):
    logits = sessions["full"].run(None, {"input_ids": prompt})[0]
    predicted = logits[:, K.COPY_DISTANCE :].argmax(-1)
    assert (predicted == prompt[:, : -K.COPY_DISTANCE]).all()
    top2 = np.sort(logits[:, K.COPY_DISTANCE :], axis=-1)[..., -2:]
    assert (top2[..., 1] - top2[..., 0]).min() > 2.0  # a margin no rounding can flip


def _stacked_step(session, past, chunk, cached):
    batch, seq = chunk.shape
    mask = np.zeros((batch, CONTEXT + seq), np.int64)
    mask[:, :cached] = 1
    mask[:, CONTEXT:] = 1
    positions = np.broadcast_to(np.arange(cached, cached + seq), (batch, seq))
    feeds = {"input_ids": chunk, "attention_mask": mask, "position_ids": positions}
    return feeds


@pytest.mark.parametrize("form", ["stacked", "per_layer"])
def test_cached_forms_in_chunks_equal_the_full_recompute(sessions, prompt, form):
    reference = sessions["full"].run(None, {"input_ids": prompt})[0]
    batch = prompt.shape[0]
    stacked = np.zeros((K.LAYERS, 2, batch, K.HEADS, CONTEXT, K.HEAD_DIM), np.float32)
    cached, pieces = 0, []
    for end in (16, 17, 18, 33, 40):
        chunk = prompt[:, cached:end]
        feeds = _stacked_step(sessions[form], stacked, chunk, cached)
        if form == "stacked":
            feeds["past_key_values"] = stacked
        else:
            for layer in range(K.LAYERS):
                feeds[f"past_key_values.{layer}.key"] = np.ascontiguousarray(stacked[layer, 0])
                feeds[f"past_key_values.{layer}.value"] = np.ascontiguousarray(stacked[layer, 1])
        logits, *presents = sessions[form].run(None, feeds)
        new = (
            presents[0] if form == "stacked" else np.stack(presents).reshape(K.LAYERS, 2, *presents[0].shape)
        )
        assert new.shape == (K.LAYERS, 2, batch, K.HEADS, end - cached, K.HEAD_DIM)
        stacked[:, :, :, :, cached:end] = new
        pieces.append(logits)
        cached = end
    np.testing.assert_allclose(np.concatenate(pieces, axis=1), reference, rtol=0, atol=1e-4)


def test_a_lost_cache_entry_changes_the_generated_ids(sessions, prompt):
    # What "a broken cache must change the text" means: drop one cached position and the copy goes wrong.
    batch, seq = prompt.shape
    stacked = np.zeros((K.LAYERS, 2, batch, K.HEADS, CONTEXT, K.HEAD_DIM), np.float32)
    feeds = _stacked_step(sessions["stacked"], stacked, prompt, 0)
    feeds["past_key_values"] = stacked
    _, present = sessions["stacked"].run(None, feeds)
    stacked[:, :, :, :, :seq] = present
    step = prompt[:, -1:] * 0 + 5
    feeds = _stacked_step(sessions["stacked"], stacked, step, seq)
    feeds["past_key_values"] = stacked
    good = sessions["stacked"].run(None, feeds)[0][:, -1].argmax(-1)
    assert (good == prompt[:, seq - K.COPY_DISTANCE]).all()
    feeds["attention_mask"][:, seq - K.COPY_DISTANCE] = 0
    broken = sessions["stacked"].run(None, feeds)[0][:, -1].argmax(-1)
    assert (broken != good).all()


def test_the_per_layer_form_uses_hugging_face_names():
    model = K.tiny_llama_kv_layers()
    inputs = [i.name for i in model.graph.input]
    outputs = [o.name for o in model.graph.output]
    assert inputs == ["input_ids", "attention_mask", "position_ids"] + [
        f"past_key_values.{n}.{part}" for n in range(K.LAYERS) for part in ("key", "value")
    ]
    assert outputs == ["logits"] + [
        f"present.{n}.{part}" for n in range(K.LAYERS) for part in ("key", "value")
    ]
