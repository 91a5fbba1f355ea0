"""OpenAI request bodies read strictly into one record, and OpenAI's error shape: no I/O, no tokenizer.

What the endpoints take is what OpenAI documents for ``/v1/completions`` and ``/v1/chat/completions`` and
what generation here can honour: ``max_tokens`` (``max_completion_tokens``), ``temperature``, ``top_p``,
``seed``, ``stop``, ``n`` = 1, ``stream``, ``stream_options.include_usage``, ``user``. Parameters that
stock clients send at their neutral value (``frequency_penalty: 0``, ``logprobs: null``...) are taken at that
value only; any other value of them, and any key OpenAI does not have, is refused with 400 naming it
(OpenAI's own answer to a key it does not know), never ignored: a client asking for something it would not
get must hear so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

#: OpenAI's limits on ``stop``: four strings at most
MAX_STOPS = 4
#: characters of one stop string (the held-back text of a stream is at most this long)
MAX_STOP_CHARS = 256
#: characters of a prompt, or of a chat's contents together: far above any context this serves; the
#: tokenizer's cost (on a worker thread above ``INLINE_CHARS``) stays bounded
MAX_PROMPT_CHARS = 4 << 20
MAX_MESSAGES = 4096
#: ``max_tokens`` at most (a model refuses more than its context itself)
MAX_TOKENS = 1 << 20
ROLES = ("system", "user", "assistant")

_COMMON = frozenset(
    {"model", "max_tokens", "temperature", "top_p", "seed", "stop", "n", "stream", "stream_options", "user"}
)
_CHAT = _COMMON | {"messages", "max_completion_tokens"}
_COMPLETION = _COMMON | {"prompt"}
#: keys taken only at the value that asks for nothing (what stock clients and frameworks send by default)
_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "frequency_penalty": (None, 0, 0.0),
    "presence_penalty": (None, 0, 0.0),
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "logit_bias": (None, {}),
    "echo": (None, False),
    "best_of": (None, 1),
    "suffix": (None,),
    "tools": (None, []),
    "tool_choice": (None, "none"),
    "functions": (None, []),
    "function_call": (None, "none"),
    "response_format": (None, {"type": "text"}),
    "parallel_tool_calls": (None,),
    "store": (None, False),
    "metadata": (None, {}),
}


class ApiError(Exception):
    """An answer in OpenAI's error shape: ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(
        self,
        message: str,
        status: int = 400,
        *,
        param: str | None = None,
        code: str | None = None,
        kind: str | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.param = param
        self.code = code
        self.kind = kind or ("invalid_request_error" if status < 500 else "server_error")

    def body(self) -> dict[str, Any]:
        return {"error": {"message": str(self), "type": self.kind, "param": self.param, "code": self.code}}


def unknown_model(name: str) -> ApiError:
    return ApiError(f"The model `{name}` does not exist", 404, param="model", code="model_not_found")


@attrs.frozen
class TextRequest:
    """One completion or chat request, checked; ``prompt`` is text or token ids, ``messages`` a chat's."""

    model: str
    chat: bool
    prompt: str | tuple[int, ...] = ""
    messages: tuple[dict[str, str], ...] = ()
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stream: bool = False
    include_usage: bool = False


def parse(body: object, *, chat: bool) -> TextRequest:
    """The request ``body`` (strict JSON, parsed) asks for; ApiError (400) naming the parameter at fault."""
    if not isinstance(body, dict):
        raise ApiError("the request body must be a JSON object")
    allowed = _CHAT if chat else _COMPLETION
    for key, value in body.items():
        if key in allowed:
            continue
        if key in _NEUTRAL:
            if not any(type(value) is type(v) and value == v for v in _NEUTRAL[key]):
                raise ApiError(
                    f"{key} {_show(value)} is not supported here (only {_neutral(key)})", param=key
                )
            continue
        raise ApiError(f"Unrecognized request argument supplied: {key}", param=key)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError("model is required: the name of a served model (GET /v1/models)", param="model")
    n = body.get("n")
    if n is not None and (_not_int(n) or n != 1):
        raise ApiError(f"n {_show(n)} is not supported: one choice per request (n = 1)", param="n")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise ApiError(f"stream must be true or false, not {_show(stream)}", param="stream")
    include_usage = _stream_options(body.get("stream_options"), bool(stream))
    max_tokens = _int_or_none(body, "max_tokens", 1, MAX_TOKENS)
    if chat:
        newer = _int_or_none(body, "max_completion_tokens", 1, MAX_TOKENS)
        if newer is not None and max_tokens is not None and newer != max_tokens:
            raise ApiError(
                "max_tokens and max_completion_tokens disagree: give one", param="max_completion_tokens"
            )
        max_tokens = newer if newer is not None else max_tokens
    else:
        max_tokens = 16 if max_tokens is None else max_tokens  # OpenAI's default for completions
    seed = _int_or_none(body, "seed", -(1 << 63), (1 << 63) - 1)
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise ApiError(f"user must be a string, not {_show(user)}", param="user")
    return TextRequest(
        model=model,
        chat=chat,
        prompt="" if chat else _prompt(body.get("prompt")),
        messages=_messages(body.get("messages")) if chat else (),
        max_tokens=max_tokens,
        temperature=_number_or_none(body, "temperature", 0.0, 2.0, low_open=False),
        top_p=_number_or_none(body, "top_p", 0.0, 1.0, low_open=True),
        seed=seed,
        stop=_stops(body.get("stop")),
        stream=bool(stream),
        include_usage=include_usage,
    )


def _stream_options(value: object, stream: bool) -> bool:
    if value is None:
        return False
    if not stream:
        raise ApiError("stream_options is only allowed when stream is true", param="stream_options")
    if not isinstance(value, dict) or set(value) - {"include_usage"}:
        raise ApiError(f"stream_options {_show(value)} takes only include_usage", param="stream_options")
    usage = value.get("include_usage", False)
    if not isinstance(usage, bool):
        raise ApiError(
            "stream_options.include_usage must be true or false", param="stream_options.include_usage"
        )
    return usage


def _messages(value: object) -> tuple[dict[str, str], ...]:
    if not isinstance(value, list) or not value:
        raise ApiError("messages must be a non-empty list of {role, content}", param="messages")
    if len(value) > MAX_MESSAGES:
        raise ApiError(f"{len(value)} messages: at most {MAX_MESSAGES}", param="messages")
    out = []
    size = 0
    for i, message in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise ApiError(f"{where} must be an object with role and content", param=where)
        extra = set(message) - {"role", "content", "name"}
        if extra:
            raise ApiError(
                f"{where} has {', '.join(sorted(extra))}, which is not supported here", param=where
            )
        role = message.get("role")
        if role not in ROLES:
            raise ApiError(
                f"{where}.role {_show(role)} is not one of {', '.join(ROLES)}", param=f"{where}.role"
            )
        content = _content(message.get("content"), f"{where}.content")
        size += len(content)
        record = {"role": str(role), "content": content}
        name = message.get("name")
        if name is not None:
            if not isinstance(name, str):
                raise ApiError(f"{where}.name must be a string", param=f"{where}.name")
            record["name"] = name
        out.append(record)
    if size > MAX_PROMPT_CHARS:
        raise ApiError(f"the messages hold {size} characters, more than {MAX_PROMPT_CHARS}", param="messages")
    return tuple(out)


def _content(value: object, where: str) -> str:
    """A message's text: a string, or a list of text parts (joined); other parts (images...) refused."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for j, part in enumerate(value):
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(part.get("text"), str)
            ):
                raise ApiError(
                    f"{where}[{j}] must be a text part {{type: text, text: ...}}", param=f"{where}[{j}]"
                )
            if set(part) - {"type", "text"}:
                raise ApiError(f"{where}[{j}] has keys other than type and text", param=f"{where}[{j}]")
            texts.append(part["text"])
        return "".join(texts)
    raise ApiError(f"{where} must be a string or a list of text parts, not {_show(value)}", param=where)


def _prompt(value: object) -> str | tuple[int, ...]:
    """A string, a list of one string, or a list of token ids (OpenAI's forms of a single prompt)."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], (str, list)):
        value = value[0]  # one prompt in a batch of one
    if isinstance(value, str):
        if len(value) > MAX_PROMPT_CHARS:
            raise ApiError(
                f"the prompt holds {len(value)} characters, more than {MAX_PROMPT_CHARS}", param="prompt"
            )
        return value
    if (
        isinstance(value, list)
        and value
        and all(isinstance(i, int) and not isinstance(i, bool) for i in value)
    ):
        return tuple(value)
    if isinstance(value, list) and len(value) > 1 and all(isinstance(p, (str, list)) for p in value):
        raise ApiError("a batch of prompts is not supported: one prompt per request", param="prompt")
    raise ApiError(f"prompt must be a string or a list of token ids, not {_show(value)}", param="prompt")


def _stops(value: object) -> tuple[str, ...]:
    stops = [value] if isinstance(value, str) else value
    if stops is None:
        return ()
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise ApiError(f"stop must be a string or a list of strings, not {_show(value)}", param="stop")
    if len(stops) > MAX_STOPS:
        raise ApiError(f"stop has {len(stops)} strings: at most {MAX_STOPS}", param="stop")
    if any(len(s) > MAX_STOP_CHARS for s in stops):
        raise ApiError(f"a stop string is longer than {MAX_STOP_CHARS} characters", param="stop")
    return tuple(s for s in stops if s)


def _not_int(value: object) -> bool:
    return not isinstance(value, int) or isinstance(value, bool)


def _int_or_none(body: Mapping[str, object], key: str, low: int, high: int) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if _not_int(value):
        raise ApiError(f"{key} must be an integer, not {_show(value)}", param=key)
    assert isinstance(value, int)
    if not low <= value <= high:
        raise ApiError(f"{key} {value} is outside [{low}, {high}]", param=key)
    return value


def _number_or_none(
    body: Mapping[str, object], key: str, low: float, high: float, *, low_open: bool
) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise ApiError(f"{key} must be a number, not {_show(value)}", param=key)
    if value > high or value < low or (low_open and value == low):
        interval = f"({low:g}, {high:g}]" if low_open else f"[{low:g}, {high:g}]"
        raise ApiError(f"{key} {value} is outside {interval}", param=key)
    return float(value)


def _neutral(key: str) -> str:
    return " or ".join("null" if v is None else _show(v) for v in _NEUTRAL[key])


def _show(value: object, limit: int = 60) -> str:
    import json

    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
