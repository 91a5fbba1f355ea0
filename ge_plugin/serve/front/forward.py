"""What the front sends tritonserver for one parsed client request: a request it wrote itself.

The client's request line, headers and body were framed by llhttp (``front.transport``); here they are
read as tritonserver would read them and rewritten: the target in origin form, a body inflated from its
``Content-Encoding``, JSON parsed strictly (``strict_json``), checked (``serve.policy``) and re-encoded, a fresh
``Content-Length`` and ``Inference-Header-Content-Length``, and only the headers the front understands.
What cannot be read one way only is refused with Triton's ``{"error": ...}`` body, never passed through.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs
import httptools

from ge_plugin import gone_clients
from ge_plugin.serve.access import Access
from ge_plugin.serve.front import strict_json
from ge_plugin.serve.front.encoding import content_coding, inflate
from ge_plugin.serve.front.routes import api_group, loaded_model
from ge_plugin.serve.policy import (
    MAX_BODY_BYTES,
    MAX_INPUT_BYTES,
    Refused,
    check_infer_header,
    check_parameters,
)

#: the inference endpoint as tritonserver 2.51 routes it (its regex is ``/v2/models/([^/]+)(/versions/
#: ([0-9]+))?/infer``): every path Triton takes for inference is one of these, so none escapes the policy
_INFER = re.compile(rb"/v2/models/[^/]+(?:/versions/[^/]+)?/infer")
#: path segments: RFC 3986 pchar without percent-encoding (a model name is a directory name; decoding would
#: be one more place where two readers could differ)
_PATH = re.compile(rb"(?:/[A-Za-z0-9._~!$&'()*+,;=:@-]+)+")
_QUERY = re.compile(rb"[A-Za-z0-9._~!$&'()*+,;=:@/?%-]*")
#: Accept-Encoding entries that mean something to tritonserver (response compression)
_CODING = re.compile(r"\s*(gzip|deflate|identity|\*)\s*(?:;\s*q\s*=\s*(0(?:\.\d{0,3})?|1(?:\.0{0,3})?))?\s*")
#: headers the front frames or rewrites itself, which a forwarding rule never passes on
_OWN = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "content-encoding",
        "inference-header-content-length",
        "accept-encoding",
        "connection",
        "keep-alive",
        "expect",
        "te",
        "trailer",
        "upgrade",
        "proxy-connection",
    }
)
#: bytes above which the check runs on a worker thread, so the event loop keeps serving other connections
LARGE_BODY = 256 << 10


@attrs.frozen
class Rules:
    """What the front lets through, and how it addresses tritonserver."""

    upstream_host: bytes = b"127.0.0.1"
    max_input_bytes: int = MAX_INPUT_BYTES
    max_body_bytes: int = MAX_BODY_BYTES
    #: who may use which API group and what a load may ask (serve/access.py); None: every API open, loads
    #: unchecked (the front alone in tests)
    access: Access | None = None
    #: ``--http-header-forward-pattern``: headers tritonserver hands to the model as request parameters
    forward_pattern: re.Pattern[str] | None = None
    #: pass the client's Accept-Encoding on (off in front of the metrics port: the front appends text to an
    #: uncompressed answer there)
    accept_encoding: bool = True


@attrs.define
class Incoming:
    """One client request as llhttp framed it (header names lower case, body de-chunked)."""

    method: str
    target: bytes
    headers: Sequence[tuple[bytes, bytes]]
    body: bytes
    #: the front's ticket for an inference request (0: none), sent as its ``ge_front_ticket`` parameter
    ticket: int = 0


@attrs.frozen
class Outgoing:
    """The request for tritonserver: head, then the re-encoded JSON, then the binary tail (a view)."""

    head: bytes
    json: bytes
    tail: memoryview

    @property
    def size(self) -> int:
        return len(self.head) + len(self.json) + len(self.tail)


def origin_form(target: bytes) -> bytes:
    """``target`` as path[?query], from origin form or absolute form (RFC 9112 3.2); Refused for any other
    form, a path with empty, dot or percent-encoded segments, or bytes outside the URI grammar."""
    if target[:1] != b"/":
        if not target[:7].lower() == b"http://" and not target[:8].lower() == b"https://":
            raise Refused(f"request target {_show(target)} is neither a path nor an http URL")
        try:
            url = httptools.parse_url(target)
        except httptools.HttpParserInvalidURLError:
            raise Refused(f"request target {_show(target)} is not a URL") from None
        if url.userinfo or url.fragment:
            raise Refused(f"request target {_show(target)} has a user or a fragment")
        target = (url.path or b"/") + (b"?" + url.query if url.query is not None else b"")
    path, _, query = target.partition(b"?")
    if not _PATH.fullmatch(path) or any(seg in (b".", b"..") for seg in path.split(b"/")):
        raise Refused(f"request path {_show(path)} is not one tritonserver serves")
    if not _QUERY.fullmatch(query):
        raise Refused(f"request query {_show(query)} holds bytes outside the URI grammar")
    return target


def is_infer(path: bytes) -> bool:
    return _INFER.fullmatch(path.partition(b"?")[0]) is not None


def prepare(request: Incoming, rules: Rules) -> Outgoing:
    """The request tritonserver gets for ``request``; Refused (with its status) when there is none."""
    target = origin_form(request.target)
    headers = _Headers(request.headers)
    body = request.body
    coding = content_coding(headers.one("content-encoding"))
    if coding is not None and body:
        body = inflate(body, coding, rules.max_body_bytes)
    path = target.partition(b"?")[0]
    keys = _checked_key(path, headers, rules)
    infer = is_infer(target)
    split = headers.one("inference-header-content-length")
    if request.method == "GET":
        if body:
            raise Refused("a GET request has no body")
        json, tail = b"", memoryview(b"")
    elif request.method == "POST":
        json_length = len(body)
        if split is not None:
            if not infer:
                raise Refused("Inference-Header-Content-Length is only for inference requests")
            if not split.isdigit() or int(split) > len(body):
                raise Refused(
                    f"Inference-Header-Content-Length {_show(split)} is not a length within the "
                    f"{len(body)}-byte body"
                )
            json_length = int(split)
        view = memoryview(body)
        json = _checked_json(bytes(view[:json_length]), infer, loaded_model(path), rules, request.ticket)
        tail = view[json_length:]
    else:
        raise Refused(f"method {request.method} is not served", 405)
    lines = [
        f"{request.method} ".encode() + target + b" HTTP/1.1",
        b"Host: " + rules.upstream_host,
        b"Content-Length: %d" % (len(json) + len(tail)),
    ]
    if split is not None:
        lines.append(b"Inference-Header-Content-Length: %d" % len(json))
    accept = headers.one("accept-encoding")
    if accept is not None and rules.accept_encoding:
        wanted = accept_encoding(accept)
        if wanted:
            lines.append(b"Accept-Encoding: " + wanted)
    lines += [name + b": " + value for name, value in headers.forwarded(rules)]
    lines += [name.encode() + b": " + value.encode() for name, value in keys.items()]
    return Outgoing(b"\r\n".join(lines) + b"\r\n\r\n", json, tail)


def _checked_key(path: bytes, headers: _Headers, rules: Rules) -> dict[str, str]:
    """The key header tritonserver needs for ``path``'s API group, once the client sent the right one (the
    front writes it itself; the client's own key headers are never forwarded); Refused (403) otherwise. A
    path tritonserver does not serve is closed like a restricted group."""
    if rules.access is None:
        return {}
    group = api_group(path)
    if group is None:
        raise Refused(f"{_show(path)} is not an API of tritonserver's that ge-plugin serve opens", 404)
    needed = rules.access.restriction(group, "http")
    if needed is None:
        return {}
    sent = headers.one(needed.key)
    rules.access.check_key(group, "http", {needed.key: sent} if sent is not None else {})
    return {needed.key: needed.value}


def _checked_json(data: bytes, infer: bool, load: str | None, rules: Rules, ticket: int = 0) -> bytes:
    if not data.strip(b" \t\r\n"):
        return b""  # no JSON at all: Triton answers an inference request without one itself
    value = strict_json.loads(data)
    if infer:
        if not isinstance(value, dict):
            raise Refused("an inference request's JSON must be an object")
        check_parameters(value)
        check_infer_header(value, rules.max_input_bytes)
        parameters = value.get("parameters")
        if isinstance(parameters, dict):
            parameters.pop(gone_clients.PARAMETER, None)  # only the front gives tickets
        if ticket:
            value.setdefault("parameters", {})[gone_clients.PARAMETER] = ticket
    elif load is not None and rules.access is not None:
        if not isinstance(value, dict) or not isinstance(value.get("parameters", {}), dict):
            raise Refused("a load request's JSON must be an object whose parameters are an object")
        if "parameters" in value:
            value["parameters"] = rules.access.check_load(load, value["parameters"])
    return strict_json.dumps(value)


def accept_encoding(value: bytes) -> bytes:
    """``Accept-Encoding`` rebuilt from the codings tritonserver compresses responses with (others left
    out: the response then comes uncompressed, which every client accepts); Refused if it does not parse."""
    kept = []
    for item in value.decode("latin-1").split(","):
        if not item.strip():
            continue
        match = _CODING.fullmatch(item)
        if match is None:
            if re.fullmatch(r"\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+\s*(;\s*q\s*=\s*[0-9.]+\s*)?", item):
                continue  # a coding Triton does not have (br, zstd...)
            raise Refused(f"Accept-Encoding {_show(value)} does not parse")
        coding, weight = match.groups()
        kept.append(coding + (f";q={weight}" if weight is not None else ""))
    return ", ".join(kept).encode()


class _Headers:
    def __init__(self, headers: Sequence[tuple[bytes, bytes]]):
        self.items = headers

    def one(self, name: str) -> bytes | None:
        """The value of a header the front reads; Refused if it comes twice (two readers, two answers)."""
        key = name.encode()
        found = [value for header, value in self.items if header == key]
        if len(found) > 1:
            raise Refused(f"header {name} appears {len(found)} times")
        return found[0] if found else None

    def forwarded(self, rules: Rules) -> list[tuple[bytes, bytes]]:
        if rules.forward_pattern is None:
            return []
        keys = rules.access.key_names("http") if rules.access is not None else frozenset()
        out = []
        for name, value in self.items:
            text = name.decode("latin-1")
            if text in _OWN or text in keys:
                continue
            if rules.forward_pattern.search(text):
                if not all(32 <= b < 127 or b == 9 for b in value):
                    raise Refused(f"header {text} has bytes outside visible ASCII")
                out.append((name, value))
        return out


def _show(value: bytes, limit: int = 80) -> str:
    text = repr(value[:limit])[2:-1]
    return f"'{text}'" + ("..." if len(value) > limit else "")
