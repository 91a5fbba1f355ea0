"""What ``ge-plugin deploy k8s`` renders, asked of a real tritonserver serving ge models: the probes' endpoints
answer as the Deployment expects, and the series the Prometheus adapter's rule reads exist per model."""

from __future__ import annotations

import urllib.error
import urllib.request

from ge_plugin.deploy import k8s
from ge_plugin.deploy.ready import main as ready_main
from ge_plugin.dtypes import by_name
from ge_plugin.serve import free_port
from ge_plugin.spec.model import Batching, InputDecl, ModelFiles, ModelSpec, OutputDecl


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _specs(names: list[str]) -> list[ModelSpec]:
    """Specs named like the served models (only their names reach the probes)."""
    tensor = {"dtype": by_name("fp32"), "dims": (4,)}
    return [
        ModelSpec(
            name=name,
            model=ModelFiles(om=f"{name}.om", source=f"{name}.onnx", soc_version="Ascend910B3"),
            inputs=(InputDecl(name="x", **tensor),),
            outputs=(OutputDecl(name="y", **tensor),),
            batching=Batching(gears=(1, 2)),
        )
        for name in names
    ]


def test_rendered_probes_answer_200_on_a_serving_tritonserver(server, session_models):
    _repo, names = session_models
    base = f"http://{server.http_url}"

    single = k8s.readiness_probe(_specs(names[:1]))["httpGet"]["path"]
    assert _status(base + single) == 200
    assert _status(base + "/v2/health/live") == 200
    command = k8s.readiness_probe(_specs(names))["exec"]["command"]
    assert command[:3] == ["python3", "-m", "ge_plugin.deploy.ready"]
    port = str(server.triton.options.http_port)
    args = [port if arg == str(k8s.HTTP_PORT) else arg for arg in command[3:]]  # the test server's port
    assert ready_main(args) == 0


def test_ready_probe_fails_and_names_a_model_the_server_does_not_serve(server, session_models, capsys):
    _repo, names = session_models
    port = str(server.triton.options.http_port)

    assert ready_main(["--port", port, names[0], "no_such_model"]) == 1

    err = capsys.readouterr().err
    assert err.startswith("no_such_model: not ready (HTTP 400 from http://127.0.0.1:")
    assert names[0] not in err


def test_ready_probe_fails_when_nothing_listens(capsys):
    assert ready_main(["--port", str(free_port()), "llama_model"]) == 1
    assert "llama_model: http://127.0.0.1:" in capsys.readouterr().err


def test_adapter_rule_reads_series_triton_exports_per_model(server, session_models):
    _repo, names = session_models

    metrics = server.metrics()

    for series in (k8s.TRITON_QUEUE_SERIES, k8s.TRITON_SUCCESS_SERIES):
        assert series in metrics.names()
        assert {labels["model"] for labels, _value in metrics.select(series)} >= set(names)
