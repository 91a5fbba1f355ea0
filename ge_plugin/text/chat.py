"""Chat templates rendered as Hugging Face's transformers renders them.

A checkpoint's template was written and tested against transformers, so the environment is the same:
Jinja2's immutable sandbox (a template is data from a checkpoint, not code we trust) with ``trim_blocks``
and ``lstrip_blocks``, the ``loopcontrols`` extension, the globals ``raise_exception`` and ``strftime_now``,
a ``tojson`` filter that keeps non-ASCII text as it is, and the special tokens (``bos_token``,
``eos_token``...) plus ``messages`` and ``add_generation_prompt`` as variables.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2
import jinja2.ext
import jinja2.sandbox

from ge_plugin.errors import TokenizerError


def _raise_exception(message: str) -> None:
    raise jinja2.TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(format: str) -> str:
    return datetime.datetime.now().strftime(format)


def environment() -> jinja2.sandbox.ImmutableSandboxedEnvironment:
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


class ChatTemplate:
    """One compiled template and the special tokens it is rendered with."""

    def __init__(self, source: str, special_tokens: Mapping[str, str]):
        try:
            self.template = environment().from_string(source)
        except jinja2.TemplateError as exc:
            raise TokenizerError(f"the chat template does not compile: {exc}") from None
        self.special_tokens = dict(special_tokens)

    def render(
        self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True, **extra: Any
    ) -> str:
        """The prompt text; TokenizerError with the template's own message when it refuses the chat
        (a template's ``raise_exception('Conversation roles must alternate...')``)."""
        try:
            return str(
                self.template.render(
                    messages=[dict(m) for m in messages],
                    add_generation_prompt=add_generation_prompt,
                    **self.special_tokens,
                    **extra,
                )
            )
        except jinja2.TemplateError as exc:
            raise TokenizerError(f"the chat template refused the messages: {exc}") from None
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
            raise TokenizerError(f"the chat template failed on the messages: {exc}") from None
