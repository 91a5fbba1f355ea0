"""The device-time knobs reach Triton's stub processes, and two instances on one device take turns.

A real tritonserver serves the identity model with two instances on device 0 (two Python-backend stub
processes). The device time comes from the server's environment (GE_PLUGIN_SIM_EXECUTE_LATENCY_MS), timing-only
mode and the lock directory from the model's ``acl_json``: both ways a bench configures a device profile.
Each stub writes its counters at finalize; their compute windows on device 0 must never overlap.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ge_plugin.atc.command import atc_args
from ge_plugin.atc.flags import parse_args
from ge_plugin.atc.simbuild import build
from ge_plugin.models import write_demo_models
from ge_plugin.render import write_repository
from ge_plugin.serve import ServerOptions, TritonServer, free_port
from ge_plugin.spec import load_specs

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SPEC = textwrap.dedent(
    """
    name: identity_pair
    model:
      om: identity.om
      source: identity.onnx
      soc_version: Ascend910B3
    inputs:
      - name: INPUT0
        dtype: fp32
        dims: [16]
    outputs:
      - name: OUTPUT0
        dtype: fp32
        dims: [16]
    batching:
      gears: [1, 2, 4, 8]
    placement:
      devices: [0]
      instances_per_device: 2
    """
)


def _repository(tmp_path: Path, acl_json: dict) -> Path:
    models = tmp_path / "models"
    models.mkdir()
    write_demo_models(models)
    (models / "identity_pair.yaml").write_text(SPEC + f"acl_json: {json.dumps(acl_json)}\n")
    (spec,) = load_specs([models / "identity_pair.yaml"])
    repo = tmp_path / "repo"
    output = repo / spec.name / "1" / Path(spec.om_filename).stem
    output.parent.mkdir(parents=True)
    build(parse_args(atc_args(spec, output=output)))
    write_repository([spec], repo)
    return repo


def test_two_instances_on_one_device_take_turns_with_the_configured_device_time(tmp_path):
    import tritonclient.http as httpclient

    reports = tmp_path / "reports"
    acl_json = {
        "ge_plugin_sim": {
            "report_dir": str(reports),
            "timing_only": True,
            "device_lock_dir": str(tmp_path / "locks"),
        }
    }
    repo = _repository(tmp_path, acl_json)
    options = ServerOptions(
        repository=repo,
        http_port=free_port(),
        grpc_port=free_port(),
        metrics_port=free_port(),
        work_dir=tmp_path / "work",
        environment={"GE_PLUGIN_SIM_EXECUTE_LATENCY_MS": "30"},
    )
    x = np.arange(16, dtype=np.float32).reshape(1, 16)

    def infer(url: str) -> np.ndarray:
        client = httpclient.InferenceServerClient(url, network_timeout=120.0)
        try:
            tensor = httpclient.InferInput("INPUT0", [1, 16], "FP32")
            tensor.set_data_from_numpy(x)
            return client.infer("identity_pair", [tensor]).as_numpy("OUTPUT0")
        finally:
            client.close()

    with (
        open(tmp_path / "tritonserver.log", "wb") as log,
        TritonServer(options, stdout=log, stderr=log) as triton,
    ):
        triton.wait_ready(timeout=120.0)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(infer, [triton.http_url] * 24))
    assert all(not r.any() for r in results), "timing-only (from acl_json) answers zeros"

    per_stub = []
    for path in sorted(reports.glob("sim-*.json")):
        device = json.loads(path.read_text())["devices"][0]
        if device["executes"]:
            per_stub.append([tuple(w) for w in device["compute_intervals"]])
    assert len(per_stub) == 2, f"expected both instances to execute, got {len(per_stub)} stub reports"
    a, b = per_stub
    assert min(a)[0] < max(e for _, e in b) and min(b)[0] < max(e for _, e in a), (
        "the stubs never ran together"
    )
    windows = sorted(w for stub in per_stub for w in stub)
    assert all(end - start >= 0.030 for start, end in windows), "the device time from the environment"
    assert all(end <= nxt for (_, end), (nxt, _) in itertools.pairwise(windows)), (
        "two stub processes computed on device 0 at the same time"
    )
