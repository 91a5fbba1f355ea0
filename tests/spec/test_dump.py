"""ModelSpec -> YAML (what ``ge-plugin migrate`` writes) and the checks of a spec built in code."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from ge_plugin import dtypes
from ge_plugin.spec import load_spec
from ge_plugin.spec.dump import spec_data, spec_yaml
from ge_plugin.spec.load import spec_problems
from ge_plugin.spec.model import InputDecl, ModelFiles, ModelSpec, OutputDecl

SPECS = sorted((Path(__file__).parents[2] / "specs").glob("*.yaml"))


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_dump_of_a_shipped_spec_loads_back_equal(path, tmp_path):
    spec = load_spec(path)
    again = tmp_path / path.name
    again.write_text(spec_yaml(spec, header=["dumped"]), encoding="utf-8")
    assert attrs.evolve(load_spec(again), path=spec.path) == spec


def _spec(**changes) -> ModelSpec:
    with attrs.validators.disabled():
        return ModelSpec(
            name=changes.pop("name", "m"),
            model=ModelFiles(om="m.om", source="m.onnx", soc_version=changes.pop("soc", "Ascend910B3")),
            inputs=(InputDecl("x", dtypes.by_name("fp32"), (4,)),),
            outputs=(OutputDecl("y", dtypes.by_name("fp32"), (4,)),),
            **changes,
        )


def test_dump_leaves_out_defaults_unless_shown():
    spec = _spec()
    assert list(spec_data(spec)) == ["name", "model", "inputs", "outputs"]
    shown = spec_data(spec, shown=["placement", "precision"])
    assert shown["placement"] == {"devices": [0], "instances_per_device": 1, "streams_per_instance": 1}
    assert shown["precision"] == "origin"
    assert spec_yaml(spec).splitlines()[:2] == ["name: m", "model:"]


def test_spec_problems_lists_every_field_and_cross_problem_with_its_path():
    spec = _spec(name="a b", soc="910B3", warmup=1000)
    problems = spec_problems(spec)
    assert any(p.startswith("$.name: a model name becomes a directory") for p in problems)
    assert any(p.startswith("$.model.soc_version: expected 'Ascend' + the chip name") for p in problems)
    assert any(p.startswith("$.warmup: at most 100") for p in problems)
    assert spec_problems(_spec()) == []
