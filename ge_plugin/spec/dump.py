"""ModelSpec -> the YAML a person would write: fields in declaration order, lists of numbers inline, each field
left out where it holds its default unless the caller asks to show it (``ge-plugin migrate`` shows what the
config it came from stated, defaults included)."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable
from typing import Any

import attrs

from ge_plugin.dtypes import DType
from ge_plugin.spec.model import NOT_IN_YAML, DimRef, ModelSpec, VersionPolicy


def spec_data(spec: ModelSpec, *, shown: Collection[str] = ()) -> dict[str, Any]:
    """``spec`` as YAML-ready data. ``shown``: dotted paths (``placement``, ``batching.max_queue_delay_us``)
    written even at their default; a shown section is written with all its fields."""
    return _fields(spec, "", frozenset(shown), False)


def spec_yaml(spec: ModelSpec, *, header: Iterable[str] = (), shown: Collection[str] = ()) -> str:
    """The spec's YAML text under ``header`` (comment lines, without the ``#``; a blank line follows them)."""
    lines = [f"# {line}" if line else "#" for line in header]
    if lines:
        lines.append("")
    for key, value in spec_data(spec, shown=shown).items():
        if isinstance(value, dict):
            lines.append(f"{key}:")
            lines.extend(f"  {k}: {_flow(v)}" for k, v in value.items())
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            lines.append(f"{key}:")
            for item in value:
                first, *rest = item.items()
                lines.append(f"  - {first[0]}: {_flow(first[1])}")
                lines.extend(f"    {k}: {_flow(v)}" for k, v in rest)
        else:
            lines.append(f"{key}: {_flow(value)}")
    return "\n".join(lines) + "\n"


def _fields(obj: Any, prefix: str, shown: frozenset[str], everything: bool) -> dict[str, Any]:
    out = {}
    for field in attrs.fields(type(obj)):
        if field.metadata.get(NOT_IN_YAML):
            continue
        path = prefix + field.name
        value = getattr(obj, field.name)
        show = everything or path in shown
        if show or field.default is attrs.NOTHING or value != _default(field):
            out[field.name] = _plain(value, path + ".", shown, show)
    return out


def _default(field: attrs.Attribute[Any]) -> Any:
    default: Any = field.default
    factory = getattr(default, "factory", None)  # an attrs.Factory (the spec's factories take no self)
    return factory() if callable(factory) else default


def _plain(value: Any, prefix: str, shown: frozenset[str], everything: bool) -> Any:
    if isinstance(value, DType):
        return value.short
    if isinstance(value, DimRef):
        return str(value)
    if isinstance(value, VersionPolicy) and value.all_versions:
        return "all"
    if attrs.has(type(value)):
        return _fields(value, prefix, shown, everything)
    if isinstance(value, (tuple, list)):
        return [_plain(item, prefix, shown, everything) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item, prefix, shown, everything) for key, item in value.items()}
    return value


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-/]*")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    text = str(value)
    if _PLAIN.fullmatch(text) and text.lower() not in _YAML_WORDS:
        return text
    return json.dumps(text)


def _flow(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_scalar(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    return _scalar(value)
