"""Running tritonserver (from the nvidia-pytriton wheel) with the ``ge`` backend."""

from ge_plugin.serve.triton import (
    Distribution,
    ServerOptions,
    TritonServer,
    find_distribution,
    free_port,
    prepare_backends,
    server_environment,
)

__all__ = [
    "Distribution",
    "ServerOptions",
    "TritonServer",
    "find_distribution",
    "free_port",
    "prepare_backends",
    "server_environment",
]
