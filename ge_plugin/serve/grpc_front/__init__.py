"""ge-plugin's gRPC front for tritonserver 2.51: every request parsed once with protobuf, checked, re-encoded.

Over gRPC, tritonserver 2.51 lets through inference requests whose declared shape wraps its byte-size
arithmetic (INT64 ``[1, 2^61]`` with no bytes), and the model's Python stub aborts on them; a request with a
100 MiB metadata value keeps it at a full core for 45 s. ``ge-plugin serve`` listens on the gRPC port with
this front and runs tritonserver's gRPC endpoint on a private Unix socket behind it. ``gate`` decides what
passes (the shared rule of ``serve.policy``, the access policy of ``serve.access``), ``server`` carries calls
both ways on grpc.aio, ``process`` runs it as a process of its own beside ``ge-plugin serve``.
"""

from ge_plugin.serve.grpc_front.gate import METHODS, Gate, GrpcRules
from ge_plugin.serve.grpc_front.server import MAX_MESSAGE_BYTES, MAX_METADATA_BYTES, GrpcFront

__all__ = ["MAX_MESSAGE_BYTES", "MAX_METADATA_BYTES", "METHODS", "Gate", "GrpcFront", "GrpcRules"]
