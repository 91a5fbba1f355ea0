"""``ge-plugin migrate``: from a CANN GE backend (``backend: "npu_ge"``) config.pbtxt to a ge-plugin spec.

``migrate_file`` reads the config, builds the spec (``convert.migrate``), checks it as the spec loader would,
and writes it as YAML with every note as a comment on top, so what it hands over is a spec
``ge-plugin validate`` accepts. docs/migrate.md lists what maps to what.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs

from ge_plugin.errors import MigrateError
from ge_plugin.migrate.convert import Migration, Note, migrate
from ge_plugin.migrate.ge_config import read_config
from ge_plugin.spec.dump import spec_yaml
from ge_plugin.spec.load import spec_problems

__all__ = ["Migration", "Note", "format_notes", "migrate_file"]


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
    problems = spec_problems(migration.spec)
    if problems:
        # a value the GE config allowed and a spec does not (or a bug): named as the spec loader names it
        raise MigrateError(f"{config}: the migrated spec does not validate:\n" + "\n".join(problems))
    text = spec_yaml(migration.spec, header=_header(config, migration.notes), shown=migration.shown)
    return Result(migration=migration, text=text)


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


def _header(config: Path, notes: Sequence[Note]) -> list[str]:
    """The spec file's comment on top: where it came from and every note."""
    lines = [f"Migrated by `ge-plugin migrate` from {config} (CANN GE backend, backend: npu_ge)."]
    return lines + (format_notes(config, notes) or ["Every key carried over as is."])
