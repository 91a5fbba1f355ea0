"""YAML -> ModelSpec, with every problem reported at once as ``file.yaml:LINE: $.path: message``.

One cattrs Converter (``forbid_extra_keys``, so a misspelled key is an error, not a silent default) with
strict hooks: YAML's ``8`` is not a string and ``"8"`` or ``1.5`` is not an int. cattrs' ``transform_error``
gives each problem its path; marks.py gives each path its line.

attrs runs a class's validators only once cattrs has structured all of its fields, and stops at the first
that fails. To still report everything, when a spec does not load, every field that structures on its own
is checked by its validator, wherever the other problems are; the cross-field checks then run if the spec
structures with validators switched off. Only they wait for a spec whose keys and types are right.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import attrs
import cattrs
import yaml
from cattrs.cols import homogenous_tuple_structure_factory
from cattrs.errors import ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn, mapping_structure_factory, override

from ge_plugin import dtypes
from ge_plugin.errors import SpecError
from ge_plugin.spec import validators as v
from ge_plugin.spec.marks import AliasExpansionError, Location, MarkedDocument, load_marked
from ge_plugin.spec.model import (
    NOT_IN_YAML,
    AtcValue,
    DimRef,
    DimsGearsInput,
    ModelSpec,
    VersionFiles,
    VersionPolicy,
)

SPEC_SUFFIXES = (".yaml", ".yml")

#: (location from the spec root, message)
Problem = tuple[Location, str]


@attrs.frozen
class Checked:
    """One spec file after loading: the spec when it is valid, else every problem found in it."""

    path: Path
    spec: Union[ModelSpec, None]
    problems: tuple[str, ...]


def load_spec(path: Union[str, os.PathLike[str]]) -> ModelSpec:
    """Load and check one spec; SpecError lists every problem."""
    checked = _check_file(Path(path))
    if checked.spec is None:
        raise SpecError(checked.problems)
    return checked.spec


def load_specs(paths_or_dirs: Iterable[Union[str, os.PathLike[str]]]) -> list[ModelSpec]:
    """Load specs (a directory means its ``*.yaml``/``*.yml``, sorted) whose model names are unique.

    SpecError lists every problem of every file.
    """
    checked = check_specs(paths_or_dirs)
    problems = [problem for item in checked for problem in item.problems]
    if problems:
        raise SpecError(problems)
    return [item.spec for item in checked if item.spec is not None]


def check_specs(paths_or_dirs: Iterable[Union[str, os.PathLike[str]]]) -> list[Checked]:
    """Check every spec file without raising: what ``ge-plugin validate`` reports, file by file."""
    checked: list[Checked] = []
    for path in _expand(paths_or_dirs, checked):
        checked.append(_check_file(path))
    return _unique_names(checked)


def spec_files(paths_or_dirs: Iterable[Union[str, os.PathLike[str]]]) -> list[Path]:
    """The spec files named by files and directories; SpecError for paths that hold none."""
    missing: list[Checked] = []
    files = _expand(paths_or_dirs, missing)
    if missing:
        raise SpecError([problem for item in missing for problem in item.problems])
    return files


def _expand(paths_or_dirs: Iterable[Union[str, os.PathLike[str]]], failed: list[Checked]) -> list[Path]:
    """Files in order, each once (``specs specs/llama.yaml`` names llama.yaml twice)."""
    files: list[Path] = []
    for item in paths_or_dirs:
        path = Path(item)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in SPEC_SUFFIXES and p.is_file())
            if not found:
                failed.append(
                    Checked(path, None, (f"{path}: no *.yaml or *.yml spec files in this directory",))
                )
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            failed.append(Checked(path, None, (f"{path}: no such file or directory",)))
    seen: set[Path] = set()
    unique = []
    for path in files:
        if path.resolve() not in seen:
            seen.add(path.resolve())
            unique.append(path)
    return unique


def _unique_names(checked: list[Checked]) -> list[Checked]:
    first: dict[str, Path] = {}
    out = []
    for item in checked:
        spec = item.spec
        if spec is not None and spec.name in first:
            line = _name_line(item.path)
            problem = (
                f"{item.path}:{line}: $.name: model name {spec.name!r} is already used by {first[spec.name]}"
            )
            item = Checked(item.path, None, (problem,))
        elif spec is not None:
            first[spec.name] = item.path
        out.append(item)
    return out


def _name_line(path: Path) -> int:
    return load_marked(path.read_text(encoding="utf-8")).line_of(("name",))


def _check_file(path: Path) -> Checked:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return Checked(path, None, (f"{path}: cannot read: {exc}",))
    try:
        document = load_marked(text)
    except AliasExpansionError as exc:
        return Checked(path, None, (f"{path}:{exc.line}: {show_path(exc.location)}: {exc.message}",))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        what = " ".join(
            str(part) for part in (getattr(exc, "context", None), getattr(exc, "problem", None)) if part
        )
        return Checked(path, None, (f"{path}:{line}: $: invalid YAML: {what or exc}",))
    spec, problems = _structure(document.data)
    problems = [
        *((d.location, f"duplicate key (first at line {d.first_line})") for d in document.duplicates),
        *problems,
    ]
    if spec is None or problems:
        return Checked(path, None, _format(path, document, problems or [((), "the spec does not structure")]))
    return Checked(path, attrs.evolve(spec, path=path), ())


_STRUCTURE_ERRORS = (cattrs.BaseValidationError, ValueError, TypeError)


def _structure(data: Any) -> tuple[Union[ModelSpec, None], list[Problem]]:
    try:
        spec = _converter.structure(data, ModelSpec)
    except _STRUCTURE_ERRORS as exc:
        problems = _cattrs_problems(exc)
    else:
        return spec, _cross_problems(spec)
    # attrs stopped at the first failing validator of each class, and a class with a bad field was never
    # built at all: run every validator on every field that structures on its own.
    problems.extend(_field_problems(data, ModelSpec, ()))
    try:
        # Not thread-safe (attrs keeps the switch globally); specs are loaded by one CLI thread.
        with attrs.validators.disabled():
            unchecked = _converter.structure(data, ModelSpec)
    except _STRUCTURE_ERRORS:
        return None, problems  # the cross-field checks need every field to structure
    return None, [*problems, *_cross_problems(unchecked)]


def spec_problems(spec: ModelSpec) -> list[str]:
    """``$.path: message`` for every problem of a spec built in code (with validators off): each field's
    validator, then the cross-field checks; empty when the spec is one ``load_spec`` would accept."""
    problems = [*_built_problems(spec, ()), *_cross_problems(spec)]
    return [f"{show_path(where)}: {message}" for where, message in problems]


def _built_problems(obj: Any, where: Location) -> Iterable[Problem]:
    for field in attrs.fields(type(obj)):
        value = getattr(obj, field.name)
        if field.validator is not None:
            try:
                field.validator(obj, field, value)
            except (ValueError, TypeError) as exc:
                yield from ((where + suffix, message) for suffix, message in _describe(exc))
        here = (*where, field.name)
        items: Iterable[tuple[Any, Any]] = ()
        if attrs.has(type(value)):
            items = [((), value)]
        elif isinstance(value, tuple):
            items = (((index,), item) for index, item in enumerate(value))
        elif isinstance(value, dict):
            items = (((key,), item) for key, item in value.items())
        for suffix, item in items:
            if attrs.has(type(item)):
                yield from _built_problems(item, (*here, *suffix))


def _cross_problems(spec: ModelSpec) -> list[Problem]:
    return [(tuple(where), message) for where, message in v.cross_checks(spec)]


def _field_problems(data: Any, cls: type, where: Location) -> list[Problem]:
    """Every attrs validator of ``cls``, field by field, then of the classes nested in ``data``.

    A field is structured on its own (validators off, since nested classes are checked by descending), so a
    problem elsewhere in the document hides nothing here; a field that does not structure has already been
    reported by cattrs.
    """
    if not isinstance(data, Mapping):
        return []
    problems: list[Problem] = []
    for field in attrs.fields(attrs.resolve_types(cls)):
        if field.metadata.get(NOT_IN_YAML) or field.name not in data:
            continue  # defaults are valid
        raw, here = data[field.name], (*where, field.name)
        if field.validator is not None:
            try:
                with attrs.validators.disabled():
                    value = _converter.structure(raw, field.type)
            except _STRUCTURE_ERRORS:
                pass
            else:
                try:
                    field.validator(None, field, value)
                except (ValueError, TypeError) as exc:
                    problems.extend((where + suffix, message) for suffix, message in _describe(exc))
        for item, item_cls, item_where in _nested(raw, field.type, here):
            problems.extend(_field_problems(item, item_cls, item_where))
    return problems


def _nested(raw: Any, type_: Any, where: Location) -> Iterable[tuple[Any, type, Location]]:
    """The attrs classes a field of type ``type_`` holds: itself, an Optional one, or a tuple of them."""
    candidates = [a for a in get_args(type_) if attrs.has(a)] if get_origin(type_) is Union else [type_]
    for candidate in candidates:
        if attrs.has(candidate):
            yield raw, candidate, where
    if _is_homogeneous_tuple(type_) and attrs.has(get_args(type_)[0]) and isinstance(raw, list):
        for index, item in enumerate(raw):
            yield item, get_args(type_)[0], (*where, index)
    if get_origin(type_) is dict and attrs.has(get_args(type_)[1]) and isinstance(raw, Mapping):
        for key, item in raw.items():
            yield item, get_args(type_)[1], (*where, key)


def _cattrs_problems(exc: BaseException) -> list[Problem]:
    # transform_error calls the formatter once per problem and pairs its string with a path string. The
    # formatter returns a token and keeps the real problems aside, so no message text is ever parsed back
    # out of "message @ path" (messages quote user values, which may contain anything).
    described: list[list[tuple[Location, str]]] = []

    def formatter(error: BaseException, _type: Any) -> str:
        described.append(_describe(error))
        return f"#{len(described) - 1}"

    problems: list[Problem] = []
    for line in cattrs.transform_error(exc, "$", formatter):
        token, _, path = line.partition(" @ ")
        base = _parse_path(path)
        problems.extend((base + suffix, message) for suffix, message in described[int(token[1:])])
    return problems


def _describe(error: BaseException) -> list[tuple[Location, str]]:
    """(location suffix, message) for one leaf error; an unknown-key error is one problem per key."""
    if isinstance(error, ForbiddenExtraKeysError):
        known = [f.name for f in attrs.fields(error.cl) if not f.metadata.get(NOT_IN_YAML)]
        out: list[tuple[Location, str]] = []
        for key in sorted(error.extra_fields, key=str):
            message = f"unknown key {key!r}"
            close = difflib.get_close_matches(str(key), known, n=1)
            message += f" (did you mean {close[0]!r}?)" if close else f"; expected one of {', '.join(known)}"
            out.append(((key,), message))
        return out
    if isinstance(error, KeyError):
        return [((), "required key missing")]
    args = error.args
    if len(args) >= 2 and isinstance(args[1], attrs.Attribute):
        # An attrs validator: its message is args[0]; cattrs only knows the class, so add the field (and
        # the item the validator pointed at).
        at = tuple(args[3]) if len(args) >= 4 and isinstance(args[3], tuple) else ()
        return [((args[1].name, *at), str(args[0]))]
    if isinstance(error, ValueError) and len(args) == 1:
        return [((), str(args[0]))]
    return [((), f"invalid value ({error})")]


_PATH_PART = re.compile(r"\.([^.\[]+)|\[(-?\d+)\]|\[('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]")


def _parse_path(path: str) -> Location:
    """``$.inputs[0].follows[1]`` -> ("inputs", 0, "follows", 1); stops at anything it cannot read, which
    only costs precision (the line of an ancestor)."""
    parts: list[Any] = []
    rest = path[1:] if path.startswith("$") else path
    while rest:
        match = _PATH_PART.match(rest)
        if match is None:
            break
        name, index, quoted = match.groups()
        parts.append(
            name if name is not None else int(index) if index is not None else ast.literal_eval(quoted)
        )
        rest = rest[match.end() :]
    return tuple(parts)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def show_path(location: Location) -> str:
    """("inputs", 0, "dtype") -> ``$.inputs[0].dtype``."""
    out = "$"
    for part in location:
        if isinstance(part, str) and _IDENTIFIER.fullmatch(part):
            out += f".{part}"
        elif isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            out += f"[{part!r}]"
    return out


def located(path: Path, problems: Iterable[Problem]) -> tuple[str, ...]:
    """``file:LINE: $.path: message`` for problems found outside the loader (a spec checked against its OM)."""
    document = load_marked(path.read_text(encoding="utf-8"))
    return _format(path, document, list(problems))


def _format(path: Path, document: MarkedDocument, problems: list[Problem]) -> tuple[str, ...]:
    lines = [
        (document.line_of(where), f"{path}:{document.line_of(where)}: {show_path(where)}: {message}")
        for where, message in problems
    ]
    seen: set[str] = set()
    out = []
    for _, text in sorted(lines, key=lambda item: item[0]):
        if text not in seen:
            seen.add(text)
            out.append(text)
    return tuple(out)


# --- the converter -------------------------------------------------------------------------------------


def _describe_value(obj: Any) -> str:
    if obj is None:
        return "nothing (null)"
    if isinstance(obj, bool):
        return "true" if obj else "false"
    if isinstance(obj, Mapping):
        return "a mapping"
    if isinstance(obj, (list, tuple)):
        return "a list"
    return repr(obj)


def _structure_str(obj: Any, _type: Any) -> str:
    if isinstance(obj, str):
        return obj
    raise ValueError(f"expected a string, got {_describe_value(obj)}")


def _structure_int(obj: Any, _type: Any) -> int:
    if isinstance(obj, int) and not isinstance(obj, bool):
        return obj
    raise ValueError(f"expected an integer, got {_describe_value(obj)}")


def _structure_bool(obj: Any, _type: Any) -> bool:
    if isinstance(obj, bool):
        return obj
    raise ValueError(f"expected true or false, got {_describe_value(obj)}")


def _structure_float(obj: Any, _type: Any) -> float:
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        return float(obj)
    raise ValueError(f"expected a number, got {_describe_value(obj)}")


def _structure_dtype(obj: Any, _type: Any) -> dtypes.DType:
    if not isinstance(obj, str):
        raise ValueError(f"expected a data type name such as fp32 or TYPE_INT64, got {_describe_value(obj)}")
    try:
        return dtypes.by_name(obj)
    except KeyError as exc:
        raise ValueError(exc.args[0]) from None


def _structure_dim_ref(obj: Any, _type: Any) -> DimRef:
    match = re.fullmatch(r"\s*(.+?)\s*:\s*(\d+)\s*", obj) if isinstance(obj, str) else None
    if match is None:
        raise ValueError(f"expected INPUT:DIM, e.g. input_ids:0, got {_describe_value(obj)}")
    return DimRef(match.group(1), int(match.group(2)))


def _structure_atc_value(obj: Any, _type: Any) -> AtcValue:
    if isinstance(obj, str):
        return AtcValue(obj)
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        return AtcValue(str(obj))
    raise ValueError(
        f"expected the flag's value as a string or number, got {_describe_value(obj)} "
        '(write YAML true/false as the 1/0 or "true"/"false" ATC expects)'
    )


def _structure_dims_gears(obj: Any, _type: Any) -> tuple[Union[int, tuple[int, ...]], ...]:
    if not isinstance(obj, (list, tuple)):
        raise ValueError(f"expected a list of gears, got {_describe_value(obj)}")
    out: list[Union[int, tuple[int, ...]]] = []
    for gear in obj:
        if isinstance(gear, (list, tuple)):
            out.append(tuple(_structure_int(value, int) for value in gear))
        else:
            out.append(_structure_int(gear, int))
    return tuple(out)


def _version_hooks(converter: cattrs.Converter) -> None:
    """``versions: {2: }`` (nothing) means "as ``model``"; ``version_policy: all`` is a word, not a mapping."""
    files = _attrs_factory(VersionFiles, converter)
    policy = _attrs_factory(VersionPolicy, converter)

    def structure_files(obj: Any, type_: Any) -> VersionFiles:
        return VersionFiles() if obj is None else files(obj, type_)

    def structure_policy(obj: Any, type_: Any) -> VersionPolicy:
        if obj == "all":
            return VersionPolicy(all_versions=True)
        if not isinstance(obj, Mapping):
            raise ValueError(
                f"expected all, {{latest: N}} or {{specific: [versions]}}, got {_describe_value(obj)}"
            )
        structured: VersionPolicy = policy(obj, type_)
        return structured

    converter.register_structure_hook(VersionFiles, structure_files)
    converter.register_structure_hook(VersionPolicy, structure_policy)


#: a cattrs structure hook: (the YAML value, the type asked for) -> the structured value
Hook = Callable[[Any, Any], Any]


def _checked_container(kind: str, accepts: tuple[type, ...], inner: Hook) -> Hook:
    def structure(obj: Any, type_: Any) -> Any:
        if not isinstance(obj, accepts):
            raise ValueError(f"expected {kind}, got {_describe_value(obj)}")
        return inner(obj, type_)

    return structure


def _attrs_factory(cls: type, converter: cattrs.Converter) -> Hook:
    omitted = {f.name: override(omit=True) for f in attrs.fields(cls) if f.metadata.get(NOT_IN_YAML)}
    # mypy matches the unpacked dict against every keyword parameter, not only the **overrides it fills
    structure: Hook = make_dict_structure_fn(cls, converter, **omitted)  # type: ignore[arg-type]
    return _checked_container("a mapping", (Mapping,), structure)


def _tuple_factory(type_: Any, converter: cattrs.Converter) -> Hook:
    return _checked_container("a list", (list, tuple), homogenous_tuple_structure_factory(type_, converter))


def _dict_factory(type_: Any, converter: cattrs.Converter) -> Hook:
    return _checked_container("a mapping", (Mapping,), mapping_structure_factory(type_, converter))


def _is_homogeneous_tuple(type_: Any) -> bool:
    args = get_args(type_)
    return get_origin(type_) is tuple and len(args) == 2 and args[1] is Ellipsis


def _is_dict(type_: Any) -> bool:
    return get_origin(type_) is dict


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_structure_hook_factory(attrs.has, _attrs_factory)
    converter.register_structure_hook_factory(_is_homogeneous_tuple, _tuple_factory)
    converter.register_structure_hook_factory(_is_dict, _dict_factory)
    converter.register_structure_hook_func(lambda t: t == DimsGearsInput, _structure_dims_gears)
    converter.register_structure_hook(str, _structure_str)
    converter.register_structure_hook(int, _structure_int)
    converter.register_structure_hook(float, _structure_float)
    converter.register_structure_hook(bool, _structure_bool)
    converter.register_structure_hook(dtypes.DType, _structure_dtype)
    converter.register_structure_hook(DimRef, _structure_dim_ref)
    converter.register_structure_hook(AtcValue, _structure_atc_value)
    _version_hooks(converter)
    return converter


_converter = _make_converter()
