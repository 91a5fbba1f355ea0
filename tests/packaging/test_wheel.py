"""The wheel and the sdist as users get them: ``make dist`` (a clean source tree, the wheel built from the
sdist so the Cython extension compiles from the sdist's sources, ``twine check``), then a plain
``pip install "ge_plugin-*.whl[sim,serve]"`` into a fresh venv -- no constraints, as a user types it -- which
must resolve the wheel's dependencies to the release series the tests pin (constraints.txt), and
``ge-plugin demo`` in an empty folder, which must pass and write nothing outside that folder.

pip runs with this machine's own configuration (its indexes and find-links). It takes a few minutes on two
cores, most of it compiling and installing; hence the ``slow`` and ``packaging`` marks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from ge_plugin.deploy.dockerfile import dockerfile

#: the proof's own files (benchmarks/proof): our targets, the seed's table, the comparison models, the report
PROOF_FILES = {"ratios.py", "seed.py", "py_logits.py", "py_logits_paced.py", "py_identity.py", "naive_llama.py",
               "report_json.py", "markdown.py", "analysis.py"}  # fmt: skip

pytestmark = [pytest.mark.slow, pytest.mark.packaging]

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = ROOT / "constraints.txt"
#: what the demo may create in the folder it runs in (docs: ge-plugin demo --help)
DEMO_FOLDERS = {"specs", "build", "model_repository"}
#: the extras the README tells users to install
EXTRAS = ("sim", "serve")


def _run(cmd: list[str], *, timeout: float, **kwargs) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert result.returncode == 0, (
        f"{' '.join(map(str, cmd))} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    )
    return result


def pins(path: Path = CONSTRAINTS) -> dict[str, Version]:
    """constraints.txt as {canonical name: pinned version}."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            found[canonicalize_name(name.split("[", 1)[0])] = Version(version)
    return found


def direct_requirements(requires: list[str], extras: tuple[str, ...]) -> list[Requirement]:
    """The wheel's Requires-Dist lines that a ``[extras]`` install asks for directly."""
    chosen = []
    for line in requires:
        requirement = Requirement(line.removeprefix("Requires-Dist:").strip())
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": extra}) for extra in extras):
            chosen.append(requirement)
    return chosen


def off_series(
    installed: dict[str, Version], wanted: list[Requirement], pinned: dict[str, Version]
) -> list[str]:
    """One line per direct dependency that resolved outside the release series (major.minor) the tests pin."""
    problems = []
    for requirement in wanted:
        name = canonicalize_name(requirement.name)
        got, pin = installed.get(name), pinned.get(name)
        if pin is None:
            problems.append(f"{name}: not pinned in constraints.txt")
        elif got is None:
            problems.append(f"{name}: not installed")
        elif got.release[:2] != pin.release[:2]:
            problems.append(f"{name}: resolved {got}, the tests use {pin} ({requirement})")
    return problems


def test_off_series_names_a_dependency_that_resolved_to_another_release():
    # the check below can fail: tritonclient 2.73 and protobuf 6, where the tests use 2.51 and 4.25
    wanted = direct_requirements(
        ["Requires-Dist: tritonclient[grpc,http]>=2.51", 'Requires-Dist: protobuf>=3.20; extra == "sim"'],
        ("sim",),
    )
    installed = {"tritonclient": Version("2.73.0"), "protobuf": Version("6.33.0")}
    pinned = {"tritonclient": Version("2.51.0"), "protobuf": Version("4.25.9")}

    assert off_series(installed, wanted, pinned) == [
        "tritonclient: resolved 2.73.0, the tests use 2.51.0 (tritonclient[grpc,http]>=2.51)",
        'protobuf: resolved 6.33.0, the tests use 4.25.9 (protobuf>=3.20; extra == "sim")',
    ]
    assert (
        off_series(
            {**installed, "tritonclient": Version("2.51.0"), "protobuf": Version("4.25.8")}, wanted, pinned
        )
        == []
    )


def test_make_dist_wheel_installs_as_users_install_it_resolving_the_tested_versions_and_runs_the_demo(
    tmp_path,
):
    # The packaging is what is tested, on both fast paths alike: the extension is always built.
    env = {k: v for k, v in os.environ.items() if k not in ("GE_PLUGIN_NO_EXTENSIONS", "PIP_CONSTRAINT")}
    dist = tmp_path / "dist"

    built = _run(["make", "-C", str(ROOT), "dist", f"DIST={dist}"], timeout=900, env=env)

    assert "Successfully built ge_plugin-0.1.0.tar.gz and ge_plugin-0.1.0-" in built.stdout
    assert "ge-plugin: building the compiled fast path, optimised" in built.stdout + built.stderr
    assert "twine check --strict" in built.stdout and built.stdout.count("PASSED") == 2  # wheel and sdist
    assert (dist / "constraints.txt").read_text() == CONSTRAINTS.read_text()
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")
    assert f"COPY {sdist.name} constraints.txt " in dockerfile()  # the serving image installs exactly these
    with tarfile.open(sdist) as tar:
        in_sdist = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert {"setup.py", "pyproject.toml", "ge_plugin/_fastpath.pyx", "ge_plugin/_fastpath.pxd"} <= in_sdist
    assert {"ge_plugin/demo/specs/llama.yaml", "ge_plugin/demo/specs/bert.yaml"} <= in_sdist
    assert not [name for name in in_sdist if name.endswith(".so")]
    with zipfile.ZipFile(wheel) as whl:
        in_wheel = set(whl.namelist())
        (metadata,) = [name for name in in_wheel if name.endswith(".dist-info/METADATA")]
        requires = [
            line for line in whl.read(metadata).decode().splitlines() if line.startswith("Requires-Dist:")
        ]
    assert [name for name in in_wheel if name.startswith("ge_plugin/_fastpath.") and name.endswith(".so")]
    assert {
        "ge_plugin/demo/specs/llama.yaml",
        "ge_plugin/demo/specs/bert.yaml",
        "ge_plugin/models/llama.py",
        "ge_plugin/models/bert.py",
        "ge_plugin/backend/model.py",
    } <= in_wheel
    # what proves our targets is not what users run: no target, seed table, comparison model or bench spec
    proof = [
        name for name in in_wheel if name.startswith("benchmarks/") or PROOF_FILES & set(name.split("/"))
    ]
    assert proof == [], f"the proof's files in the wheel: {proof}"
    # every dependency has an upper bound, so a future release cannot slip in
    for requirement in direct_requirements(requires, ("sim", "serve", "bench")):
        assert any(spec.operator in ("<", "==", "~=") for spec in requirement.specifier), str(requirement)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], timeout=120)
    python = str(venv / "bin" / "python")
    _run([python, "-m", "pip", "install", "--quiet", f"{wheel}[{','.join(EXTRAS)}]"], timeout=900, env=env)
    listed = _run([python, "-m", "pip", "list", "--format=json"], timeout=120, env=env)
    installed = {canonicalize_name(p["name"]): Version(p["version"]) for p in json.loads(listed.stdout)}

    assert off_series(installed, direct_requirements(requires, EXTRAS), pins()) == []
    assert installed["tritonclient"].release[:2] == (2, 51) and installed["protobuf"].release[:2] == (4, 25)
    assert installed["numpy"] < Version("2")
    picked = _run(
        [python, "-c", "import ge_plugin.fastpath as f; print(f.IMPLEMENTATION)"], timeout=60, cwd=tmp_path
    )
    assert picked.stdout.strip() == "c"  # the extension compiled from the sdist loads

    empty = tmp_path / "empty"
    home = tmp_path / "home"
    empty.mkdir()
    home.mkdir()
    # The caller's environment as is (GE_PLUGIN_NO_EXTENSIONS included), with a HOME of its own to catch any
    # write outside the folder.
    demo = _run(
        [str(venv / "bin" / "ge-plugin"), "demo"],
        timeout=600,
        cwd=empty,
        env={**os.environ, "HOME": str(home)},
    )

    assert "every answer checked" in demo.stdout
    assert {path.name for path in empty.iterdir()} == DEMO_FOLDERS
    assert sorted(p.name for p in (empty / "specs").iterdir()) == [
        "bert.yaml",
        "cnn_jpeg.yaml",
        "llama.yaml",
        "llama_generate.yaml",
        "llama_generate_layers.yaml",
    ]
    assert sorted((empty / "model_repository").glob("*/1/*.om")) == [
        empty / "model_repository" / "bert_model" / "1" / "bert.om",
        empty / "model_repository" / "cnn_jpeg" / "1" / "cnn_jpeg.om",
        empty / "model_repository" / "llama_generate" / "1" / "llama_kv.om",
        empty / "model_repository" / "llama_generate_layers" / "1" / "llama_kv_layers.om",
        empty / "model_repository" / "llama_model" / "1" / "llama.om",
    ]
    assert list(home.rglob("*")) == []
