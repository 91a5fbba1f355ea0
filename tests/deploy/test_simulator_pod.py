"""The pod ``ge-plugin deploy k8s --simulator`` renders, run here as a plain process: its container's
entrypoint and arguments, its environment and its mounts laid out in a temporary folder. No cluster, no
Docker: what the kubelet would start, started by hand, must really serve (startup and readiness probes
answered, one inference right, a SIGTERM stop within the grace period, exit 0).

Two things differ from a pod, and only these: the ports are free ones (this machine runs other servers), and
/dev/shm is the host's own (a process cannot be given another without a mount namespace)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from ge_plugin.atc.command import atc_args
from ge_plugin.atc.flags import parse_args
from ge_plugin.atc.simbuild import build
from ge_plugin.deploy.dockerfile import dockerfile
from ge_plugin.deploy.k8s import CLAIM_SUBPATH, K8sOptions
from ge_plugin.deploy.render import render_k8s
from ge_plugin.models import write_model
from ge_plugin.models.identity_model import WIDTH, identity
from ge_plugin.render import write_repository
from ge_plugin.serve import free_port
from ge_plugin.spec import load_spec

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SPEC = """\
name: identity_pod
model: {om: identity.om, source: identity.onnx, soc_version: Ascend910B3}
inputs: [{name: INPUT0, dtype: fp32, dims: [16]}]
outputs: [{name: OUTPUT0, dtype: fp32, dims: [16]}]
batching: {gears: [1, 2]}
"""


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def _http_get_url(probe: dict, ports: dict[str, int]) -> str:
    get = probe["httpGet"]
    return f"http://127.0.0.1:{ports[get['port']]}{get['path']}"


def test_the_simulator_pods_container_serves_as_a_plain_process(tmp_path):
    # the model repository, as an operator puts it on the claim: configs and (sim) OMs
    spec_path = tmp_path / "specs" / "identity_pod.yaml"
    spec_path.parent.mkdir()
    spec_path.write_text(SPEC)
    write_model(spec_path.parent / "identity.onnx", identity())
    spec = load_spec(spec_path)
    claim = tmp_path / "claim"
    repository = claim / CLAIM_SUBPATH
    build(parse_args(atc_args(spec, output=repository / spec.name / "1" / "identity")))
    write_repository([spec], repository)
    # the operator's Secret, as the kubelet projects it
    key = "k" * 32

    files = render_k8s(
        [spec],
        K8sOptions(
            name="identity-pod",
            image="ge-plugin:test",
            models_claim="identity-models",
            simulator=True,
            admin_key_secret="identity-admin-key",
            memory="4Gi",
        ),
    )
    pod = files["deployment.yaml"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert not [r for r in container["resources"]["limits"] if r.startswith("huawei.com/")]

    # each mount at a folder of its own; /dev/shm stays the host's
    root = tmp_path / "pod"
    volumes = {v["name"]: v for v in pod["volumes"]}
    where: dict[str, Path] = {}
    for mount in container["volumeMounts"]:
        if mount["mountPath"] == "/dev/shm":
            continue
        volume = volumes[mount["name"]]
        if "persistentVolumeClaim" in volume:
            target = claim / mount.get("subPath", "")
        elif "secret" in volume:
            target = root / "secret"
            target.mkdir(parents=True)
            for item in volume["secret"]["items"]:
                (target / item["path"]).write_text(key + "\n")
        else:
            assert "emptyDir" in volume, volume
            target = root / mount["name"]
            target.mkdir(parents=True)
        where[mount["mountPath"]] = target

    def local(text: str) -> str:
        for mount_path, target in sorted(where.items(), key=lambda item: -len(item[0])):
            if text == mount_path or text.startswith(mount_path + "/"):
                return str(target) + text[len(mount_path) :]
        return text

    named_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    free = {number: free_port() for number in named_ports.values()}
    ports = {name: free[number] for name, number in named_ports.items()}
    args = [str(free.get(int(a), a)) if a.isdigit() else local(a) for a in container["args"]]
    env = {e["name"]: local(e["value"]) for e in container["env"]}
    assert env["GE_PLUGIN_DEVICE"] == "sim"
    # the image: its venv's bin on PATH, CANN's set_env.sh (a stand-in here), the entrypoint that sources it
    set_env = tmp_path / "set_env.sh"
    set_env.write_text("export ASCEND_TOOLKIT_HOME=/usr/local/Ascend/ascend-toolkit/latest\n")
    image_env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "CANN_SET_ENV": str(set_env),
        "LANG": "C.UTF-8",
    }
    (entrypoint,) = [line for line in dockerfile().splitlines() if line.startswith("ENTRYPOINT ")]
    command = [*json.loads(entrypoint.removeprefix("ENTRYPOINT ")), *args]
    log = (tmp_path / "pod.log").open("w")
    process = subprocess.Popen(
        command, env={**image_env, **env}, stdout=log, stderr=subprocess.STDOUT, cwd=root / "work"
    )
    try:
        startup, readiness = container["startupProbe"], container["readinessProbe"]
        deadline = time.monotonic() + startup["periodSeconds"] * startup["failureThreshold"]
        while _status(_http_get_url(startup, ports)) != 200:
            assert process.poll() is None, (tmp_path / "pod.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the startup probe never passed"
            time.sleep(0.5)
        deadline = time.monotonic() + 120
        while _status(_http_get_url(readiness, ports)) != 200:
            assert time.monotonic() < deadline, (tmp_path / "pod.log").read_text()[-3000:]
            time.sleep(0.5)

        import tritonclient.http as httpclient

        client = httpclient.InferenceServerClient(f"127.0.0.1:{ports['http']}")
        data = np.arange(2 * WIDTH, dtype=np.float32).reshape(2, WIDTH)
        given = httpclient.InferInput("INPUT0", list(data.shape), "FP32")
        given.set_data_from_numpy(data)
        answer = client.infer(spec.name, [given]).as_numpy("OUTPUT0")
        np.testing.assert_array_equal(answer, data)
        # the control plane opens with the Secret's key and stays closed without it
        with pytest.raises(Exception, match=r"403|restricted|closed"):
            client.get_model_repository_index()
        assert client.get_model_repository_index(headers={"ge-admin-key": key})
        client.close()

        # the kubelet's stop: SIGTERM, then the grace period
        process.send_signal(signal.SIGTERM)
        assert process.wait(pod["terminationGracePeriodSeconds"]) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
