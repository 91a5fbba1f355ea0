"""A model repository in an object store: ``ge-plugin serve s3://...`` with the ge backend, against moto's local S3
server. tritonserver 2.51 reads the repository itself and copies each model to a local folder before the backend
loads it, so the ge backend's relative ``om_model_path`` works unchanged: the populate path of docs/deploy.md
without a volume (the pod reads the bucket; a model update is an upload and a load, or a rolling restart)."""

from __future__ import annotations

import os
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
from ge_plugin.models import write_model
from ge_plugin.models.identity_model import WIDTH, identity
from ge_plugin.render import write_repository
from ge_plugin.serve import free_port
from ge_plugin.spec import load_spec

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SPEC = """\
name: identity_s3
model: {om: identity.om, source: identity.onnx, soc_version: Ascend910B3}
inputs: [{name: INPUT0, dtype: fp32, dims: [16]}]
outputs: [{name: OUTPUT0, dtype: fp32, dims: [16]}]
batching: {gears: [1, 2]}
"""
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture
def s3_server():
    """moto's S3 server on a free loopback port: its endpoint URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while not _ready(f"{endpoint}/moto-api/"):
        assert process.poll() is None and time.monotonic() < deadline, "moto's server did not start"
        time.sleep(0.2)
    yield endpoint
    process.terminate()
    process.wait(10)


def test_serve_reads_a_model_repository_from_s3_with_the_ge_backend(tmp_path, s3_server):
    import boto3

    spec_path = tmp_path / "identity_s3.yaml"
    spec_path.write_text(SPEC)
    write_model(tmp_path / "identity.onnx", identity())
    spec = load_spec(spec_path)
    repository = tmp_path / "repository"
    build(parse_args(atc_args(spec, output=repository / spec.name / "1" / "identity")))
    write_repository([spec], repository)
    bucket = boto3.client("s3", endpoint_url=s3_server, **_boto(CREDENTIALS))
    bucket.create_bucket(Bucket="models")
    for path in sorted(p for p in repository.rglob("*") if p.is_file()):
        bucket.upload_file(str(path), "models", f"model_repository/{path.relative_to(repository)}")

    ports = [free_port() for _ in range(3)]
    log = (tmp_path / "serve.log").open("w")
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ge_plugin",
            "serve",
            f"s3://{s3_server}/models/model_repository",
            "--http-port",
            str(ports[0]),
            "--grpc-port",
            str(ports[1]),
            "--metrics-port",
            str(ports[2]),
            "--work-dir",
            str(tmp_path / "work"),
        ],
        env={**os.environ, **CREDENTIALS, "GE_PLUGIN_DEVICE": "sim"},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while not _ready(f"http://127.0.0.1:{ports[0]}/v2/models/{spec.name}/ready"):
            assert serve.poll() is None, Path(log.name).read_text()[-3000:]
            assert time.monotonic() < deadline, Path(log.name).read_text()[-3000:]
            time.sleep(0.3)

        import tritonclient.http as httpclient

        client = httpclient.InferenceServerClient(f"127.0.0.1:{ports[0]}")
        data = np.linspace(-1, 1, 2 * WIDTH, dtype=np.float32).reshape(2, WIDTH)
        given = httpclient.InferInput("INPUT0", list(data.shape), "FP32")
        given.set_data_from_numpy(data)
        np.testing.assert_array_equal(client.infer(spec.name, [given]).as_numpy("OUTPUT0"), data)
        client.close()
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(60) == 0
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        log.close()


def _boto(credentials: dict[str, str]) -> dict[str, str]:
    return {
        "aws_access_key_id": credentials["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": credentials["AWS_SECRET_ACCESS_KEY"],
        "region_name": credentials["AWS_DEFAULT_REGION"],
    }
