"""Stand-ins for tritonserver's HTTP and gRPC endpoints, and a front in front of each."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import attrs
import grpc
import pytest
from tritonclient.grpc import service_pb2

from ge_plugin.serve.front import Front, Rules
from ge_plugin.serve.grpc_front import METHODS, GrpcFront
from ge_plugin.serve.triton import free_port

#: how long ``/slow`` takes to answer
SLOW_S = 1.5
#: a large answer (3 MiB of a pattern): the front splices what follows its head
BIG = bytes(range(251)) * (3 * (1 << 20) // 251)


class Upstream(BaseHTTPRequestHandler):
    """Answers with what it received (path, headers, body size); ``/chunked`` answers in chunks,
    ``/interim`` sends a ``100 Continue`` of its own before the answer, ``/big`` answers BIG and ``/slow``
    answers after SLOW_S."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Upstream.seen.append((self.path, dict(self.headers), body))
        self._answer({"path": self.path, "bytes": len(body)})

    def do_GET(self):
        Upstream.seen.append((self.path, dict(self.headers), b""))
        self._answer({"path": self.path})

    def _answer(self, payload: dict) -> None:
        data = json.dumps(payload).encode()
        if self.path.endswith("/slow"):
            time.sleep(SLOW_S)
        if self.path.endswith("/big"):
            data = BIG
        if self.path.endswith("/interim"):
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if self.path.endswith("/chunked"):
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (data[:5], data[5:]):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def upstream() -> Iterator[ThreadingHTTPServer]:
    Upstream.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)  # a quick shutdown
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def make_front(upstream):
    fronts = []

    def make(**kwargs) -> Front:
        rules = kwargs.pop("rules", Rules(max_body_bytes=1 << 20))
        front = Front(("127.0.0.1", free_port()), upstream.server_address, rules=rules, **kwargs)
        fronts.append(front)
        return front

    yield make
    for front in fronts:
        front.close()


@pytest.fixture
def front(make_front) -> Front:
    return make_front()


# -- gRPC -------------------------------------------------------------------------------------------------
# A stand-in for tritonserver's gRPC endpoint, recording what the gRPC front sends it. Every RPC of
# inference.GRPCInferenceService (and grpc.health.v1.Health/Check) is answered: ModelInfer with a response
# naming the request's model and id; ModelStreamInfer with two responses per request (a decoupled model's
# many); the others with an empty response of their type. A request for model ``slow`` waits until its call
# is cancelled and records that it was (``cancelled``).


@attrs.define
class Seen:
    method: str
    raw: bytes
    metadata: dict[str, str]


class Standin:
    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.cancelled = threading.Event()
        self.server = grpc.server(
            futures.ThreadPoolExecutor(16),
            options=[("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)],
        )
        self.server.add_generic_rpc_handlers([_Handlers(self)])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def requests(self, method: str = "ModelInfer") -> list[service_pb2.ModelInferRequest]:
        return [service_pb2.ModelInferRequest.FromString(s.raw) for s in self.seen if s.method == method]

    def close(self) -> None:
        self.server.stop(0)

    def _record(self, method: str, raw: bytes, context: grpc.ServicerContext) -> None:
        self.seen.append(Seen(method, raw, {k: v for k, v in context.invocation_metadata()}))

    def _wait_for_cancel(self, context: grpc.ServicerContext) -> None:
        done = threading.Event()
        context.add_callback(done.set)
        done.wait(30)
        if not context.is_active():
            self.cancelled.set()

    def unary(self, name: str, raw: bytes, context: grpc.ServicerContext) -> bytes:
        self._record(name, raw, context)
        if name == "ModelInfer":
            request = service_pb2.ModelInferRequest.FromString(raw)
            if request.model_name == "slow":
                self._wait_for_cancel(context)
            return service_pb2.ModelInferResponse(
                model_name=request.model_name, id=request.id
            ).SerializeToString()
        return b""

    def stream(self, requests, context: grpc.ServicerContext):
        for raw in requests:
            self._record("ModelStreamInfer", raw, context)
            request = service_pb2.ModelInferRequest.FromString(raw)
            if request.model_name == "slow":
                yield service_pb2.ModelStreamInferResponse(
                    infer_response=service_pb2.ModelInferResponse(id=request.id)
                ).SerializeToString()
                self._wait_for_cancel(context)
                return
            for part in ("1", "2"):
                yield service_pb2.ModelStreamInferResponse(
                    infer_response=service_pb2.ModelInferResponse(
                        model_name=request.model_name, id=f"{request.id}/{part}"
                    )
                ).SerializeToString()


class _Handlers(grpc.GenericRpcHandler):
    def __init__(self, standin: Standin):
        self.handlers = {}
        for path, method in METHODS.items():
            if method.streaming:
                self.handlers[path] = grpc.stream_stream_rpc_method_handler(standin.stream)
            else:
                self.handlers[path] = grpc.unary_unary_rpc_method_handler(
                    lambda raw, context, name=method.name: standin.unary(name, raw, context)
                )

    def service(self, handler_call_details):
        return self.handlers.get(handler_call_details.method)


@pytest.fixture
def grpc_upstream() -> Iterator[Standin]:
    standin = Standin()
    try:
        yield standin
    finally:
        standin.close()


@pytest.fixture
def make_grpc_front(grpc_upstream):
    fronts = []

    def make(**kwargs) -> GrpcFront:
        rules = kwargs.pop("rules", None)
        front = GrpcFront(("127.0.0.1", 0), grpc_upstream.target, rules, **kwargs)
        fronts.append(front)
        return front

    yield make
    for front in fronts:
        front.close()
