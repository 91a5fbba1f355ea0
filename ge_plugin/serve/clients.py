"""tritonclient clients that send ge-plugin's control keys with every call (tritonclient's plugin hook)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class _Keys:
    """Adds fixed headers (HTTP) or metadata (gRPC) to every request of the client it is registered with
    (tritonclient calls a registered plugin with each request before sending it)."""

    def __init__(self, headers: Mapping[str, str]):
        self.headers = dict(headers)

    def __call__(self, request: Any) -> None:
        request.headers = {**(request.headers or {}), **self.headers}


def keyed_client(protocol: str, url: str, headers: Mapping[str, str], **kwargs: Any) -> Any:
    """``tritonclient.http`` or ``tritonclient.grpc``'s InferenceServerClient for ``url`` sending ``headers``
    with every call; ``kwargs`` go to its constructor."""
    if protocol == "http":
        import tritonclient.http as module
    else:
        import tritonclient.grpc as module
    client = module.InferenceServerClient(url, **kwargs)
    if headers:
        client.register_plugin(_Keys(headers))
    return client
