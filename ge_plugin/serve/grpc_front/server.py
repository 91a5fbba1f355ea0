"""The gRPC front's transport: a grpc.aio server on an event loop of its own, forwarding to tritonserver.

Every RPC of tritonserver's gRPC service (``gate.METHODS``) gets a generic handler on raw bytes: grpc neither
parses nor serialises a message, the gate does (``Gate.check``), once. A unary call is admitted, checked and
forwarded over one HTTP/2 channel to tritonserver (its private Unix socket in ``ge-plugin serve``); the
answer comes back as tritonserver sent it, or its status. ``ModelStreamInfer`` (a decoupled model's many
responses per request) is a stream each way: each request is checked and written upstream in order, each
response written back as it comes; a refused request is answered in the stream, as tritonserver answers a
stream request that fails (``error_message``), and the stream goes on. When the client goes away or its
deadline passes, grpc cancels the handler, and the upstream call with it: tritonserver sees the
cancellation, and a model's ``request.is_cancelled()`` turns true.

What grpc's own layer would chew on is bounded before a handler runs: metadata over ``MAX_METADATA_BYTES``
(grpcio refuses it as it arrives, RESOURCE_EXHAUSTED; tritonserver 2.51 spent 45 s of a core on a 100 MiB
value), messages over ``max_message_bytes`` (as sent and once inflated), more than ``max_rpcs`` calls at once.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import mmap
import threading
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from tritonclient.grpc import service_pb2

from ge_plugin.errors import Refused, ServeError
from ge_plugin.serve.grpc_front.gate import (
    METHODS,
    TRITON_MAX_MESSAGE_BYTES,
    Gate,
    GrpcRules,
    Method,
    status_code,
)
from ge_plugin.serve.policy import MAX_BODY_BYTES

log = logging.getLogger("ge_plugin.serve.grpc_front")
#: a call on raw bytes: the front neither parses nor serialises through grpc
Context = grpc.aio.ServicerContext[bytes, bytes]

#: the largest request message the front takes by default (``--max-body-bytes``, shared with HTTP)
MAX_MESSAGE_BYTES = MAX_BODY_BYTES
#: request metadata (headers) per call: what grpc's own defaults take, as one hard limit (grpc's soft limit
#: refuses at random between 8 and 16 KiB)
MAX_METADATA_BYTES = 16 << 10
#: calls in flight at once; more are refused RESOURCE_EXHAUSTED by grpc
MAX_RPCS = 4096
#: request bytes above which the check runs on a worker thread, so the event loop serves other calls meanwhile
LARGE_MESSAGE = 256 << 10
START_TIMEOUT_S = 30.0


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class GrpcFront:
    """Serves gRPC on ``listen`` from an event loop of its own thread and forwards to ``upstream`` (a gRPC
    target: ``host:port`` or ``unix:PATH``). Raises ServeError if it cannot listen.

    ``refused`` counts the requests it answered itself (also written to ``counter``, a file of 8 bytes that
    ``ge-plugin serve`` reads for its metrics, when one is given)."""

    def __init__(
        self,
        listen: tuple[str, int],
        upstream: str,
        rules: GrpcRules | None = None,
        *,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        max_metadata_bytes: int = MAX_METADATA_BYTES,
        max_rpcs: int = MAX_RPCS,
        counter: str = "",
    ):
        if not 0 < max_message_bytes <= TRITON_MAX_MESSAGE_BYTES:
            raise ServeError(
                f"the largest gRPC message the front takes must be 1 to {TRITON_MAX_MESSAGE_BYTES} bytes "
                f"(tritonserver's own limit), not {max_message_bytes}"
            )
        self.listen = listen
        self.upstream = upstream
        self.gate = Gate(rules or GrpcRules())
        self.max_message_bytes = max_message_bytes
        self.max_metadata_bytes = max_metadata_bytes
        self.max_rpcs = max_rpcs
        self.refused = 0
        self._counter = _Counter(counter) if counter else None
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._server: grpc.aio.Server | None = None
        self._channel: grpc.aio.Channel | None = None
        self._unary: dict[str, Any] = {}
        self._streams: dict[str, Any] = {}
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="ge-plugin-grpc-front", daemon=True)
        self._thread.start()
        if not self._started.wait(START_TIMEOUT_S):
            raise ServeError(f"the gRPC front did not start within {START_TIMEOUT_S:.0f} s")
        if self._error is not None:
            self._thread.join()
            raise ServeError(f"the gRPC front cannot listen on {_address(*listen)}: {self._error}")

    # -- lifetime -------------------------------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._start())
        except (RuntimeError, OSError) as exc:  # grpcio: "Failed to bind to address"
            self._error = exc
            self._started.set()
            self._loop.close()
            return
        self._started.set()
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    async def _start(self) -> None:
        self._channel = grpc.aio.insecure_channel(
            self.upstream,
            options=[
                ("grpc.max_receive_message_length", -1),
                ("grpc.max_send_message_length", -1),
            ],
        )
        for path, method in METHODS.items():
            if method.streaming:
                self._streams[path] = self._channel.stream_stream(path)
            else:
                self._unary[path] = self._channel.unary_unary(path)
        self._server = grpc.aio.server(
            handlers=[_Handlers(self)],
            maximum_concurrent_rpcs=self.max_rpcs,
            options=[
                ("grpc.max_receive_message_length", self.max_message_bytes),
                ("grpc.max_send_message_length", -1),
                ("grpc.max_metadata_size", self.max_metadata_bytes),
                ("grpc.absolute_max_metadata_size", self.max_metadata_bytes),
                ("grpc.so_reuseport", 0),
            ],
        )
        self.port = self._server.add_insecure_port(_address(*self.listen))
        if not self.port:
            raise RuntimeError("no port bound")
        await self._server.start()

    def begin_stop(self, grace: float) -> None:
        """Take no new call; calls in flight get ``grace`` seconds, then are cancelled. Returns at once."""
        if self._server is not None and self._loop.is_running():
            asyncio.run_coroutine_threadsafe(self._server.stop(grace), self._loop)

    def close(self, grace: float = 0.0) -> None:
        """Stop (``begin_stop``), wait for it, and end the loop's thread."""
        if not self._thread.is_alive():
            return
        if self._server is not None:
            done = asyncio.run_coroutine_threadsafe(self._close(grace), self._loop)
            done.result(timeout=grace + 10.0)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10.0)

    async def _close(self, grace: float) -> None:
        assert self._server is not None and self._channel is not None
        await self._server.stop(grace)
        await self._channel.close()

    def wait_stopped(self, timeout: float | None = None) -> bool:
        """Until the server has stopped (``begin_stop`` or ``close``); whether it has."""
        if self._server is None:
            return True
        done = asyncio.run_coroutine_threadsafe(self._server.wait_for_termination(), self._loop)
        try:
            done.result(timeout=timeout)
        except TimeoutError:
            return False
        return True

    # -- calls ----------------------------------------------------------------------------------------------

    def _count_refusal(self) -> None:
        self.refused += 1
        if self._counter is not None:
            self._counter.set(self.refused)

    async def _checked(self, method: Method, raw: bytes) -> bytes:
        if len(raw) > LARGE_MESSAGE:
            return await asyncio.get_running_loop().run_in_executor(None, self.gate.check, method, raw)
        return self.gate.check(method, raw)

    async def unary(self, method: Method, raw: bytes, context: Context) -> bytes:
        try:
            metadata = self.gate.admit(method, context.invocation_metadata())
            checked = await self._checked(method, raw)
        except Refused as exc:
            self._count_refusal()
            await context.abort(status_code(exc), str(exc))
        try:
            answer: bytes = await self._unary[method.path](
                checked, metadata=metadata, timeout=context.time_remaining()
            )
        except grpc.aio.AioRpcError as exc:
            await context.abort(exc.code(), exc.details() or "")
        return answer

    async def stream(self, method: Method, context: Context) -> None:
        try:
            metadata = self.gate.admit(method, context.invocation_metadata())
        except Refused as exc:
            self._count_refusal()
            await context.abort(status_code(exc), str(exc))
        call = self._streams[method.path](metadata=metadata, timeout=context.time_remaining())
        writing = asyncio.Lock()  # the client's side of the stream: upstream answers and in-band refusals
        pump = asyncio.ensure_future(self._pump(method, context, call, writing))
        try:
            while True:
                answer = await call.read()
                if answer is grpc.aio.EOF:
                    break
                async with writing:
                    await context.write(answer)
            code = await call.code()
            if code != grpc.StatusCode.OK:
                await context.abort(code, await call.details() or "")
        except grpc.aio.AioRpcError as exc:
            await context.abort(exc.code(), exc.details() or "")
        finally:
            pump.cancel()
            call.cancel()

    async def _pump(self, method: Method, context: Context, call: Any, writing: asyncio.Lock) -> None:
        """The client's requests, each checked, written upstream in order; a refused one answered in-band."""
        try:
            while True:
                raw: object = await context.read()  # bytes, or EOF once the client half-closed
                if not isinstance(raw, bytes):
                    break
                try:
                    checked = await self._checked(method, raw)
                except Refused as exc:
                    self._count_refusal()
                    async with writing:
                        await context.write(_in_band(exc, raw))
                    continue
                await call.write(checked)
            await call.done_writing()
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
            pass  # the upstream call ended: its status reaches the client through ``stream``


class _Counter:
    """A count shared with another process through a file of 8 bytes (mapped: a write is a store)."""

    def __init__(self, path: str):
        with open(path, "r+b") as file:
            self._map = mmap.mmap(file.fileno(), 8)

    def set(self, value: int) -> None:
        self._map[:8] = value.to_bytes(8, "little")


def read_counter(path: str) -> int:
    """What a ``_Counter`` over ``path`` holds (0 before the front wrote anything)."""
    try:
        return int.from_bytes(Path(path).read_bytes()[:8], "little")
    except OSError:
        return 0


def _in_band(exc: Refused, raw: bytes) -> bytes:
    """A ModelStreamInferResponse that carries a refusal, as tritonserver answers a stream request that fails,
    with the request's model and id when they can be read."""
    response = service_pb2.ModelStreamInferResponse(error_message=str(exc))
    try:
        request = service_pb2.ModelInferRequest.FromString(raw)
    except DecodeError:  # the refusal said why already; without its id is all that is left
        request = None
    if request is not None:
        response.infer_response.model_name = request.model_name
        response.infer_response.model_version = request.model_version
        response.infer_response.id = request.id
    data: bytes = response.SerializeToString()
    return data


class _Handlers(grpc.GenericRpcHandler):
    """The method handlers on raw bytes, one per path of ``METHODS``; any other path: None (UNIMPLEMENTED)."""

    def __init__(self, front: GrpcFront):
        self._handlers = {path: self._handler(front, method) for path, method in METHODS.items()}

    @staticmethod
    def _handler(front: GrpcFront, method: Method) -> grpc.RpcMethodHandler[bytes, bytes]:
        if method.streaming:

            async def stream(_requests: Any, context: Context) -> None:
                await front.stream(method, context)

            return grpc.stream_stream_rpc_method_handler(stream)
        # a partial of the coroutine method: grpc.aio sees a coroutine function, and no frame is added per call
        return grpc.unary_unary_rpc_method_handler(functools.partial(front.unary, method))

    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[bytes, bytes] | None:
        return self._handlers.get(handler_call_details.method)
