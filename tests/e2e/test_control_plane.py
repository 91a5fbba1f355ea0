"""The control plane closed by default, on the real tritonserver, as a hostile client on the network meets it.

``control_server`` runs as ``ge-plugin serve`` does without an admin key: the restricted API groups are
closed to every client; ``RunningServer.client(protocol)`` carries the server's own keys (as ge-plugin's own
calls do), ``client(protocol, admin=False)`` is any client. A client holding the admin key is
``keyed(protocol)``. Both protocols go through ge-plugin's fronts, which check every load before tritonserver
sees it.
"""

from __future__ import annotations

import contextlib
import json
import time
from multiprocessing import shared_memory
from pathlib import Path

import pytest
from google.protobuf import json_format, text_format

from ge_plugin.serve.access import ADMIN_KEY_NAME, GRPC_KEY_PREFIX
from ge_plugin.serve.clients import keyed_client

pytestmark = pytest.mark.e2e

PROTOCOLS = ["http", "grpc"]
#: the model an override and an unload name (specs/control; never loaded by these tests but for one load)
MODEL = "ids32"


def keyed(server, protocol: str):
    """A client that sends the admin key and nothing else (what an operator hands a control tool)."""
    key = server.triton.access.admin_key
    name = ADMIN_KEY_NAME if protocol == "http" else GRPC_KEY_PREFIX + ADMIN_KEY_NAME
    url = server.http_url if protocol == "http" else server.grpc_url
    return keyed_client(protocol, url, {name: key})


@contextlib.contextmanager
def closing(client):
    try:
        yield client
    finally:
        client.close()


def refused(call, *args, **kwargs) -> str:
    """The message of the InferenceServerException ``call`` raises (AssertionError if it succeeds)."""
    from tritonclient.utils import InferenceServerException

    with pytest.raises(InferenceServerException) as caught:
        call(*args, **kwargs)
    return str(caught.value)


def hostile_model_py(marker: Path) -> bytes:
    """A model.py that, once imported by the Python backend, creates ``marker``: code a client uploaded."""
    return (
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
        "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"
    ).encode()


UPLOAD_CONFIG = json.dumps(
    {
        "name": "uploaded",
        "backend": "python",
        "max_batch_size": 0,
        "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [1]}],
        "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [1]}],
    }
)


# -- remote code execution through the repository API ----------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("with_key", [False, True])
def test_an_uploaded_model_py_never_runs(control_server, tmp_path, protocol, with_key):
    """tritonserver 2.51 runs the Python of a load request's ``file:1/model.py`` as the server's user, over
    HTTP (a ``files`` parameter) and gRPC (``RepositoryModelLoad`` with a ``file:`` bytes parameter) alike."""
    marker = tmp_path / "uploaded-code-ran"
    files = {"file:1/model.py": hostile_model_py(marker)}
    with closing(
        keyed(control_server, protocol) if with_key else control_server.client(protocol, admin=False)
    ) as c:
        message = refused(c.load_model, "uploaded", config=UPLOAD_CONFIG, files=files)
    assert not marker.exists(), "the uploaded model.py ran inside the server"
    if with_key:
        assert "uploads a model file, which this server refuses whatever the key" in message
        assert "--allow-model-files" in message
    else:
        assert "model-repository API is restricted" in message and "--admin-key-file" in message
    with closing(control_server.client("http")) as client:
        assert "uploaded" not in {m["name"] for m in client.get_model_repository_index()}


# -- a config override's OM path -------------------------------------------------------------------------


def override(repo: Path, om_model_path: str) -> str:
    """``MODEL``'s own config as JSON, its ``om_model_path`` replaced."""
    from tritonclient.grpc import model_config_pb2

    config = text_format.Parse((repo / MODEL / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    config.parameters["om_model_path"].string_value = om_model_path
    return json_format.MessageToJson(config)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("path", ["/etc/hostname", "../../{other}/1/model.om", "~/model.om"])
def test_an_om_path_outside_the_models_folder_is_refused_naming_no_path(control_server, path, protocol):
    repo = Path(control_server.triton.options.repository)
    other = next(p.name for p in repo.iterdir() if p.is_dir() and p.name != MODEL)
    with closing(keyed(control_server, protocol)) as client:
        message = refused(client.load_model, MODEL, config=override(repo, path.format(other=other)))
    assert "resolves outside the model's own folder" in message and "--model-root" in message
    assert "/" not in message.split("(")[0], message  # no path, the client's nor the server's
    assert str(repo) not in message and "hostname" not in message


def test_an_override_inside_the_models_folder_loads(control_server):
    repo = Path(control_server.triton.options.repository)
    with closing(keyed(control_server, "http")) as client:
        client.load_model(MODEL, config=override(repo, "ids32.om"))
        try:
            assert client.is_model_ready(MODEL)
        finally:
            client.unload_model(MODEL)
            control_server.wait_until(
                f"{MODEL} to unload",
                lambda: all(
                    m.get("state") not in ("READY", "UNLOADING")
                    for m in client.get_model_repository_index()
                    if m["name"] == MODEL
                ),
            )


# -- what changes the server for everyone ----------------------------------------------------------------


@contextlib.contextmanager
def region(size: int = 64):
    shm = shared_memory.SharedMemory(create=True, size=size, name=f"ge_e2e_control_{time.monotonic_ns()}")
    try:
        yield "/" + shm.name
    finally:
        shm.close()
        shm.unlink()


def control_calls(client, key: str) -> dict:
    """One call of each API that changes the server, each leaving it as the session's server runs (verbose
    level 0, tracing off) when it succeeds."""
    return {
        "unload": lambda: client.unload_model(MODEL),
        "logging": lambda: client.update_log_settings({"log_verbose_level": 0}),
        "trace": lambda: client.update_trace_settings(settings={"log_frequency": "0"}),
        "shared-memory": lambda: (
            client.register_system_shared_memory("ge-e2e", key, 64),
            client.unregister_system_shared_memory("ge-e2e"),
        ),
    }


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("api", ["unload", "logging", "trace", "shared-memory", "model-config", "statistics"])
def test_apis_that_change_the_server_are_refused_without_the_key(control_server, protocol, api):
    with region() as key, closing(control_server.client(protocol, admin=False)) as client:
        calls = {
            **control_calls(client, key),
            "model-config": lambda: client.get_model_config(MODEL),
            "statistics": lambda: client.get_inference_statistics(),
        }
        message = refused(calls[api])
    assert "restricted" in message, message


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("api", ["unload", "logging", "trace", "shared-memory", "statistics"])
def test_apis_that_change_the_server_are_accepted_with_the_key(control_server, protocol, api):
    with region() as key, closing(keyed(control_server, protocol)) as client:
        call = {**control_calls(client, key), "statistics": lambda: client.get_inference_statistics()}[api]
        call()


# -- tritonserver's own restriction flag, passed through -------------------------------------------------

OPERATOR_KEY = "operator-secret-0123456789"


def test_tritonservers_own_restriction_flag_passed_through_opens_with_its_key(start_server, tmp_path):
    """``ge-plugin serve REPO -- --http-restricted-api=model-repository,logging:admin-key=SECRET``, the form of
    tritonserver's own usage line: the front read only ``apis,key=value``, dropped the ``admin-key`` header,
    and every request with the right key got "This API is restricted"."""
    import tritonclient.http as httpclient

    repo = tmp_path / "empty-repo"
    repo.mkdir()
    flag = ["--http-restricted-api", f"model-repository,logging:admin-key={OPERATOR_KEY}"]
    with start_server(repo, model_control_mode="explicit", extra_args=flag) as server:
        with closing(keyed_client("http", server.http_url, {"admin-key": OPERATOR_KEY})) as client:
            assert client.get_model_repository_index() == []
            client.update_log_settings({"log_verbose_level": 0})
            message = refused(client.update_trace_settings, settings={"log_frequency": "0"})
            assert "trace API is restricted" in message  # still the admin key's
        with closing(httpclient.InferenceServerClient(server.http_url)) as client:
            message = refused(client.get_model_repository_index)
            assert "set with tritonserver's --http-restricted-api in admin-key" in message
            assert OPERATOR_KEY not in message
        with closing(keyed_client("http", server.http_url, {"admin-key": OPERATOR_KEY[:-1] + "x"})) as client:
            assert "not the one it needs" in refused(client.get_model_repository_index)
        with closing(server.client("http")) as client:  # ge-plugin's own calls carry every key
            client.update_trace_settings(settings={"log_frequency": "0"})
            assert client.get_model_repository_index() == []
