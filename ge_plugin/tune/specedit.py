"""A configuration written into the user's own spec: the same file, its comments kept, only the knobs changed.

Every candidate of a sweep, and the spec a sweep hands back, is the input spec's text with the changed
values put in place (a value replaced where it was written, a missing key added to its section, a missing
section appended), each changed line carrying a comment with the value it had. The text is then loaded by
the spec loader like any spec, so a candidate the spec's rules refuse is refused in the validator's words,
and what a sweep writes always passes ``ge-plugin validate``. The loaded spec is compared with what was
asked for, so an edit that landed anywhere else is an error, never a silently different model.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml
from yaml.nodes import CollectionNode, MappingNode, Node, ScalarNode

from ge_plugin.errors import SpecError, TuneError
from ge_plugin.spec import load_spec
from ge_plugin.spec.model import ModelSpec
from ge_plugin.tune.space import Config, show

Path_ = tuple[str, ...]


@attrs.frozen
class Edit:
    path: Path_  #: ("batching", "gears")
    value: Any  #: ints, tuples of ints, tuples of tuples
    was: Any  #: the value before, for the comment
    note: str = ""  #: the comment, when not "tuned, was <was>"


def edits_for(spec: ModelSpec, config: Config) -> list[Edit]:
    """The changes that turn ``spec`` into ``config``: only the knobs whose value differs."""
    edits = []

    def change(path: Path_, value: Any, was: Any) -> None:
        if value != was:
            edits.append(Edit(path, value, was))

    change(("placement", "instances_per_device"), config.instances, spec.placement.instances_per_device)
    change(("placement", "streams_per_instance"), config.streams, spec.placement.streams_per_instance)
    if spec.batching is not None:
        b = spec.batching
        change(("batching", "gears"), config.batch_gears, b.gears)
        change(("batching", "max_queue_delay_us"), config.max_queue_delay_us, b.max_queue_delay_us)
        preferred = config.preferred_list(spec)
        change(("batching", "preferred_batch_sizes"), preferred, b.preferred_batch_sizes)
    if spec.dims_gears:
        change(("dims_gears",), _dims_value(config.dims_gears), _dims_value(spec.dims_gear_values))
    if spec.image_sizes:
        change(("image_sizes",), config.image_sizes, tuple(tuple(s) for s in spec.image_sizes))
    return edits


def relocation(spec: ModelSpec, target: Path) -> list[Edit]:
    """The edits that keep a spec's relative ``source`` paths pointing at the same files once the spec is
    written to ``target`` instead of where it was; TuneError for per-version sources (left to the user)."""
    if spec.path is None or Path(spec.path).resolve().parent == Path(target).resolve().parent:
        return []
    if any(files.source for files in spec.versions.values()):
        raise TuneError(
            f"{spec.path}: versions with their own source: write the tuned spec next to it (--output-spec)"
        )
    source = spec.model.source
    if os.path.isabs(source):
        return []
    moved = os.path.relpath(Path(spec.path).resolve().parent / source, Path(target).resolve().parent)
    return [Edit(("model", "source"), moved, source, f"the input spec's {source}, from this file's folder")]


def _dims_value(gears: tuple[tuple[int, ...], ...]) -> tuple[Any, ...]:
    """The shorthand ``[16, 32]`` when every -1 dim takes the same value in each gear, else the full form."""
    if all(len(set(g)) == 1 for g in gears):
        return tuple(g[0] for g in gears)
    return gears


def flow(value: Any) -> str:
    """A YAML flow rendering of ints and (nested) tuples of ints."""
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a YAML double-quoted scalar
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"cannot write {value!r} into a spec")
    return str(value)


def apply(text: str, edits: Sequence[Edit], *, comment: str = "tuned, was") -> str:
    """``text`` with every edit made; the edited lines end with ``# <comment> <old value>``."""
    for edit in edits:
        was = show(edit.was) if edit.was is not None else "unset"
        text = _apply_one(text, edit, edit.note or f"{comment} {was}")
    return text


def header(text: str, lines: Sequence[str]) -> str:
    """``lines`` as a comment block on top of ``text``."""
    block = "".join(f"# {line}\n" if line else "#\n" for line in lines)
    return block + ("#\n" if text.startswith("#") else "\n") + text


def _apply_one(text: str, edit: Edit, note: str) -> str:
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(root, MappingNode):
        raise TuneError("the spec is not a YAML mapping")
    rendered = flow(edit.value)
    parent: MappingNode = root
    for depth, key in enumerate(edit.path):
        child = _lookup(parent, key)
        last = depth == len(edit.path) - 1
        if child is None:
            rest = edit.path[depth:]
            return _insert(text, parent, rest, rendered, note, top=parent is root)
        if last:
            key_node = _entry(parent, key)[0]  # type: ignore[index]
            return _replace(text, key_node, child, rendered, note, in_flow=parent.flow_style)
        if not isinstance(child, MappingNode):
            raise TuneError(f"{'.'.join(edit.path[: depth + 1])} is not a mapping in the spec")
        parent = child
    raise AssertionError("unreachable")


def _lookup(mapping: MappingNode, key: str) -> Node | None:
    found = _entry(mapping, key)
    return found[1] if found else None


def _entry(mapping: MappingNode, key: str) -> tuple[Node, Node] | None:
    for key_node, value_node in mapping.value:
        if isinstance(key_node, ScalarNode) and key_node.value == key:
            return key_node, value_node
    return None


def _content_end(node: Node) -> int:
    """Where a node's own text ends: a block collection's end mark lies past trailing comments and blank
    lines (the next token), which belong to what follows."""
    if not isinstance(node, CollectionNode) or node.flow_style or not node.value:
        return node.end_mark.index
    last = node.value[-1]
    return _content_end(last[1] if isinstance(last, tuple) else last)


def _replace(text: str, key: Node, node: Node, rendered: str, note: str, *, in_flow: bool) -> str:
    start, end = node.start_mark.index, _content_end(node)
    if isinstance(node, CollectionNode) and not node.flow_style:
        # a block collection starts on the next line: the flow value goes right after "key:" instead
        colon = text.index(":", key.end_mark.index)
        start, rendered = colon + 1, " " + rendered
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    rest = text[end:line_end]
    if in_flow or (rest.strip() and not rest.strip().startswith("#")):
        return text[:start] + rendered + text[end:]  # inside a flow collection: no comment possible here
    return text[:start] + rendered + f"  # {note}" + text[line_end:]


def _insert(text: str, parent: MappingNode, path: Path_, rendered: str, note: str, *, top: bool) -> str:
    if parent.flow_style:
        close = parent.end_mark.index - 1  # the "}"
        entry = _nested_flow(path, rendered)
        sep = ", " if parent.value else ""
        return text[:close].rstrip() + sep + entry + text[close:]
    if top or not parent.value:
        body = _block(path, rendered, note, indent=0)
        if not text.endswith("\n"):
            text += "\n"
        return text + ("\n" if top else "") + body
    indent = parent.value[0][0].start_mark.column
    end = _content_end(parent)
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    return text[:line_end] + "\n" + _block(path, rendered, note, indent=indent).rstrip("\n") + text[line_end:]


def _block(path: Path_, rendered: str, note: str, *, indent: int) -> str:
    lines = []
    for depth, key in enumerate(path):
        pad = " " * (indent + 2 * depth)
        if depth == len(path) - 1:
            lines.append(f"{pad}{key}: {rendered}  # {note}")
        else:
            lines.append(f"{pad}{key}:")
    return "\n".join(lines) + "\n"


def _nested_flow(path: Path_, rendered: str) -> str:
    if len(path) == 1:
        return f"{path[0]}: {rendered}"
    return f"{path[0]}: {{{_nested_flow(path[1:], rendered)}}}"


def load_text(text: str, *, like: ModelSpec) -> ModelSpec:
    """``text`` loaded as a spec that lives where ``like`` does (its relative ``source`` resolves the same);
    SpecError in the validator's words."""
    with tempfile.TemporaryDirectory(prefix="ge-plugin-tune-") as folder:
        path = Path(folder) / (like.path.name if like.path is not None else f"{like.name}.yaml")
        path.write_text(text, encoding="utf-8")
        try:
            spec = load_spec(path)
        except SpecError as exc:
            problems = [p.replace(str(path), like.path.name if like.path else "spec") for p in exc.problems]
            raise SpecError(problems) from None
    return attrs.evolve(spec, path=like.path)


def spec_for(spec: ModelSpec, text: str, config: Config) -> tuple[ModelSpec, str]:
    """``config`` written into ``text`` (the text of ``spec``) and loaded: the candidate and its text.

    SpecError when the spec's rules refuse the configuration; TuneError when the edited text does not say
    what was asked (a spec layout this editor does not handle)."""
    edited = apply(text, edits_for(spec, config))
    candidate = load_text(edited, like=spec)
    from ge_plugin.tune.space import start_config

    got = start_config(candidate)
    want = attrs.evolve(config, preferred_batch_sizes=got.preferred_batch_sizes)
    if got != want or config.preferred_list(spec) != _preferred(candidate):
        raise TuneError(
            f"{spec.path or spec.name}: writing {config.describe()} into the spec gave {got.describe()}; "
            "please report this spec's layout"
        )
    return candidate, edited


def _preferred(spec: ModelSpec) -> tuple[int, ...] | None:
    return spec.batching.preferred_batch_sizes if spec.batching is not None else None
