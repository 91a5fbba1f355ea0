from __future__ import annotations

import pytest
import yaml

from ge_plugin.spec.marks import Duplicate, load_marked


def test_load_marked_records_key_and_item_lines():
    doc = load_marked("a: 1\nb:\n  - x: 1\n    y: [1,\n      2]\n  - z\n")

    assert doc.data == {"a": 1, "b": [{"x": 1, "y": [1, 2]}, "z"]}
    assert doc.lines[("a",)] == 1
    assert doc.lines[("b",)] == 2
    assert doc.lines[("b", 0)] == 3
    assert doc.lines[("b", 0, "y")] == 4
    assert doc.lines[("b", 0, "y", 1)] == 5
    assert doc.lines[("b", 1)] == 6


def test_load_marked_reports_duplicate_keys_where_they_repeat():
    doc = load_marked("a: 1\nb:\n  c: 1\n  c: 2\na: 3\n")

    assert doc.data == {"a": 3, "b": {"c": 2}}  # what safe_load gives: the last one wins
    assert set(doc.duplicates) == {Duplicate(("b", "c"), 4, 3), Duplicate(("a",), 5, 1)}


def test_load_marked_does_not_call_merged_keys_duplicates():
    doc = load_marked("base: &b {p: 1, q: 2}\nm:\n  <<: *b\n  q: 3\n")

    assert doc.data["m"] == {"p": 1, "q": 3}
    assert doc.duplicates == ()
    assert doc.lines[("m", "q")] == 4


def test_load_marked_survives_recursive_aliases():
    doc = load_marked("r: &r [*r]\n")

    assert doc.data["r"][0] is doc.data["r"]
    assert doc.lines[("r", 0)] == 1


def test_line_of_falls_back_to_the_nearest_written_ancestor():
    doc = load_marked("top: 1\nmodel:\n  om: x\n")

    assert doc.line_of(("model", "missing")) == 2
    assert doc.line_of(("nothing", "here")) == 1
    assert doc.line_of(()) == 1


def test_load_marked_raises_yaml_error_with_a_mark():
    with pytest.raises(yaml.YAMLError) as info:
        load_marked("a: [1, 2\nb: 3\n")

    assert info.value.problem_mark is not None


def test_load_marked_is_safe():
    with pytest.raises(yaml.YAMLError):
        load_marked("a: !!python/object/apply:os.system ['true']\n")


def test_load_marked_marks_null_and_integer_keys():
    doc = load_marked("a: 1\nnull: 2\n3: 4\n")

    assert doc.lines[(None,)] == 2
    assert doc.lines[(3,)] == 3
