"""What tritonserver is started with for the control plane, from ServerOptions (no server started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ge_plugin.errors import ServeError
from ge_plugin.serve.triton import Distribution, ServerOptions

DIST = Distribution(root=Path("/triton"), libs=Path("/libs"))


def restriction_flags(options: ServerOptions) -> list[str]:
    cmd = options.command(DIST, Path("/backends"))
    return [a for a in cmd if a.startswith(("--http-restricted-api", "--grpc-restricted-protocol"))]


def test_without_an_operator_key_tritonserver_gets_an_internal_one(tmp_path):
    options = ServerOptions(repository=tmp_path)
    groups = "logging,model-config,model-repository,shared-memory,statistics,trace"
    key = options.internal_key
    assert restriction_flags(options) == [
        f"--http-restricted-api={groups}:ge-admin-key={key}",
        f"--grpc-restricted-protocol={groups}:ge-admin-key={key}",
    ]
    assert len(key) == 64 and ServerOptions(repository=tmp_path).internal_key != key
    assert key not in repr(options)


def test_without_the_grpc_front_grpc_loads_are_closed_to_every_client(tmp_path):
    """No front checks loads on gRPC then: tritonserver itself would take model files and any OM path."""
    options = ServerOptions(repository=tmp_path, grpc_guard=False)
    key = options.internal_key
    assert restriction_flags(options)[1:] == [
        f"--grpc-restricted-protocol=logging,model-config,shared-memory,statistics,trace:ge-admin-key={key}",
        f"--grpc-restricted-protocol=model-repository:ge-plugin-internal={key}",
    ]
    cmd = options.command(DIST, Path("/backends"))
    assert "--grpc-address=127.0.0.1" in cmd and f"--grpc-port={options.grpc_port}" in cmd


def test_with_the_grpc_front_tritonserver_listens_on_a_private_socket(tmp_path):
    options = ServerOptions(repository=tmp_path, grpc_port=9001, internal_grpc_socket="/run/x/tritonserver")
    cmd = options.command(DIST, Path("/backends"))
    assert "--grpc-address=unix:/run/x/tritonserver" in cmd and "--grpc-port=0" in cmd
    assert options.internal_grpc_target == "unix:/run/x/tritonserver:0"


def test_the_operators_key_goes_to_tritonserver_and_the_guard_off_closes_http_loads(tmp_path):
    options = ServerOptions(repository=tmp_path, admin_key="o" * 20, http_guard=False)
    flags = restriction_flags(options)
    assert (
        f"--http-restricted-api=logging,model-config,shared-memory,statistics,trace:ge-admin-key={'o' * 20}"
        in flags
    )
    assert f"--http-restricted-api=model-repository:ge-plugin-internal={options.internal_key}" in flags
    assert options.access().operator_key


@pytest.mark.parametrize(
    "args",
    [
        ["--http-restricted-api=model-repository,logging:admin-key=SECRET"],
        ["--http-restricted-api", "model-repository,logging:admin-key=SECRET"],
    ],
)
def test_a_passed_restriction_is_read_in_tritonservers_form_and_takes_its_groups(tmp_path, args):
    options = ServerOptions(repository=tmp_path, extra_args=args)
    access = options.access()
    assert access.restriction("model-repository", "http").key == "admin-key"
    assert access.restriction("logging", "http").value == "SECRET"
    assert access.restriction("trace", "http").key == "ge-admin-key"
    flags = restriction_flags(options)
    assert (
        f"--http-restricted-api=model-config,shared-memory,statistics,trace:ge-admin-key={options.internal_key}"
        in flags
    )
    assert options.command(DIST, Path("/b"))[-len(args) :] == args  # passed on as given


def test_the_comma_form_tritonserver_refuses_is_refused_before_it_starts(tmp_path):
    options = ServerOptions(
        repository=tmp_path, extra_args=["--http-restricted-api=model-repository,k=SECRET"]
    )
    with pytest.raises(ServeError, match="APIS:KEY=VALUE") as caught:
        options.access()
    assert "SECRET" not in str(caught.value)


def test_opened_groups_leave_the_restriction_flags(tmp_path):
    options = ServerOptions(repository=tmp_path, open_apis=frozenset({"model-config", "statistics"}))
    assert restriction_flags(options)[0] == (
        f"--http-restricted-api=logging,model-repository,shared-memory,trace:ge-admin-key={options.internal_key}"
    )
