"""A stored bench run (tests/data/report.json, written by a full ``ge-plugin bench`` on the 2-core KVM guest) reads
back and renders to the very bytes that run wrote: the report's JSON, analysis and markdown can change shape
without changing what a reader gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.proof import report

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def stored():
    text = (DATA / report.JSON).read_text(encoding="utf-8")
    return text, report.from_json(json.loads(text), source=str(DATA / report.JSON))


def test_report_stored_json_round_trips_byte_for_byte(stored):
    text, result = stored
    assert report.json_text(result) == text


def test_report_stored_markdown_is_what_the_run_wrote(stored):
    _, result = stored
    assert report.markdown(result) == (DATA / report.MARKDOWN).read_text(encoding="utf-8")


def test_report_stored_run_is_a_real_one(stored):
    """The fixture covers every section: a run with the replica, the floors, direct rows and targets."""
    _, result = stored
    text = report.markdown(result)
    for heading in ("The seed's table", "Host time per execute", "Inside the stub", "Through Triton"):
        assert f"## {heading}" in text
    assert result.targets and result.direct and result.allocations
