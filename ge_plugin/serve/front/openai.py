"""Text in, text out on the front: OpenAI's ``/v1`` endpoints, and ``text_input`` on Triton's ``generate``.

For a model whose config names a tokenizer (``text.files``), the front tokenizes here and asks tritonserver
for tokens the way any client can (``POST /v2/models/<m>/generate_stream`` with ``input_ids``: Contract B of
docs/generate.md), then decodes the events as they arrive (``text.stream``) into OpenAI's chunks, or
completes ``text_output`` in Triton's own. So the model stays a token model, the text path adds no hop
(the front is in the way of every HTTP request anyway), and every check of the front applies: the body is
framed by llhttp, inflated, parsed by ``strict_json`` before this module reads it.

A client that disconnects closes the upstream connection, which tritonserver shows the model as
``is_cancelled()``; a stop string that ends the text closes it the same way. Errors take OpenAI's shape with
tritonserver's status (400 for a bad parameter or a prompt longer than the context, 404 for an unknown
model, 503 when every slot is busy and the queue is full) on ``/v1``, and Triton's ``{"error": ...}`` on
``/v2``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ge_plugin.errors import Refused, TokenizerError
from ge_plugin.serve.front import strict_json
from ge_plugin.serve.front.encoding import content_coding, inflate
from ge_plugin.serve.front.forward import Incoming, Outgoing, origin_form
from ge_plugin.serve.front.openai_request import ApiError, TextRequest, parse, unknown_model
from ge_plugin.serve.front.upstream import UpstreamLost
from ge_plugin.text import files as tokenizer_files

if TYPE_CHECKING:
    from ge_plugin.serve.front.transport import ClientConnection
    from ge_plugin.text.tokenizer import Tokenizer

log = logging.getLogger("ge_plugin.serve.front")

#: characters above which a text is tokenized on a worker thread, so the loop keeps serving
INLINE_CHARS = 16 << 10
_GENERATE = re.compile(rb"/v2/models/([^/?]+)(?:/versions/[0-9]+)?/(generate|generate_stream)")
#: what a model directory may be called for the front to look at it (Triton's names are directory names)
_MODEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}")
_FINISH = {"stop": "stop", "length": "length", "cancelled": "stop"}
_STATUS = {400: b"Bad Request", 404: b"Not Found", 405: b"Method Not Allowed", 413: b"Payload Too Large",
           415: b"Unsupported Media Type", 500: b"Internal Server Error", 502: b"Bad Gateway",
           503: b"Service Unavailable"}  # fmt: skip


class TextModels:
    """Which models of the repository have a tokenizer, and their tokenizers, as their config.pbtxt says
    now: a config that changes (a model reloaded with other files) is read again."""

    def __init__(self, repository: Path):
        self.repository = Path(repository)
        self._params: dict[str, tuple[tuple[int, int], tuple[Path, Path | None] | None]] = {}
        self._loaded: dict[tuple[Path, Path | None], tuple[tuple[int, ...], Tokenizer]] = {}

    def names(self) -> list[str]:
        """Models whose config names a tokenizer, sorted."""
        try:
            entries = sorted(p.name for p in self.repository.iterdir() if p.is_dir())
        except OSError:
            return []
        return [name for name in entries if _MODEL_NAME.fullmatch(name) and self.paths(name) is not None]

    def paths(self, name: str) -> tuple[Path, Path | None] | None:
        """The tokenizer files of model ``name`` (None: no such model, or no tokenizer); cheap when cached."""
        if not _MODEL_NAME.fullmatch(name):
            return None
        config = self.repository / name / "config.pbtxt"
        try:
            stat = config.stat()
        except OSError:
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        cached = self._params.get(name)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        try:
            paths = tokenizer_files.tokenizer_paths(tokenizer_files.config_parameters(config), config.parent)
        except TokenizerError:
            paths = None  # a config the front cannot read is tritonserver's to refuse
        self._params[name] = (stamp, paths)
        return paths

    def cached(self, paths: tuple[Path, Path | None]) -> Tokenizer | None:
        """The tokenizer of these files if it is loaded and its files did not change (a few stat calls)."""
        cached = self._loaded.get(paths)
        return cached[1] if cached is not None and cached[0] == _stamps(paths) else None

    def tokenizer(self, paths: tuple[Path, Path | None]) -> Tokenizer:
        """The tokenizer of these files, loaded once (again when a file changes); TokenizerError. Slow the
        first time: call it on a worker thread."""
        from ge_plugin.text.tokenizer import Tokenizer

        stamp = _stamps(paths)
        cached = self._loaded.get(paths)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        tokenizer = Tokenizer.from_files(*paths)
        self._loaded[paths] = (stamp, tokenizer)
        return tokenizer


def _stamps(paths: tuple[Path, Path | None]) -> tuple[int, ...]:
    return tuple(value for path in paths if path is not None for value in _stamp(path))


def _stamp(path: Path) -> tuple[int, int]:
    try:
        stat = path.stat()
    except OSError:
        return (0, 0)
    return stat.st_mtime_ns, stat.st_size


class TextService:
    """The routes: ``wants`` says whether a request is this module's, ``answer`` answers it."""

    def __init__(self, repository: Path, *, openai: bool = True, only_openai: bool = False):
        self.models = TextModels(repository)
        self.openai = openai or only_openai  #: /v1 is served
        self.only_openai = only_openai  #: the front of the OpenAI port: nothing else is served

    def wants(self, incoming: Incoming) -> bool:
        if self.only_openai:
            return True
        path = incoming.target.partition(b"?")[0]
        if self.openai and (path == b"/v1" or path.startswith(b"/v1/")):
            return True
        match = _GENERATE.fullmatch(path)
        return match is not None and self.models.paths(match.group(1).decode("latin-1")) is not None

    async def answer(self, conn: ClientConnection, incoming: Incoming) -> bool:
        """Answer ``incoming`` on ``conn``; whether the connection goes on (as ``ClientConnection._forward``)."""
        reply = _Reply(conn)
        openai = True
        try:
            path = origin_form(incoming.target).partition(b"?")[0]
            match = _GENERATE.fullmatch(path)
            if match is not None and not self.only_openai:
                openai = False
                await self._generate(
                    conn, reply, incoming, match.group(1).decode(), match.group(2) == b"generate"
                )
            elif path in (b"/v1/models", b"/v1/models/") or path.startswith(b"/v1/models/"):
                _method(incoming, "GET")
                await self._list_models(conn, reply, path[len(b"/v1/models/") :].decode())
            elif path in (b"/v1/completions", b"/v1/chat/completions"):
                _method(incoming, "POST")
                await self._complete(conn, reply, incoming, chat=path == b"/v1/chat/completions")
            else:
                raise ApiError(f"no endpoint {path.decode('latin-1')} here (/v1/models, /v1/completions, "
                               "/v1/chat/completions)", 404)  # fmt: skip
        except (ApiError, Refused) as exc:
            error = exc if isinstance(exc, ApiError) else ApiError(str(exc), exc.status)
            if reply.started:
                reply.fail(error)
            elif openai:
                reply.whole(error.status, _json(error.body()), retry=error.status == 503)
            else:
                reply.whole(error.status, _json({"error": str(error)}))
        except UpstreamLost as exc:
            if reply.started or conn.closed:
                conn.close()
                return False
            error = ApiError(str(exc), 502)
            reply.whole(502, _json(error.body() if openai else {"error": str(exc)}))
        except Exception:  # a bug answers this request with 500 and costs nothing else
            log.exception("ge-plugin front: a text request failed")
            if reply.started or conn.closed:
                conn.close()
                return False
            error = ApiError("the front failed on this request (its log says why)", 500)
            reply.whole(500, _json(error.body() if openai else {"error": str(error)}))
        return conn.keep_alive and not conn.closed

    # -- /v1/models --------------------------------------------------------------------------------------

    async def _list_models(self, conn: ClientConnection, reply: _Reply, one: str) -> None:
        names = [one] if one else self.models.names()
        ready = []
        for name in names:
            if self.models.paths(name) is not None:
                status, _ = await _call(conn, b"GET", f"/v2/models/{name}/ready".encode())
                if status == 200:
                    ready.append(name)
        cards = [{"id": name, "object": "model", "created": self._created(name), "owned_by": "ge-plugin"}
                 for name in ready]  # fmt: skip
        if one:
            if not cards:
                raise unknown_model(one)
            reply.whole(200, _json(cards[0]))
        else:
            reply.whole(200, _json({"object": "list", "data": cards}))

    def _created(self, name: str) -> int:
        try:
            return int((self.models.repository / name / "config.pbtxt").stat().st_mtime)
        except OSError:
            return 0

    # -- /v1/completions, /v1/chat/completions -----------------------------------------------------------

    async def _complete(
        self, conn: ClientConnection, reply: _Reply, incoming: Incoming, *, chat: bool
    ) -> None:
        request = parse(_body(conn, incoming), chat=chat)
        tokenizer = await self._tokenizer(conn, request.model)
        ids = await _off_loop(conn, _prompt_ids, tokenizer, request, size=_size(request))
        generation = _Completion(request, tokenizer, ids, reply)
        payload: dict[str, Any] = {"input_ids": ids, "stream": True}
        for key in ("max_tokens", "temperature", "top_p", "seed"):
            value = getattr(request, key)
            if value is not None:
                payload[key] = value
        await _relay(conn, f"/v2/models/{request.model}/generate_stream".encode(), payload, generation)
        generation.end()

    async def _tokenizer(self, conn: ClientConnection, model: str) -> Tokenizer:
        paths = self.models.paths(model)
        if paths is None:
            if _MODEL_NAME.fullmatch(model) and (self.models.repository / model / "config.pbtxt").is_file():
                raise ApiError(
                    f"The model `{model}` takes token ids, not text: its config names no tokenizer "
                    f"({tokenizer_files.TOKENIZER_JSON})", 404, param="model", code="model_not_found"
                )  # fmt: skip
            raise unknown_model(model)
        tokenizer = self.models.cached(paths)
        if tokenizer is not None:
            return tokenizer
        try:
            loaded: Tokenizer = await _off_loop(conn, self.models.tokenizer, paths, size=INLINE_CHARS + 1)
            return loaded
        except TokenizerError as exc:
            raise ApiError(f"the tokenizer of model `{model}` cannot be loaded: {exc}", 500) from None

    # -- text_input on Triton's generate endpoints --------------------------------------------------------

    async def _generate(
        self, conn: ClientConnection, reply: _Reply, incoming: Incoming, model: str, whole: bool
    ) -> None:
        body = _body(conn, incoming)
        if not isinstance(body, dict):
            raise ApiError("a generate request's JSON must be an object")
        tokenizer = await self._tokenizer(conn, model)
        if "text_input" in body:
            text = body.pop("text_input")
            if not isinstance(text, str):
                raise ApiError("text_input must be a string")
            if "input_ids" in body:
                raise ApiError("give text_input or input_ids, not both")
            body["input_ids"] = await _off_loop(conn, tokenizer.encode_prompt, text, size=len(text))
        endpoint = "generate" if whole else "generate_stream"
        path = f"/v2/models/{model}/{endpoint}".encode()
        if whole:
            status, data = await _call(conn, b"POST", path, strict_json.dumps(body))
            if status == 200:
                answer = json.loads(data)
                answer["text_output"] = tokenizer.decode(_ids(answer.get("output_ids")))
                data = _json(answer)
            reply.whole(status, data)
            return
        relay = _TextEvents(tokenizer, _ids(body.get("input_ids")), reply)
        await _relay(conn, path, body, relay)
        relay.end()


# -- a generation's events --------------------------------------------------------------------------------


class _Events:
    """What a relay hands the events of tritonserver's generate_stream to."""

    status = 200
    error: ApiError | None = None
    #: set by the relay: closes the upstream connection (the model sees is_cancelled)
    cancel: Callable[[], None] = staticmethod(lambda: None)
    cancelled = False

    def event(self, event: dict[str, Any]) -> None:
        raise NotImplementedError

    def failed(self, status: int, message: str) -> None:
        self.error = _upstream_error(status, message)


class _Completion(_Events):
    """One OpenAI completion or chat completion, streamed or whole."""

    def __init__(self, request: TextRequest, tokenizer: Tokenizer, prompt_ids: Sequence[int], reply: _Reply):
        from ge_plugin.text.stream import StopText, StreamDecoder

        self.request = request
        self.reply = reply
        self.decoder = StreamDecoder(tokenizer, context=prompt_ids)
        self.stop = StopText(request.stop)
        self.prompt_tokens = len(prompt_ids)
        self.completion_tokens = 0
        self.finish: str | None = None
        self.text: list[str] = []
        self.id = ("chatcmpl-" if request.chat else "cmpl-") + secrets.token_hex(12)
        self.created = int(time.time())
        self.object = "chat.completion" if request.chat else "text_completion"
        # a content chunk is the same JSON every time but for its text: encoded once, the text spliced in
        marker = "\u0000"
        template = self._chunk_json({"content": marker} if request.chat else marker, None)
        self._before, self._after = template.split(_json(marker), 1)

    def event(self, event: dict[str, Any]) -> None:
        if self.finish is not None:
            return
        if "error" in event:
            self.failed(self.status, str(event["error"]))
            return
        if not self.reply.started and self.request.stream:
            self.reply.start_stream()
            if self.request.chat:
                self._chunk({"role": "assistant", "content": ""})
        piece = self.decoder.add(_ids(event.get("output_ids")))
        reason = event.get("finish_reason") or ""
        if reason:
            piece += self.decoder.finish()
        self.completion_tokens = int(event.get("completion_tokens") or self.completion_tokens)
        text = self.stop.push(piece)
        if self.stop.stopped:
            self.finish = "stop"
            self.cancelled = True
            self.cancel()
        elif reason:
            text += self.stop.finish()
            self.finish = _FINISH.get(str(reason), "stop")
        if text:
            if self.request.stream:
                self.reply.event(self._before + _json(text) + self._after)
            else:
                self.text.append(text)

    def _chunk(self, delta: dict[str, str] | str, finish: str | None = None) -> None:
        self.reply.event(self._chunk_json(delta, finish))

    def _chunk_json(self, delta: dict[str, str] | str, finish: str | None) -> bytes:
        choice: dict[str, Any] = {"index": 0}
        if self.request.chat:
            choice["delta"] = delta
        else:
            choice["text"] = delta
        choice.update(logprobs=None, finish_reason=finish)
        chunk = self._head(self.object + ".chunk" if self.request.chat else self.object, [choice])
        if self.request.include_usage:
            chunk["usage"] = None
        return _json(chunk)

    def _head(self, kind: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.request.model,
                "system_fingerprint": None, "choices": choices}  # fmt: skip

    def _usage(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens}  # fmt: skip

    def end(self) -> None:
        """After the relay: the last chunks, or the whole answer; ApiError when the model failed."""
        if self.finish is None:
            raise self.error or ApiError("tritonserver ended the generation without a finish reason", 502)
        if self.request.stream:
            self._chunk({} if self.request.chat else "", self.finish)
            if self.request.include_usage:
                self.reply.event(_json({**self._head(self.object + ".chunk" if self.request.chat else self.object, []),
                                        "usage": self._usage()}))  # fmt: skip
            self.reply.event(b"[DONE]")
            self.reply.end_stream()
            return
        text = "".join(self.text)
        choice: dict[str, Any] = {"index": 0}
        if self.request.chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        choice.update(logprobs=None, finish_reason=self.finish)
        self.reply.whole(200, _json({**self._head(self.object, [choice]), "usage": self._usage()}))


class _TextEvents(_Events):
    """Triton's generate_stream with ``text_output`` added to each event: the text that event completes."""

    def __init__(self, tokenizer: Tokenizer, prompt_ids: Sequence[int], reply: _Reply):
        from ge_plugin.text.stream import StreamDecoder

        self.decoder = StreamDecoder(tokenizer, context=prompt_ids)
        self.reply = reply
        self.done = False

    def event(self, event: dict[str, Any]) -> None:
        if "error" in event and not self.reply.started:
            self.error = ApiError(str(event["error"]), self.status)
            return
        if not self.reply.started:
            self.reply.start_stream()
        if "error" not in event:
            piece = self.decoder.add(_ids(event.get("output_ids")))
            if event.get("finish_reason"):
                piece += self.decoder.finish()
                self.done = True
            event["text_output"] = piece
        self.reply.event(_json(event))

    def end(self) -> None:
        if not self.reply.started:
            raise self.error or ApiError("tritonserver sent no event", 502)
        self.reply.end_stream()


def _upstream_error(status: int, message: str) -> ApiError:
    if status == 404 or "unknown model" in message:
        return ApiError(message, 404, param="model", code="model_not_found")
    if status == 503:
        return ApiError(message, 503, code="overloaded")
    return ApiError(message, status if 400 <= status < 600 else 500)


# -- tritonserver, upstream ------------------------------------------------------------------------------


class _Sink:
    """Upstream's response: an event stream handed event by event to ``events``, or a body kept whole."""

    def __init__(self, events: _Events | None = None):
        self.events = events
        self.status = 0
        self.stream = False
        self.body = bytearray()
        self.pending = b""

    def response_head(
        self, status: int, reason: bytes, headers: list[tuple[bytes, bytes]], length: int | None
    ) -> None:
        self.status = status
        kind = dict(headers).get(b"content-type", b"")
        self.stream = self.events is not None and kind.startswith(b"text/event-stream")
        if self.events is not None:
            self.events.status = status

    def response_body(self, data: bytes | memoryview) -> bool:
        if not self.stream:
            self.body += data
            return False
        self.pending += bytes(data)
        *complete, self.pending = self.pending.split(b"\n\n")
        for block in complete:
            if self.events is None or self.events.cancelled:
                break
            for line in block.split(b"\n"):
                if line.startswith(b"data: "):
                    try:
                        event = json.loads(line[6:])
                    except ValueError:
                        event = {"error": "tritonserver sent an event that is not JSON"}
                    if isinstance(event, dict):
                        self.events.event(event)
        return False

    def response_end(self) -> None:
        if self.events is not None and not self.stream and self.status:
            try:
                message = str(json.loads(self.body).get("error", ""))
            except (ValueError, AttributeError):
                message = self.body.decode("utf-8", "replace")
            self.events.failed(self.status, message or f"tritonserver answered {self.status}")


def _request(conn: ClientConnection, method: bytes, path: bytes, body: bytes = b"") -> Outgoing:
    head = method + b" " + path + b" HTTP/1.1\r\nHost: " + conn.front.rules.upstream_host
    if method == b"POST":
        head += b"\r\nContent-Type: application/json\r\nContent-Length: %d" % len(body)
    return Outgoing(head + b"\r\n\r\n", body, memoryview(b""))


async def _call(conn: ClientConnection, method: bytes, path: bytes, body: bytes = b"") -> tuple[int, bytes]:
    """One request to tritonserver, its status and whole body."""
    sink = _Sink()
    await conn.front.pool.exchange(_request(conn, method, path, body), sink, _attach(conn))
    conn.upstream = None
    return sink.status, bytes(sink.body)


async def _relay(conn: ClientConnection, path: bytes, payload: dict[str, Any], events: _Events) -> None:
    """generate_stream upstream, its events handed to ``events`` as they arrive. A cancel by ``events``
    (a stop string) closes the upstream connection: that is not an error here."""
    attach = _attach(conn)

    def attached(connection: Any) -> None:
        attach(connection)
        events.cancel = connection.close

    try:
        await conn.front.pool.exchange(
            _request(conn, b"POST", path, strict_json.dumps(payload)), _Sink(events), attached
        )
    except UpstreamLost:
        if not events.cancelled:
            raise
    finally:
        conn.upstream = None


def _attach(conn: ClientConnection) -> Callable[[Any], None]:
    def attach(connection: Any) -> None:
        conn.upstream = connection  # the client's disconnect closes it; its flow control pauses it
        if conn.write_paused:
            connection.pause()

    return attach


# -- the client's side ---------------------------------------------------------------------------------------


class _Reply:
    """The client's response, framed here: one whole body, or an event stream (chunked on HTTP/1.1, ended by
    closing the connection on HTTP/1.0)."""

    def __init__(self, conn: ClientConnection):
        self.conn = conn
        self.started = False
        self.chunked = conn.version != "1.0"

    def _head(self, status: int, lines: list[bytes]) -> bytes:
        head = [
            b"HTTP/1.1 %d %s" % (status, _STATUS.get(status, b"OK" if status == 200 else b"Error")),
            *lines,
        ]
        if not self.conn.keep_alive or self.conn.front.stopping:
            self.conn.keep_alive = False
            head.append(b"Connection: close")
        elif self.conn.version == "1.0":
            head.append(b"Connection: keep-alive")
        return b"\r\n".join(head) + b"\r\n\r\n"

    def whole(self, status: int, body: bytes, *, retry: bool = False) -> None:
        if status >= 400:
            self.conn.front.count_refused(Refused("", status))
        lines = [b"Content-Type: application/json", b"Content-Length: %d" % len(body)]
        if retry:
            lines.append(b"Retry-After: 1")
        self._write(self._head(status, lines) + body)

    def start_stream(self) -> None:
        self.started = True
        if not self.chunked:
            self.conn.keep_alive = False  # the end of the stream is the end of the connection
        lines = [b"Content-Type: text/event-stream; charset=utf-8", b"Cache-Control: no-cache"]
        if self.chunked:
            lines.append(b"Transfer-Encoding: chunked")
        self._write(self._head(200, lines))

    def event(self, data: bytes) -> None:
        self._piece(b"data: " + data + b"\n\n")

    def fail(self, error: ApiError) -> None:
        """An error after the stream began: an error event, and the stream ends."""
        self.event(_json(error.body()))
        self.end_stream()

    def end_stream(self) -> None:
        if self.chunked:
            self._write(b"0\r\n\r\n")
        else:
            self.conn.close()

    def _piece(self, data: bytes) -> None:
        self._write(b"%x\r\n%s\r\n" % (len(data), data) if self.chunked else data)

    def _write(self, data: bytes) -> None:
        transport = self.conn.transport
        if transport is not None and not self.conn.closed:
            transport.write(data)


# -- helpers --------------------------------------------------------------------------------------------------


def _method(incoming: Incoming, wanted: str) -> None:
    if incoming.method != wanted:
        raise ApiError(f"this endpoint takes {wanted}, not {incoming.method}", 405)


def _body(conn: ClientConnection, incoming: Incoming) -> object:
    """The request's JSON, read as the rest of the front reads it (inflated, strict)."""
    body = incoming.body
    codings = [value for name, value in incoming.headers if name == b"content-encoding"]
    if len(codings) > 1:
        raise Refused("header content-encoding appears more than once")
    coding = content_coding(codings[0] if codings else None)
    if coding is not None and body:
        body = inflate(body, coding, conn.front.rules.max_body_bytes)
    if not body.strip():
        raise ApiError("the request has no JSON body")
    value = strict_json.loads(body)
    if b"\\u" in body:
        strict_json.dumps(value)  # Refused for a lone surrogate escape, which no tokenizer can take
    return value


def _prompt_ids(tokenizer: Tokenizer, request: TextRequest) -> list[int]:
    if request.chat:
        try:
            return tokenizer.encode_chat(list(request.messages))
        except TokenizerError as exc:
            raise ApiError(str(exc), param="messages") from None
    if isinstance(request.prompt, str):
        return tokenizer.encode_prompt(request.prompt)
    bad = [i for i in request.prompt if not 0 <= i < tokenizer.vocab_size]
    if bad:
        raise ApiError(
            f"prompt token id {bad[0]} is outside the vocabulary [0, {tokenizer.vocab_size})", param="prompt"
        )
    return list(request.prompt)


def _size(request: TextRequest) -> int:
    if request.chat:
        return sum(len(m["content"]) for m in request.messages)
    return len(request.prompt)


async def _off_loop(conn: ClientConnection, function: Callable[..., Any], *args: Any, size: int) -> Any:
    """``function(*args)``, on a worker thread when ``size`` says it is large."""
    if size <= INLINE_CHARS:
        return function(*args)
    return await asyncio.get_running_loop().run_in_executor(conn.front.executor, function, *args)


def _ids(value: object) -> list[int]:
    """Token ids as tritonserver's JSON writes an INT64 tensor: a list, or a bare number for one element."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        return value
    if value is None:
        return []
    raise ApiError(f"token ids must be a list of integers, not {str(value)[:40]}", 400)


def _json(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
