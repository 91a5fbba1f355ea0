"""ge_plugin.fastpath picks the compiled module in a normal build, the twin when asked, and the two (and the
.pyi stub) expose the same names and signatures, so the engine cannot tell which one it runs."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ge_plugin
from ge_plugin.fastpath import NO_EXTENSIONS

STUB = Path(ge_plugin.__file__).with_name("_fastpath.pyi")

# (name, kind, default, annotation) per parameter, then the return annotation
Signature = tuple[tuple[tuple[str, str, Any, Any], ...], Any]


def _reimport_fastpath(monkeypatch: pytest.MonkeyPatch):
    """Import ge_plugin.fastpath afresh; monkeypatch puts the original module back afterwards."""
    monkeypatch.delitem(sys.modules, "ge_plugin.fastpath", raising=False)
    monkeypatch.delattr(ge_plugin, "fastpath", raising=False)
    return importlib.import_module("ge_plugin.fastpath")


@pytest.mark.c_extension
@pytest.mark.skipif(NO_EXTENSIONS, reason="GE_PLUGIN_NO_EXTENSIONS=1 asks for the twin")
def test_fastpath_normal_build_loads_compiled_module(monkeypatch: pytest.MonkeyPatch) -> None:
    # A broken build would silently fall back to the twin and every "c" test would test the twin twice.
    monkeypatch.delenv("GE_PLUGIN_NO_EXTENSIONS", raising=False)
    fastpath = _reimport_fastpath(monkeypatch)
    compiled = importlib.import_module("ge_plugin._fastpath")
    assert fastpath.IMPLEMENTATION == "c"
    assert fastpath.gather is compiled.gather
    assert Path(str(compiled.__file__)).suffix in (".so", ".pyd")


@pytest.mark.c_extension
@pytest.mark.skipif(NO_EXTENSIONS, reason="GE_PLUGIN_NO_EXTENSIONS=1: no compiled module")
def test_fastpath_compiled_module_imports_nothing_from_its_twin() -> None:
    # the twin is a specification written on its own: with it unimportable the compiled module still loads
    # and plans (the shared tables and messages live in modules of their own)
    code = (
        "import sys; sys.modules['ge_plugin._fastpath_py'] = None\n"
        "from ge_plugin import _fastpath as c\n"
        "from types import SimpleNamespace as R\n"
        "spec = c.TensorSpec('x', 'fp32', (-1, 4), (2, 4))\n"
        "planner = c.Planner([R(spec=spec, om_type='fp32')],"
        " [R(name='y', om_index=0, type='fp32', om_type='fp32', ties=())],"
        " [R(input_dims=((2, 4),), output_dims=((2, 4),))])\n"
        "print(planner.choose((1, 4)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "0"), done.stderr


def test_fastpath_no_extensions_env_picks_twin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GE_PLUGIN_NO_EXTENSIONS", "1")
    fastpath = _reimport_fastpath(monkeypatch)
    twin = importlib.import_module("ge_plugin._fastpath_py")
    assert fastpath.IMPLEMENTATION == "py"
    assert fastpath.TensorSpec is twin.TensorSpec
    assert fastpath.gather is twin.gather


def test_fastpath_broken_build_falls_back_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GE_PLUGIN_NO_EXTENSIONS", raising=False)
    monkeypatch.setitem(sys.modules, "ge_plugin._fastpath", None)  # importing it raises ImportError
    fastpath = _reimport_fastpath(monkeypatch)
    assert fastpath.IMPLEMENTATION == "py"
    assert "the compiled ge_plugin._fastpath did not load" in fastpath.FALLBACK_REASON
    assert fastpath.describe().startswith(
        "pure-Python twin (py), 20-49x slower on small requests: the compiled"
    )


def test_fastpath_twin_chosen_on_purpose_is_no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GE_PLUGIN_NO_EXTENSIONS", "1")
    fastpath = _reimport_fastpath(monkeypatch)
    assert fastpath.FALLBACK_REASON == ""
    assert fastpath.describe() == "pure-Python twin (py): GE_PLUGIN_NO_EXTENSIONS is set"


def test_fastpath_reimport_is_undone_afterwards() -> None:
    # The picker tests reimport ge_plugin.fastpath; every later import must see the original module again.
    import ge_plugin.fastpath as before

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GE_PLUGIN_NO_EXTENSIONS", "1")
        assert _reimport_fastpath(patch) is not before
    import ge_plugin.fastpath as after

    assert after is before
    assert sys.modules["ge_plugin.fastpath"] is before
    expected = "py" if NO_EXTENSIONS else "c"
    assert expected == after.IMPLEMENTATION


def _stub_tree() -> ast.Module:
    return ast.parse(STUB.read_text())


def _stub_all() -> list[str]:
    for node in _stub_tree().body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"{STUB} has no __all__")


def _from_ast(args: ast.arguments, returns: ast.expr | None, drop_self: bool) -> Signature:
    def annotation(node: ast.expr | None) -> Any:
        return None if node is None else ast.unparse(node)

    params = []
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for arg, default in zip(positional, defaults):
        value = inspect.Parameter.empty if default is None else ast.literal_eval(default)
        params.append((arg.arg, "POSITIONAL_OR_KEYWORD", value, annotation(arg.annotation)))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        value = inspect.Parameter.empty if default is None else ast.literal_eval(default)
        params.append((arg.arg, "KEYWORD_ONLY", value, annotation(arg.annotation)))
    if drop_self:
        params = params[1:]
    return tuple(params), annotation(returns)


def _from_inspect(func: Any, drop_self: bool) -> Signature:
    def annotation(value: Any) -> Any:
        return None if value is inspect.Parameter.empty else value

    signature = inspect.signature(func)
    params = tuple(
        (p.name, p.kind.name, p.default, annotation(p.annotation)) for p in signature.parameters.values()
    )
    if drop_self:
        params = params[1:]
    return params, annotation(signature.return_annotation)


def _from_embedded(doc: str, drop_self: bool) -> Signature:
    """The signature Cython's embedsignature put on the first line of a docstring."""
    first = doc.splitlines()[0]
    function = ast.parse(f"def {first}: ...").body[0]
    assert isinstance(function, ast.FunctionDef)
    return _from_ast(function.args, function.returns, drop_self)


def _stub_signatures() -> dict[str, Signature]:
    found = {}
    for node in _stub_tree().body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = _from_ast(node.args, node.returns, drop_self=False)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    found[node.name] = _from_ast(item.args, item.returns, drop_self=True)
    return found


def _defined_here(module: Any) -> set[str]:
    """Public functions and classes a module defines itself (not the ones it imports)."""
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and callable(value)
        and getattr(value, "__module__", None) == module.__name__
    }


FUNCTIONS = ["validate", "gather", "scatter", "bf16_view", "bf16_capsule"]
CLASSES = ["TensorSpec", "Planner", "Chunk"]
#: the Planner's methods, whose signatures the stub, the twin and the compiled module share
PLANNER_METHODS = ["choose", "plan", "chunk", "extend", "stage", "launch_args", "count", "split", "tally"]


def test_fastpath_twin_and_stub_export_same_names() -> None:
    twin = importlib.import_module("ge_plugin._fastpath_py")
    assert sorted(twin.__all__) == sorted(_stub_all())
    assert sorted([*FUNCTIONS, "CASTS", "IMPLEMENTATION", *CLASSES]) == sorted(twin.__all__)
    for name in twin.__all__:
        assert hasattr(twin, name), name


@pytest.mark.parametrize("name", FUNCTIONS)
def test_fastpath_twin_signature_matches_stub(name: str) -> None:
    twin = importlib.import_module("ge_plugin._fastpath_py")
    assert _from_inspect(getattr(twin, name), drop_self=False) == _stub_signatures()[name]


def test_fastpath_twin_tensorspec_signature_matches_stub() -> None:
    twin = importlib.import_module("ge_plugin._fastpath_py")
    assert _from_inspect(twin.TensorSpec.__init__, drop_self=True) == _stub_signatures()["TensorSpec"]


@pytest.mark.c_extension
@pytest.mark.skipif(NO_EXTENSIONS, reason="GE_PLUGIN_NO_EXTENSIONS=1: no compiled module")
def test_fastpath_compiled_exports_twin_names() -> None:
    compiled = importlib.import_module("ge_plugin._fastpath")
    twin = importlib.import_module("ge_plugin._fastpath_py")
    assert compiled.__all__ == twin.__all__
    assert _defined_here(compiled) == _defined_here(twin) == set(twin.__all__) - {"IMPLEMENTATION", "CASTS"}


@pytest.mark.c_extension
@pytest.mark.skipif(NO_EXTENSIONS, reason="GE_PLUGIN_NO_EXTENSIONS=1: no compiled module")
@pytest.mark.parametrize("name", FUNCTIONS)
def test_fastpath_compiled_signature_matches_twin(name: str) -> None:
    compiled = importlib.import_module("ge_plugin._fastpath")
    twin = importlib.import_module("ge_plugin._fastpath_py")
    expected = _from_inspect(getattr(twin, name), drop_self=False)
    assert _from_inspect(getattr(compiled, name), drop_self=False) == expected
    assert _from_embedded(getattr(compiled, name).__doc__, drop_self=False) == expected


@pytest.mark.c_extension
@pytest.mark.skipif(NO_EXTENSIONS, reason="GE_PLUGIN_NO_EXTENSIONS=1: no compiled module")
def test_fastpath_compiled_tensorspec_signature_matches_twin() -> None:
    compiled = importlib.import_module("ge_plugin._fastpath")
    twin = importlib.import_module("ge_plugin._fastpath_py")
    expected = _from_inspect(twin.TensorSpec.__init__, drop_self=True)
    assert _from_embedded(compiled.TensorSpec.__init__.__doc__, drop_self=True) == expected


def _stub_methods(class_name: str) -> dict[str, Signature]:
    for node in _stub_tree().body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return {
                item.name: _from_ast(item.args, item.returns, drop_self=True)
                for item in node.body
                if isinstance(item, ast.FunctionDef)
            }
    raise AssertionError(f"{STUB} has no class {class_name}")


def test_fastpath_twin_planner_signatures_match_stub() -> None:
    twin = importlib.import_module("ge_plugin._fastpath_py")
    stub = _stub_methods("Planner")
    assert _from_inspect(twin.Planner.__init__, drop_self=True) == stub["__init__"]
    for name in PLANNER_METHODS:
        assert _from_inspect(getattr(twin.Planner, name), drop_self=True) == stub[name], name


@pytest.mark.c_extension
@pytest.mark.skipif(NO_EXTENSIONS, reason="GE_PLUGIN_NO_EXTENSIONS=1: no compiled module")
@pytest.mark.parametrize("name", ["__init__", *PLANNER_METHODS])
def test_fastpath_compiled_planner_signatures_match_twin(name: str) -> None:
    compiled = importlib.import_module("ge_plugin._fastpath")
    twin = importlib.import_module("ge_plugin._fastpath_py")
    expected = _from_inspect(getattr(twin.Planner, name), drop_self=True)
    assert _from_embedded(getattr(compiled.Planner, name).__doc__, drop_self=True) == expected
