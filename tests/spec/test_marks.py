from __future__ import annotations

import pytest
import yaml

from ge_plugin.spec.marks import AliasExpansionError, Duplicate, MarkedLoader, load_marked


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


#: ten levels of nine aliases each: fully expanded, the last key stands for 9**9 (387 million) nodes
BILLION_LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n" for prev, name in zip("abcdefgh", "bcdefghi")
)


def test_load_marked_refuses_a_billion_laughs_before_marking_100000_nodes(monkeypatch):
    marked = 0
    mark = MarkedLoader._mark

    def counting_mark(self, *args):
        nonlocal marked
        marked += 1
        assert marked <= 100_000, "the loader is expanding the aliases without a bound"
        return mark(self, *args)

    monkeypatch.setattr(MarkedLoader, "_mark", counting_mark)

    with pytest.raises(AliasExpansionError) as info:
        load_marked(BILLION_LAUGHS)

    assert marked <= 100_000
    # the budget runs out in e's first *d (d alone is 7381 nodes): its place, and the anchor it repeats
    assert (info.value.location, info.value.line) == (("e", 0), 5)
    assert "aliases expand this document to more than" in info.value.message
    assert "*d (anchored at line 4)" in info.value.message


def test_load_marked_still_takes_a_spec_that_reuses_anchors():
    doc = load_marked("t: &t {name: x, dims: [1, 2]}\nuse: [*t, *t, *t]\n")

    assert doc.data["use"] == [{"name": "x", "dims": [1, 2]}] * 3
    assert doc.lines[("use", 2, "dims", 1)] == 1
