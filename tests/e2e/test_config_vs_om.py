"""A hand-written config that disagrees with its OM, loaded into the real server as an operator would
(issue 9 item 4): ``dims: [-1]`` for an input the OM fixes at 16. The unfixed backend loaded it and
zero-padded a shorter request to 16, answering 200 with a wrong result; the load is now refused, naming
the input, its dim and what the OM says."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

pytestmark = pytest.mark.e2e

LOOSE_CONFIG = """\
name: "identity_loose"
backend: "ge"
max_batch_size: 8
input { name: "INPUT0" data_type: TYPE_FP32 dims: [-1] }
output { name: "OUTPUT0" data_type: TYPE_FP32 dims: [-1] }
instance_group { count: 1 kind: KIND_CPU }
parameters { key: "om_model_path" value { string_value: "identity.om" } }
parameters { key: "gears" value { string_value: "1,2,4,8" } }
parameters { key: "warmup" value { string_value: "0" } }
"""


def test_config_looser_than_the_om_is_refused_at_load_and_never_answers(control_server):
    repository = control_server.triton.options.repository
    model_dir = repository / "identity_loose"
    (model_dir / "1").mkdir(parents=True)
    shutil.copyfile(repository / "identity_cycle" / "1" / "identity.om", model_dir / "1" / "identity.om")
    (model_dir / "config.pbtxt").write_text(LOOSE_CONFIG)
    client = control_server.client("http")
    try:
        with pytest.raises(InferenceServerException) as refused:
            client.load_model("identity_loose")
        message = refused.value.message()
        assert "input 'INPUT0' dim 0 is -1 (any length)" in message, message
        assert "the OM fixes it at 16" in message, message
        # what the client of the unfixed backend got: a [1, 3] request answered 200, zero-padded to 16
        with pytest.raises(InferenceServerException):
            control_server.infer("http", "identity_loose", {"INPUT0": np.ones((1, 3), np.float32)})
        assert control_server.is_ready()
    finally:
        try:
            client.unload_model("identity_loose")
        finally:
            client.close()
            shutil.rmtree(model_dir)
