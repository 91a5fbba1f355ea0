"""The decoupled adapter of a generating model (backend/generate.py) against the stand-in pb_utils.

What a request object holds lives in the stub's shared memory: an InferenceRequest still alive when the stub's
interpreter finalizes is destroyed after that memory is gone, and the stub dies of SIGSEGV on its way out
(seen as ``triton_python_b ... segfault`` in the kernel log at every stop of a server that had generated).
So a request must be freed as soon as it is answered, by reference counting, not by a later garbage
collection."""

from __future__ import annotations

import gc
import json
import shutil
import time
import weakref

import attrs
import numpy as np
import pytest

from ge_plugin.generate import GenerateConfig


@pytest.fixture
def generating_args(oms, tmp_path) -> dict[str, str]:
    version = tmp_path / "gen" / "1"
    version.mkdir(parents=True)
    shutil.copyfile(oms["llama_kv"], version / "gen.om")
    generate = json.dumps(attrs.asdict(GenerateConfig(form="stacked", max_tokens=4)))
    config = {
        "name": "gen",
        "backend": "ge",
        "model_transaction_policy": {"decoupled": True},
        "parameters": {
            "om_model_path": {"string_value": "gen.om"},
            "generate": {"string_value": generate},
            "metrics_interval_ms": {"string_value": "3600000"},
        },
    }
    return {
        "model_config": json.dumps(config),
        "model_instance_name": "npu0_0",
        "model_repository": str(tmp_path / "gen"),
        "model_version": "1",
        "model_name": "gen",
    }


def _wait_final(request, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not any(flags for _, flags in request.sender.sent):
        assert time.monotonic() < deadline, request.sender.sent
        time.sleep(0.01)


def test_an_answered_request_is_freed_at_once_not_by_a_later_collection(pb_utils, generating_args):
    from ge_plugin.backend.generate import GenerateModel

    model = GenerateModel(pb_utils, generating_args, json.loads(generating_args["model_config"]))
    gc.disable()  # what the stub's finalisation would meet: only reference counting frees
    try:
        request = pb_utils.InferenceRequest({"input_ids": np.arange(3, 19, dtype=np.int64)})
        model.execute([request])
        _wait_final(request)
        assert request.sender.sent[-1][0].output_tensors()[0].as_numpy().size > 0
        gone = weakref.ref(request)
        del request
        deadline = time.monotonic() + 5
        while gone() is not None and time.monotonic() < deadline:
            time.sleep(0.01)  # the sender thread drops its last reference once it has answered
        assert gone() is None, gc.get_referrers(gone())
    finally:
        gc.enable()
        model.finalize()
