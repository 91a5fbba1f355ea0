"""The tiny LLaMA (ge_plugin.models) through the simulator equals onnxruntime run directly."""

from __future__ import annotations

import numpy as np
import pytest

from ge_plugin.models import LLAMA_VOCAB, tiny_llama


@pytest.fixture(scope="module")
def llama(tmp_path_factory, graphs):
    directory = tmp_path_factory.mktemp("llama")
    model = tiny_llama()
    path = graphs.build_om(
        directory,
        "llama",
        model,
        "--input_shape=input_ids:-1,-1",
        "--input_format=ND",
        "--dynamic_dims=1,8;2,8;2,16",
        "--precision_mode=must_keep_origin_dtype",
    )
    return model, path


@pytest.mark.parametrize("batch, seq", [(1, 8), (2, 16)])
def test_tiny_llama_through_the_simulator_equals_onnxruntime(acl, load, llama, graphs, batch, seq):
    model, path = llama
    ids = np.random.default_rng(seq).integers(0, LLAMA_VOCAB, (batch, seq)).astype(np.int64)
    om = load(path)
    dims = {"dimCount": 2, "name": "", "dims": [batch, seq]}
    assert acl.mdl.set_input_dynamic_dims(om.id, om.inputs[0], om.mbatch, dims) == 0
    (logits,) = om.run([ids])
    (want,) = graphs.reference(model, {"input_ids": ids})
    assert logits.shape == (batch, seq, LLAMA_VOCAB)
    np.testing.assert_array_equal(logits, want)
    np.testing.assert_array_equal(logits.argmax(-1), (ids + 1) % LLAMA_VOCAB)  # the model counts


def test_tiny_llama_with_a_padded_batch(acl, load, llama, graphs):
    """A request of batch 1 served by the (2, 8) gear: the real row is what batch 1 alone gives."""
    model, path = llama
    ids = np.arange(3, 11, dtype=np.int64).reshape(1, 8)
    padded = np.zeros((2, 8), np.int64)
    padded[:1] = ids
    om = load(path)
    assert (
        acl.mdl.set_input_dynamic_dims(om.id, om.inputs[0], om.mbatch, {"dimCount": 2, "dims": [2, 8]}) == 0
    )
    (logits,) = om.run([padded])
    np.testing.assert_allclose(
        logits[:1], graphs.reference(model, {"input_ids": ids})[0], rtol=1e-5, atol=1e-5
    )
