"""``ge-plugin migrate``: from a CANN GE backend (``backend: "npu_ge"``) config.pbtxt to a ge-plugin spec.

``migrate_file`` reads the config, builds the spec (``convert.migrate``), writes it as YAML with every note
as a comment on top, and loads it back with the spec loader, so what it hands over is a spec
``ge-plugin validate`` accepts. docs/migrate.md lists what maps to what.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from ge_plugin.errors import MigrateError, SpecError
from ge_plugin.migrate.convert import Migration, Note, migrate
from ge_plugin.migrate.ge_config import read_config
from ge_plugin.spec import load_spec

__all__ = ["Migration", "Note", "format_notes", "migrate_file", "spec_yaml"]


@attrs.frozen
class Result:
    migration: Migration
    text: str  #: the spec file's text


def migrate_file(
    config: str | Path,
    *,
    soc_version: str,
    spec_path: Path | None = None,
    batch_gears: Sequence[int] | None = None,
    dims_gears: Sequence[Sequence[int]] | None = None,
    backend_config: Sequence[tuple[str, str, str]] = (),
    renumber_devices: bool = False,
) -> Result:
    """Migrate ``config``; ``spec_path`` is where the spec will be written (relative paths in it are relative
    to its folder; None: the current folder); ``backend_config``: the server's ``--backend-config`` settings
    as (backend, key, value). MigrateError names the file and line of what cannot be migrated."""
    config = Path(config)
    ge = read_config(config)
    spec_dir = spec_path.parent if spec_path is not None else Path(".")
    migration = migrate(
        ge,
        soc_version=soc_version,
        spec_dir=spec_dir,
        batch_gears=batch_gears,
        dims_gears=dims_gears,
        backend_config=backend_config,
        renumber_devices=renumber_devices,
    )
    text = spec_yaml(migration.spec, config, migration.notes)
    _check(text, config)
    return Result(migration=migration, text=text)


def _check(text: str, config: Path) -> None:
    """The spec must load: a migration that writes a spec ``validate`` refuses is a bug or a value the GE
    config allowed and the spec does not (then the problem names the config)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "migrated.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            load_spec(path)
        except SpecError as exc:
            problems = "\n".join(p.replace(str(path), "(migrated spec)") for p in exc.problems)
            raise MigrateError(f"{config}: the migrated spec does not validate:\n{problems}") from None


def format_notes(config: Path, notes: Sequence[Note]) -> list[str]:
    """``config.pbtxt:LINE: key: reason`` lines (``--backend-config=npu_ge,KEY: reason`` for a launch
    setting, line 0), the changed ones first, then those not carried over."""
    lines = []
    for carried, title in ((True, "carried over with a change"), (False, "not carried over")):
        chosen = [n for n in notes if n.carried == carried]
        if chosen:
            lines.append(f"{title}:")
            lines.extend(f"  {_where(config, n)}: {n.reason}" for n in chosen)
    return lines


def _where(config: Path, note: Note) -> str:
    if note.line == 0:
        key = note.key.removeprefix("parameters.")
        return f"--backend-config={key if ',' in key else 'npu_ge,' + key}"
    return f"{config}:{note.line}: {note.key}"


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


def spec_yaml(spec: dict[str, Any], config: Path, notes: Sequence[Note]) -> str:
    """The spec as a person would write it (lists of numbers inline), under a header with every note."""
    lines = [f"# Migrated by `ge-plugin migrate` from {config} (CANN GE backend, backend: npu_ge)."]
    lines += [f"# {line}" for line in format_notes(config, notes)] or ["# Every key carried over as is."]
    lines.append("")
    for key, value in spec.items():
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
