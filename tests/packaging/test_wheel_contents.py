"""What the wheel is built from holds none of the proof (fast: reads the tree and pyproject, builds nothing;
tests/packaging/test_wheel.py lists the built wheel's own files)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the proof's files, by name: our targets, the seed's table, the floor and naive models, the report
PROOF = {"ratios.py", "seed.py", "py_logits.py", "py_logits_paced.py", "py_identity.py", "naive_llama.py",
         "report_json.py", "markdown.py", "analysis.py"}  # fmt: skip


def test_the_package_tree_holds_no_target_seed_table_or_comparison_model():
    assert (
        sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "ge_plugin").rglob("*") if p.name in PROOF)
        == []
    )
    assert {p.name for p in (ROOT / "benchmarks" / "proof").rglob("*.py")} >= PROOF  # they live here


def test_the_wheel_takes_only_the_package_and_its_own_data():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["packages"]["find"]["include"] == ["ge_plugin*"]
    assert not [pattern for pattern in config["package-data"]["ge_plugin"] if "bench" in pattern]


def test_what_users_run_imports_nothing_of_the_proof(tmp_path):
    """Run from outside the checkout, where ``benchmarks`` cannot be imported, as from an installed wheel."""
    code = (
        "import sys, ge_plugin.cli.bench, ge_plugin.cli.tune, ge_plugin.bench.run, ge_plugin.tune.run, "
        "ge_plugin.tune.devprofile, ge_plugin.doctor, ge_plugin.measure.direct\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'benchmarks'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
