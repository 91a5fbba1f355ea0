"""Whatever a value is replaced with, loading ends in a SpecError whose problems all have the documented
format and a real message, never in another exception or cattrs' generic "invalid value"."""

from __future__ import annotations

import re

import pytest

from ge_plugin.errors import SpecError
from ge_plugin.spec import load_spec

ODD_VALUES = [
    "null",
    "-1",
    "1.5",
    "true",
    "'x'",
    "[]",
    "{}",
    "[[1], [2, 3]]",
    "[{}]",
    "{1: 2}",
    "2024-01-01",
    "&a [*a]",
]
PROBLEM = re.compile(r"^\S+:\d+: \$\S*: \S.*$")


def test_load_spec_survives_any_value_in_any_field(write_spec, variant):
    lines = variant().splitlines()
    for index, line in enumerate(lines):
        key = line.split(":")[0]
        for odd in ODD_VALUES:
            path = write_spec("\n".join([*lines[:index], f"{key}: {odd}", *lines[index + 1 :]]) + "\n")
            try:
                load_spec(path)
            except SpecError as exc:
                for problem in exc.problems:
                    assert PROBLEM.match(problem), (line, odd, problem)
                    assert "invalid value" not in problem and "unknown error" not in problem, (
                        line,
                        odd,
                        problem,
                    )
            except Exception as exc:  # fail naming the input, not just the traceback
                pytest.fail(f"{key}: {odd} raised {type(exc).__name__}: {exc}")
