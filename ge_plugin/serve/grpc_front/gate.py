"""What the gRPC front lets through, one message at a time: parsed once with protobuf, checked, re-encoded.

``Gate`` knows no transport (``grpc_front.server`` is the grpc.aio server around it). For each of
tritonserver 2.51's RPCs (``METHODS``: every method of ``inference.GRPCInferenceService`` and the standard
``grpc.health.v1.Health/Check``) it decides from a call's metadata whether the call may go on and which metadata
tritonserver gets (``admit``: the key the API group needs, checked and then written by the front itself, and
the metadata tritonserver's ``--grpc-header-forward-pattern`` passes to models; nothing else), and turns each
request message into the bytes tritonserver gets (``check``): parsed with protobuf, unknown fields dropped,
inference requests held to ``serve.policy``, load requests to ``serve.access``, and serialised again, so that
what tritonserver parses is what was checked. Refusals are ``Refused``; ``status_code`` maps them to gRPC.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import grpc
from google.protobuf import message_factory
from google.protobuf.message import DecodeError, Message
from google.protobuf.wrappers_pb2 import StringValue
from tritonclient.grpc import service_pb2

from ge_plugin.errors import Refused
from ge_plugin.serve.access import GRPC_METHOD_GROUPS, Access
from ge_plugin.serve.policy import MAX_INPUT_BYTES, check_infer_request

SERVICE = "inference.GRPCInferenceService"
HEALTH_CHECK = "/grpc.health.v1.Health/Check"
#: the largest message tritonserver 2.51's gRPC endpoint takes (its MAX_GRPC_MESSAGE_SIZE, INT32_MAX)
TRITON_MAX_MESSAGE_BYTES = (1 << 31) - 1

__all__ = ["HEALTH_CHECK", "METHODS", "SERVICE", "Gate", "GrpcRules", "Method", "status_code"]


@attrs.frozen
class Method:
    """One RPC tritonserver serves: its path, API group, request type, and whether it streams."""

    name: str
    path: str
    group: str
    request: type[Message]
    streaming: bool
    #: the request message's name, as errors name it
    message: str


def _methods() -> dict[str, Method]:
    service = service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    found = {}
    for method in service.methods:
        path = f"/{SERVICE}/{method.name}"
        found[path] = Method(
            method.name,
            path,
            GRPC_METHOD_GROUPS[method.name],
            message_factory.GetMessageClass(method.input_type),
            method.client_streaming or method.server_streaming,
            method.input_type.name,
        )
    # grpc.health.v1.HealthCheckRequest is ``string service = 1``: on the wire, exactly a StringValue
    found[HEALTH_CHECK] = Method("Check", HEALTH_CHECK, "health", StringValue, False, "HealthCheckRequest")
    return found


#: every RPC the front forwards, by path; any other path is answered UNIMPLEMENTED by the front
METHODS: Mapping[str, Method] = _methods()

#: a refusal's HTTP-style status as a gRPC status code
_CODES = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.UNIMPLEMENTED,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    503: grpc.StatusCode.UNAVAILABLE,
}


def status_code(refused: Refused) -> grpc.StatusCode:
    return _CODES.get(refused.status, grpc.StatusCode.INVALID_ARGUMENT)


@attrs.frozen
class GrpcRules:
    """What the gRPC front lets through (picklable: ``ge-plugin serve`` hands it to the front's process)."""

    #: who may use which API group and what a load may ask (serve/access.py); None: every API open, loads
    #: unchecked (the front alone in tests)
    access: Access | None = None
    max_input_bytes: int = MAX_INPUT_BYTES
    #: tritonserver's ``--grpc-header-forward-pattern``: metadata it hands to models as request parameters
    forward_pattern: re.Pattern[str] | None = None


class Gate:
    """``admit`` a call, ``check`` each of its messages (see the module docstring)."""

    def __init__(self, rules: GrpcRules):
        self.rules = rules
        access = rules.access
        self._keys = access.key_names("grpc") if access is not None else frozenset()
        #: per API group, the restriction it is under (None: open), looked up once
        self._needed = {
            group: access.restriction(group, "grpc") if access is not None else None
            for group in {m.group for m in METHODS.values()}
        }
        self._checks: dict[str, Callable[[Any], None]] = {
            "ModelInfer": self._check_infer,
            "ModelStreamInfer": self._check_infer,
            "RepositoryModelLoad": self._check_load,
        }

    def admit(
        self, method: Method, metadata: Iterable[tuple[str, str | bytes]] | None
    ) -> tuple[tuple[str, str], ...]:
        """The metadata tritonserver gets for a call of ``method`` that sent ``metadata``; Refused (403) when
        ``method``'s API group needs a key the call did not send."""
        metadata = tuple(metadata or ())
        out: list[tuple[str, str]] = []
        needed = self._needed[method.group]
        if needed is not None and self.rules.access is not None:
            name = needed.name("grpc")
            sent = {key: value for key, value in metadata if key == name}
            self.rules.access.check_key(method.group, "grpc", sent)
            out.append((name, needed.value))
        pattern = self.rules.forward_pattern
        if pattern is not None:
            for key, value in metadata:
                if key in self._keys or key.endswith("-bin") or not isinstance(value, str):
                    continue
                if pattern.search(key):
                    out.append((key, value))
        return tuple(out)

    def check(self, method: Method, raw: bytes) -> bytes:
        """The bytes tritonserver gets for the request message ``raw`` of ``method``; Refused naming what
        is wrong with it."""
        try:
            message = method.request.FromString(raw)
        except (DecodeError, RecursionError):
            raise Refused(f"the {method.name} request is not a {method.message} message") from None
        message.DiscardUnknownFields()  # type: ignore[attr-defined]  # every message has it; the stub omits it
        check = self._checks.get(method.name)
        if check is not None:
            check(message)
        return message.SerializeToString()

    def _check_infer(self, request: Any) -> None:
        check_infer_request(request, self.rules.max_input_bytes)

    def _check_load(self, request: Any) -> None:
        access = self.rules.access
        if access is None:
            return
        values = {
            name: getattr(p, p.WhichOneof("parameter_choice") or "string_param")
            for name, p in request.parameters.items()
        }
        checked = access.check_load(request.model_name, values)
        config = checked.get("config")
        if isinstance(config, str):
            request.parameters["config"].string_param = config
