"""The access policy behind every front: which key each API group needs, the key itself, load requests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ge_plugin.errors import Refused, ServeError
from ge_plugin.serve.access import (
    ADMIN_KEY_ENV,
    GROUPS,
    RESTRICTED,
    Access,
    parse_restriction,
    read_key,
)

KEY = "k" * 32


def config(**params: str) -> str:
    return json.dumps(
        {"name": "m", "backend": "ge", "parameters": {k: {"string_value": v} for k, v in params.items()}}
    )


@pytest.fixture
def repo(tmp_path) -> Path:
    (tmp_path / "repo" / "m" / "1").mkdir(parents=True)
    (tmp_path / "repo" / "m" / "1" / "model.om").write_bytes(b"om")
    (tmp_path / "elsewhere").mkdir()
    return tmp_path / "repo"


# -- keys -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_only_inference_health_and_metadata_are_open_without_the_key(protocol):
    access = Access(KEY, operator_key=True)
    opened = {g for g in GROUPS if access.restriction(g, protocol) is None}
    assert opened == {"inference", "health", "metadata"}
    for group in opened:
        access.check_key(group, protocol, {})
    for group in RESTRICTED:
        with pytest.raises(Refused) as caught:
            access.check_key(group, protocol, {})
        assert caught.value.status == 403
        assert f"the {group} API is restricted" in str(caught.value)


def test_the_key_opens_the_restricted_groups_under_each_protocols_name():
    access = Access(KEY, operator_key=True)
    access.check_key("model-repository", "http", {"ge-admin-key": KEY})
    access.check_key("logging", "http", {"ge-admin-key": KEY.encode()})
    access.check_key("trace", "grpc", {"triton-grpc-protocol-ge-admin-key": KEY})
    with pytest.raises(Refused, match="triton-grpc-protocol-ge-admin-key"):
        access.check_key("trace", "grpc", {"ge-admin-key": KEY})  # the HTTP name on gRPC is not the key


@pytest.mark.parametrize("wrong", ["", KEY[:-1], KEY + "k", KEY.upper(), "k" * 31 + "\udcff"])
def test_a_wrong_key_is_refused_without_echoing_the_right_one(wrong):
    access = Access(KEY, operator_key=True)
    with pytest.raises(Refused) as caught:
        access.check_key("shared-memory", "http", {"ge-admin-key": wrong})
    assert "not the one it needs" in str(caught.value)
    assert KEY not in str(caught.value)


def test_without_an_operator_key_the_refusal_says_how_the_operator_opens_it():
    access = Access()
    with pytest.raises(Refused) as caught:
        access.check_key("model-repository", "http", {})
    assert "--admin-key-file" in str(caught.value) and ADMIN_KEY_ENV in str(caught.value)
    assert len(access.admin_key) >= 32 and Access().admin_key != access.admin_key


def test_the_operators_own_restriction_takes_its_groups_and_may_close_more():
    mine = parse_restriction("model-repository,inference:admin-key=SECRET")
    access = Access(KEY, operator_key=True, passed={"http": (mine,)})
    access.check_key("model-repository", "http", {"admin-key": "SECRET"})
    with pytest.raises(Refused, match="tritonserver's --http-restricted-api in admin-key"):
        access.check_key("inference", "http", {"ge-admin-key": KEY})
    access.check_key("logging", "http", {"ge-admin-key": KEY})
    access.check_key("inference", "grpc", {})  # gRPC was not restricted by the operator
    assert access.client_headers("http") == {"admin-key": "SECRET", "ge-admin-key": KEY}
    assert access.client_headers("grpc") == {"triton-grpc-protocol-ge-admin-key": KEY}
    groups = "logging,model-config,shared-memory,statistics,trace"
    assert access.tritonserver_args() == [
        f"--http-restricted-api={groups}:ge-admin-key={KEY}",
        f"--grpc-restricted-protocol=logging,model-config,model-repository,shared-memory,statistics,trace"
        f":ge-admin-key={KEY}",
    ]


def test_the_repository_api_is_closed_to_every_client_where_no_front_checks_loads():
    access = Access(
        KEY, operator_key=True, load_checked=frozenset({"http"})
    )  # ge-plugin serve --no-grpc-guard
    access.check_key("model-repository", "http", {"ge-admin-key": KEY})
    with pytest.raises(Refused, match="closed to every client") as caught:
        access.check_key("model-repository", "grpc", {"triton-grpc-protocol-ge-admin-key": KEY})
    assert access.internal not in str(caught.value)
    access.check_key("model-repository", "grpc", access.client_headers("grpc"))  # ge-plugin's own calls
    checked = Access(KEY, load_checked=frozenset({"http", "grpc"}))
    assert checked.restriction("model-repository", "grpc").key == "ge-admin-key"


def test_opened_groups_need_no_key_and_only_restricted_groups_can_be_opened():
    access = Access(KEY, opened=frozenset({"statistics", "model-config"}))
    access.check_key("statistics", "grpc", {})
    access.check_key("model-config", "http", {})
    with pytest.raises(Refused):
        access.check_key("logging", "http", {})
    with pytest.raises(ServeError, match="--open-api inference: not a restricted API group"):
        Access(KEY, opened=frozenset({"inference"}))


def test_restriction_flags_are_read_in_tritonservers_form_only():
    got = parse_restriction("model-repository, logging:Admin-Key=a=b:c")
    assert (got.groups, got.key, got.value) == (
        frozenset({"model-repository", "logging"}),
        "admin-key",
        "a=b:c",
    )
    for bad in ["model-repository,logging,admin-key=SECRET", "logging:admin-key", "logging:=x", "logging:k="]:
        with pytest.raises(ServeError, match="APIS:KEY=VALUE") as caught:
            parse_restriction(bad)
        assert "SECRET" not in str(caught.value)
    with pytest.raises(ServeError, match="unknown API group 'repository'"):
        parse_restriction("repository:k=v", "grpc")


def test_the_key_comes_from_a_file_or_the_environment_and_must_be_long(tmp_path):
    path = tmp_path / "key"
    path.write_text(f"  {KEY}\n")
    assert read_key(path, {}) == KEY
    assert read_key(None, {ADMIN_KEY_ENV: KEY + "\n"}) == KEY
    assert read_key(None, {}) is None
    with pytest.raises(ServeError, match="fewer than 16"):
        read_key(None, {ADMIN_KEY_ENV: "short"})
    with pytest.raises(ServeError, match="cannot read it"):
        read_key(tmp_path / "missing", {})
    path.write_text("has a space in it, long enough")
    with pytest.raises(ServeError, match="visible ASCII"):
        read_key(path, {})


# -- loads ------------------------------------------------------------------------------------------------


def test_model_files_are_refused_whatever_the_key_unless_allowed(repo):
    params = {"config": config(om_model_path="model.om"), "file:1/model.py": "aW1wb3J0IG9z"}
    with pytest.raises(Refused, match="--allow-model-files") as caught:
        Access(KEY, repository=repo).check_load("m", params)
    assert caught.value.status == 403
    assert "file:1/model.py" in Access(KEY, repository=repo, allow_model_files=True).check_load("m", params)


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "../../elsewhere/x.om", "~/x.om", "../../m/../elsewhere/x.om", "../.."]
)
def test_an_om_path_outside_the_models_folder_is_refused_naming_no_server_path(repo, path):
    access = Access(KEY, repository=repo)
    with pytest.raises(Refused) as caught:
        access.check_load("m", {"config": config(om_model_path=path)})
    message = str(caught.value)
    assert caught.value.status == 403 and "--model-root" in message
    assert str(repo.parent) not in message and path not in message


def test_an_allowed_root_opens_only_that_folder(repo):
    access = Access(KEY, repository=repo, model_roots=(repo.parent / "elsewhere",))
    access.check_load("m", {"config": config(om_model_path=str(repo.parent / "elsewhere" / "x.om"))})
    with pytest.raises(Refused):
        access.check_load("m", {"config": config(om_model_path=str(repo.parent / "elsewhere-too" / "x.om"))})


def test_a_symlink_out_of_the_models_folder_counts_where_it_leads(repo):
    (repo / "m" / "1" / "out").symlink_to(repo.parent / "elsewhere")
    with pytest.raises(Refused):
        Access(KEY, repository=repo).check_load("m", {"config": config(om_model_path="out/x.om")})


def test_per_version_paths_are_checked_too(repo):
    access = Access(KEY, repository=repo)
    good = config(om_model_path="model.om", version_om_model_paths=json.dumps({"2": "b.om"}))
    assert json.loads(access.check_load("m", {"config": good})["config"]) == json.loads(good)
    bad = config(om_model_path="model.om", version_om_model_paths=json.dumps({"2": "../../x.om"}))
    with pytest.raises(Refused, match="version 2"):
        access.check_load("m", {"config": bad})


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (json.dumps({"backend": "python"}), "backend 'ge'"),
        (json.dumps({"backend": "ge", "runtime": "/tmp/x.py"}), "backend 'ge'"),
        (json.dumps({"platform": "onnxruntime_onnx"}), "backend 'ge'"),
        (
            json.dumps({"backend": "ge", "parameters": {"EXECUTION_ENV_PATH": {"string_value": "/x.tgz"}}}),
            "EXECUTION_ENV_PATH",
        ),
        ('{"backend": "ge", "backend": "python"}', "appears twice"),
        ('{"backend": "ge", "max_batch_size": NaN}', "not strict JSON"),
        ("[" * 100000 + "]" * 100000, "not strict JSON"),
        ("[]", "JSON object"),
    ],
)
def test_config_overrides_that_would_run_other_code_or_read_twice_are_refused(repo, text, match):
    with pytest.raises(Refused, match=match):
        Access(KEY, repository=repo).check_load("m", {"config": text})


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "..\\x", "m\0"])
def test_a_model_name_that_is_no_folder_name_is_refused(repo, name):
    with pytest.raises(Refused, match="is not the name of a folder"):
        Access(KEY, repository=repo).check_load(name, {})


def test_a_load_without_parameters_passes_as_it_is(repo):
    assert Access(KEY, repository=repo).check_load("m", {}) == {}
    assert Access(KEY, repository=repo).check_load("m", {"unrelated": True}) == {"unrelated": True}


def test_allowing_model_files_allows_another_backend_but_no_om_outside(repo):
    access = Access(KEY, repository=repo, allow_model_files=True)
    access.check_load("m", {"config": json.dumps({"backend": "python"}), "file:1/model.py": "eA=="})
    with pytest.raises(Refused, match="--model-root"):
        access.check_load("m", {"config": config(om_model_path="/etc/x.om")})


def test_the_config_is_read_as_protobuf_reads_it_and_re_encoded(repo):
    """protobuf's JSON mapping takes ``stringValue`` as well as ``string_value``: a reader of one spelling
    only let ``{"stringValue": "/etc/x.om"}`` through to tritonserver, which read it."""
    access = Access(KEY, repository=repo)
    camel = {"backend": "ge", "parameters": {"om_model_path": {"stringValue": "/etc/x.om"}}}
    with pytest.raises(Refused, match="resolves outside"):
        access.check_load("m", {"config": json.dumps(camel)})
    both = {"backend": "ge", "parameters": {"om_model_path": {"stringValue": "a.om", "string_value": "/x"}}}
    with pytest.raises(Refused, match="not a model config"):
        access.check_load("m", {"config": json.dumps(both)})
    with pytest.raises(Refused, match="not a model config"):
        access.check_load("m", {"config": json.dumps({"backend": "ge", "unknown_field": 1})})
    sent = access.check_load("m", {"config": json.dumps({"backend": "ge", "maxBatchSize": 8})})["config"]
    assert json.loads(sent) == {"backend": "ge", "max_batch_size": 8}
