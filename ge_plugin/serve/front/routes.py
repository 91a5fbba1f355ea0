"""Which of tritonserver 2.51's API groups an HTTP path belongs to, as its HTTP endpoint routes them.

The groups are those of ``--http-restricted-api`` (``serve.access.GROUPS``). Every path tritonserver serves is
listed; a path outside the list gets None, and the front treats it as closed (tritonserver would answer 404,
or serve something no one checked).
"""

from __future__ import annotations

import re

_MODEL = rb"/v2/models/[^/]+(?:/versions/[^/]+)?"
#: the restricted groups' paths first: a path that two patterns match (``/v2/models/stats`` is also the
#: metadata path of a model named "stats") counts as the stricter one
_ROUTES = [
    (re.compile(rb"/v2/models(?:/[^/]+(?:/versions/[^/]+)?)?/stats"), "statistics"),
    (re.compile(_MODEL + rb"/config"), "model-config"),
    (re.compile(rb"/v2/repository(?:/[^/]+)?/(?:index|models/[^/]+/(?:load|unload))"), "model-repository"),
    (
        re.compile(rb"/v2/(?:system|cuda)sharedmemory(?:/region/[^/]+)?/(?:status|register|unregister)"),
        "shared-memory",
    ),
    (re.compile(rb"/v2/trace/setting|" + _MODEL + rb"/trace/setting"), "trace"),
    (re.compile(rb"/v2/logging"), "logging"),
    (re.compile(rb"/v2/health/(?:live|ready)"), "health"),
    (re.compile(_MODEL + rb"/ready"), "health"),
    (re.compile(_MODEL + rb"/(?:infer|generate|generate_stream)"), "inference"),
    (re.compile(rb"/v2"), "metadata"),
    (re.compile(_MODEL), "metadata"),
]
#: ``POST /v2/repository[/<repo>]/models/<model>/load``: the model's name
_LOAD = re.compile(rb"/v2/repository(?:/[^/]+)?/models/([^/]+)/load")


def api_group(path: bytes) -> str | None:
    """The API group of ``path`` (no query), or None for a path tritonserver 2.51 does not serve."""
    for pattern, group in _ROUTES:
        if pattern.fullmatch(path):
            return group
    return None


def loaded_model(path: bytes) -> str | None:
    """The model a load request's ``path`` names, or None when it is no load request."""
    match = _LOAD.fullmatch(path)
    return match.group(1).decode("ascii") if match else None
