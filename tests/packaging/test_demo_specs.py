"""The demo's specs ship in the package and are the checkout's ``specs/``, so a pip-installed demo serves
exactly what ``make demo`` serves, and it writes only under its output folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from ge_plugin import demo
from ge_plugin.spec import load_specs

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", demo.SPEC_FILES)
def test_packaged_demo_spec_is_the_checkouts_spec_byte_for_byte(name):
    assert demo.packaged_spec_text(name) == (ROOT / "specs" / name).read_bytes()


def test_demo_ships_a_spec_for_every_spec_of_the_checkout():
    assert sorted(p.name for p in (ROOT / "specs").glob("*.yaml")) == sorted(demo.SPEC_FILES)


def test_demo_specs_in_an_empty_folder_are_written_and_resolve_there(tmp_path):
    said: list[str] = []

    specs = demo.demo_specs(tmp_path, said.append)

    assert [spec.name for spec in specs] == [spec.name for spec in load_specs([ROOT / "specs"])]
    assert sorted(p.name for p in (tmp_path / "specs").iterdir()) == sorted(demo.SPEC_FILES)
    assert {spec.source_path.parent for spec in specs} == {tmp_path / "build" / "models"}
    assert [line.split()[0] for line in said] == [str(tmp_path / "specs" / n) for n in demo.SPEC_FILES]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "specs",
        "specs/bert.yaml",
        "specs/cnn_jpeg.yaml",
        "specs/llama.yaml",
        "specs/llama_generate.yaml",
        "specs/llama_generate_layers.yaml",
    ]


def test_demo_specs_never_overwrite_a_users_spec_and_say_so(tmp_path):
    mine = tmp_path / "specs" / "llama.yaml"
    mine.parent.mkdir()
    mine.write_text("name: my_own_llama\n")

    said: list[str] = []
    specs = demo.demo_specs(tmp_path, said.append)

    assert mine.read_text() == "name: my_own_llama\n"
    assert f"      {mine} differs from the demo's spec; the demo serves its own copy" in said
    assert "llama_model" in [spec.name for spec in specs]


def test_demo_specs_say_nothing_when_the_folder_holds_the_same_specs():
    said: list[str] = []
    demo.demo_specs(ROOT, said.append)  # the checkout, as `make demo` runs it: nothing to write

    assert said == []
