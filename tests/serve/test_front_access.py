"""The HTTP front applies the access policy: each path's API group, the key, load requests' bodies."""

from __future__ import annotations

import json

import pytest

from ge_plugin.errors import Refused
from ge_plugin.serve.access import Access
from ge_plugin.serve.front.forward import Incoming, Rules, prepare
from ge_plugin.serve.front.routes import api_group, loaded_model

KEY = "a" * 32


@pytest.mark.parametrize(
    ("path", "group"),
    [
        (b"/v2/health/ready", "health"),
        (b"/v2/models/m/versions/2/ready", "health"),
        (b"/v2", "metadata"),
        (b"/v2/models/m", "metadata"),
        (b"/v2/models/m/versions/1/infer", "inference"),
        (b"/v2/models/m/generate_stream", "inference"),
        (b"/v2/models/m/config", "model-config"),
        (b"/v2/models/stats", "statistics"),
        (b"/v2/models/m/versions/1/stats", "statistics"),
        (b"/v2/repository/index", "model-repository"),
        (b"/v2/repository/models/m/unload", "model-repository"),
        (b"/v2/repository/other/models/m/load", "model-repository"),
        (b"/v2/systemsharedmemory/region/r/register", "shared-memory"),
        (b"/v2/cudasharedmemory/status", "shared-memory"),
        (b"/v2/trace/setting", "trace"),
        (b"/v2/models/m/trace/setting", "trace"),
        (b"/v2/logging", "logging"),
        (b"/v2/models/m/infer/x", None),
        (b"/v1/anything", None),
    ],
)
def test_every_path_tritonserver_serves_has_its_api_group(path, group):
    assert api_group(path) == group


def test_the_load_path_names_its_model():
    assert loaded_model(b"/v2/repository/models/llama/load") == "llama"
    assert loaded_model(b"/v2/repository/models/llama/unload") is None


def post(target: bytes, body: object = b"", *headers: tuple[bytes, bytes]) -> Incoming:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Incoming("POST", target, list(headers), data)


@pytest.fixture
def rules(tmp_path) -> Rules:
    (tmp_path / "m" / "1").mkdir(parents=True)
    return Rules(access=Access(KEY, operator_key=True, repository=tmp_path))


def test_a_restricted_api_without_the_key_is_refused_and_with_it_the_front_writes_the_key(rules):
    with pytest.raises(Refused) as caught:
        prepare(post(b"/v2/repository/models/m/unload"), rules)
    assert caught.value.status == 403 and "model-repository API is restricted" in str(caught.value)
    out = prepare(post(b"/v2/repository/models/m/unload", b"", (b"ge-admin-key", KEY.encode())), rules)
    assert out.head.endswith(b"\r\nge-admin-key: " + KEY.encode() + b"\r\n\r\n")
    out = prepare(post(b"/v2/models/m/infer", {"inputs": []}, (b"ge-admin-key", KEY.encode())), rules)
    assert b"ge-admin-key" not in out.head  # an open group: no key goes on


def test_a_key_sent_twice_is_refused(rules):
    key = (b"ge-admin-key", KEY.encode())
    with pytest.raises(Refused, match="appears 2 times"):
        prepare(post(b"/v2/logging", {}, key, key), rules)


def test_a_path_tritonserver_does_not_serve_is_closed(rules):
    with pytest.raises(Refused) as caught:
        prepare(post(b"/v2/models/m/unknown", {}, (b"ge-admin-key", KEY.encode())), rules)
    assert caught.value.status == 404


def test_a_load_with_model_files_is_refused_even_with_the_key(rules):
    body = {"parameters": {"config": json.dumps({"backend": "python"}), "file:1/model.py": "eA=="}}
    with pytest.raises(Refused, match="--allow-model-files"):
        prepare(post(b"/v2/repository/models/m/load", body, (b"ge-admin-key", KEY.encode())), rules)


def test_a_load_forwards_the_config_it_checked(rules):
    config = '{"backend": "ge", "parameters": {"om_model_path": {"string_value": "model.om"}}}'
    body = {"parameters": {"config": config}}
    out = prepare(post(b"/v2/repository/models/m/load", body, (b"ge-admin-key", KEY.encode())), rules)
    sent = json.loads(out.json)["parameters"]["config"]
    assert json.loads(sent) == json.loads(config) and sent != config  # re-encoded
    for bad in ([], {"parameters": []}):
        with pytest.raises(Refused, match="load request's JSON"):
            prepare(post(b"/v2/repository/models/m/load", bad, (b"ge-admin-key", KEY.encode())), rules)
