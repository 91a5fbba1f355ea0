"""Writing specs into a Triton model repository, and comparing a repository with its specs.

Each model gets ``<repo>/<name>/config.pbtxt`` and a folder per version, ``<repo>/<name>/1/`` unless the
spec lists ``versions`` (each with a ``.gitkeep``, so that the folder exists in git while the OM files
generated into it stay ignored), and a copy of the spec's tokenizer files beside it (``tokenizer.json``,
``tokenizer_config.json``: the config's parameters name them). Nothing else in the repository is touched: the OM files, other backends'
models, stale ``ge`` models and version folders no spec lists are the user's to manage (they are reported).
Rendering again changes no file whose content stays the same, not even its time: Triton reloads a version
whose folder looks modified, which would restart a serving version in the middle of a rolling update.
``diff_repository`` is the read-only twin used by ``ge-plugin render --check``.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple, Union

from ge_plugin._files import write_atomic
from ge_plugin.errors import RenderError
from ge_plugin.render.pbtxt import render_text
from ge_plugin.spec.model import ModelSpec
from ge_plugin.text import files as tokenizer_files

CONFIG_FILE = "config.pbtxt"
KEEP_FILE = ".gitkeep"

#: a folder Triton takes for a version: digits, not starting with 0 (it ignores every other name)
_VERSION_NAME = re.compile(r"[1-9][0-9]*")

_GE_BACKEND = re.compile(r'^\s*backend\s*:\s*"ge"\s*$', re.MULTILINE)
_ANY_BACKEND = re.compile(r"^\s*(backend|platform)\s*:", re.MULTILINE)

PathLike = Union[str, "os.PathLike[str]"]


class Rendered(NamedTuple):
    """What rendering one spec did to the repository."""

    config: Path
    #: the config's text changed (or it is new); False: left as it was, times included
    rewritten: bool
    #: what else was made or rewritten, relative to the model's folder: new version folders (``2/``) and
    #: tokenizer copies
    made: tuple[str, ...]


def write_repository(specs: Sequence[ModelSpec], repo: PathLike) -> list[Path]:
    """Render every spec into ``repo``; returns the config.pbtxt paths, in spec order (``render_repository``
    says which changed)."""
    return [rendered.config for rendered in render_repository(specs, repo)]


def render_repository(specs: Sequence[ModelSpec], repo: PathLike) -> list[Rendered]:
    """Render every spec into ``repo``, in spec order, saying what changed.

    A config is rewritten only when its text changes. RenderError when a model folder holds another
    backend's config (a name clash the user must resolve) or the file system refuses.
    """
    repo = Path(repo)
    _check_names(specs)
    if repo.exists() and not repo.is_dir():
        raise RenderError(f"{repo} is not a directory")
    done = []
    for spec in specs:
        config = repo / spec.name / CONFIG_FILE
        text = render_text(spec)
        current = _read(config)
        if current is not None and not _is_ge_config(current) and _ANY_BACKEND.search(current):
            raise RenderError(
                f"{config} belongs to another backend; not overwriting it with model {spec.name!r} "
                f"from {spec.path} (rename the model or move the folder)"
            )
        made = []
        try:
            for number in spec.version_numbers:
                version = config.parent / str(number)
                if not version.is_dir():
                    made.append(f"{number}/")
                version.mkdir(parents=True, exist_ok=True)
                keep = version / KEEP_FILE
                if not keep.exists():
                    keep.touch()
            for source, copy in _tokenizer_copies(spec, config.parent):
                if _read_bytes(copy) != source:
                    write_atomic(copy, source)
                    made.append(copy.name)
            if current != text:
                _replace(config, text)
        except OSError as exc:
            raise RenderError(f"cannot write {config}: {exc.strerror or exc}") from None
        done.append(Rendered(config, current != text, tuple(made)))
    return done


def diff_repository(specs: Sequence[ModelSpec], repo: PathLike) -> str:
    """A unified diff from ``repo`` to what rendering ``specs`` would write; "" when they agree.

    Also lists a missing version folder, and removes (in the diff) every ``backend: "ge"`` model of the
    repository that none of ``specs`` renders: a stale model would still be served.
    """
    repo = Path(repo)
    _check_names(specs)
    chunks: list[str] = []
    for spec in specs:
        config = repo / spec.name / CONFIG_FILE
        chunks.append(_diff(config, _read(config), render_text(spec), f"rendered from {spec.path}"))
        for number in spec.version_numbers:
            version = config.parent / str(number)
            if not version.is_dir():
                chunks.append(f"Only in the specs: {version}{os.sep}\n")
        for source, copy in _tokenizer_copies(spec, config.parent):
            if _read_bytes(copy) != source:
                chunks.append(f"Files differ: {copy} and the spec's tokenizer file\n")
        for version, why in _unlisted_versions(spec, config.parent):
            chunks.append(f"Only in the repository: {version}{os.sep} ({why})\n")
    for config in stale_models(specs, repo):
        chunks.append(_diff(config, _read(config), None, "no spec renders this model"))
    return "".join(chunks)


def stale_models(specs: Iterable[ModelSpec], repo: PathLike) -> list[Path]:
    """config.pbtxt files of ``backend: "ge"`` models in ``repo`` that none of ``specs`` is named after."""
    repo = Path(repo)
    names = {spec.name for spec in specs}
    if not repo.is_dir():
        return []
    stale = []
    for model_dir in sorted(repo.iterdir()):
        config = model_dir / CONFIG_FILE
        if model_dir.name not in names and config.is_file():
            text = _read(config)
            if text is not None and _is_ge_config(text):
                stale.append(config)
    return stale


def stale_versions(specs: Iterable[ModelSpec], repo: PathLike) -> list[tuple[Path, str]]:
    """Version folders in ``repo`` that no spec lists but Triton would serve, and why it would."""
    repo = Path(repo)
    return [found for spec in specs for found in _unlisted_versions(spec, repo / spec.name)]


def served_versions(spec: ModelSpec, available: Iterable[int]) -> list[int]:
    """The versions Triton serves among ``available`` version folders, by the spec's version_policy."""
    available = sorted(set(available))
    policy = spec.version_policy
    if policy is None:
        return available[-1:]
    if policy.all_versions:
        return available
    if policy.latest is not None:
        return available[-policy.latest :]
    return [v for v in available if v in (policy.specific or ())]


def _unlisted_versions(spec: ModelSpec, model_dir: Path) -> list[tuple[Path, str]]:
    if not model_dir.is_dir():
        return []
    found = {int(p.name) for p in model_dir.iterdir() if p.is_dir() and _VERSION_NAME.fullmatch(p.name)}
    served = served_versions(spec, found | set(spec.version_numbers))
    policy = spec.version_policy
    rule = (
        "version_policy all"
        if policy is not None and policy.all_versions
        else f"version_policy latest {policy.latest}"
        if policy is not None and policy.latest is not None
        else "Triton's default policy, the latest version"
    )
    return [
        (model_dir / str(v), f"version {v} is in no spec, yet {rule} serves it: delete the folder or list it")
        for v in served
        if v not in spec.version_numbers
    ]


def _tokenizer_copies(spec: ModelSpec, model_dir: Path) -> list[tuple[bytes, Path]]:
    """(the bytes of each tokenizer file of the spec, where its copy goes); RenderError for a missing file."""
    sources = spec.tokenizer_sources()
    if sources is None:
        return []
    names = (tokenizer_files.JSON_NAME, tokenizer_files.CONFIG_NAME)
    copies = []
    for source, name in zip(sources, names):
        if source is None:
            continue
        try:
            copies.append((source.read_bytes(), model_dir / name))
        except FileNotFoundError:
            continue  # like an ONNX source, it need not exist yet (demo-models writes it); the load names it
        except OSError as exc:
            raise RenderError(
                f"{spec.path}: tokenizer file {source} cannot be read ({exc.strerror or exc}); "
                "`ge-plugin demo-models DIR` writes the demo LLaMA's"
            ) from None
    return copies


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _replace(path: Path, text: str) -> None:
    write_atomic(path, text.encode("utf-8"))


def _check_names(specs: Sequence[ModelSpec]) -> None:
    seen: dict[str, ModelSpec] = {}
    for spec in specs:
        if spec.name in seen:
            raise RenderError(
                f"model name {spec.name!r} is used by both {seen[spec.name].path} and {spec.path}"
            )
        seen[spec.name] = spec


def _is_ge_config(text: str) -> bool:
    return _GE_BACKEND.search(text) is not None


def _read(path: Path) -> Union[str, None]:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise RenderError(f"cannot read {path}: {exc}") from None


def _diff(path: Path, current: Union[str, None], wanted: Union[str, None], why: str) -> str:
    if current == wanted:
        return ""
    lines = difflib.unified_diff(
        _lines(current),
        _lines(wanted),
        fromfile=str(path) if current is not None else "/dev/null",
        tofile=f"{path} ({why})" if wanted is not None else f"/dev/null ({why}: {path})",
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


def _lines(text: Union[str, None]) -> list[str]:
    return [] if text is None else text.splitlines(keepends=True)
