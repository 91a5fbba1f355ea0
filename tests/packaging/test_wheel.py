"""The wheel and the sdist as users get them: ``python -m build`` (the wheel is built from the sdist, so the
Cython extension compiles from the sdist's sources), then ``pip install "ge-plugin[sim,serve]"`` into a fresh
venv and ``ge-plugin demo`` in an empty folder, which must pass and write nothing outside that folder.

pip runs with this machine's own configuration (its indexes and find-links); only the project's pins are
added (``PIP_CONSTRAINT``), so the build environment and the venv get the versions ``make setup`` installs.
It takes about two minutes on two cores, most of it compiling and installing; hence the ``slow`` mark.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from ge_plugin.deploy.dockerfile import dockerfile

pytestmark = [pytest.mark.slow, pytest.mark.packaging]

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = ROOT / "constraints.txt"
#: what the demo may create in the folder it runs in (docs: ge-plugin demo --help)
DEMO_FOLDERS = {"specs", "build", "model_repository"}


def _source_tree(target: Path) -> Path:
    """The checkout's files as a clean clone would have them (tracked and new files, nothing git ignores),
    so no build output of the worktree (the in-place extension, .venv, build/) leaks into the sdist."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = ROOT / os.fsdecode(name)
        if source.is_file():  # a file deleted in the worktree is still listed until it is committed
            (target / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / os.fsdecode(name))
    return target


def _run(cmd: list[str], *, timeout: float, **kwargs) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert result.returncode == 0, (
        f"{' '.join(map(str, cmd))} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    )
    return result


def test_wheel_built_from_the_sdist_installs_with_extras_and_runs_the_demo_in_an_empty_folder(tmp_path):
    # The packaging is what is tested, on both fast paths alike: the extension is always built.
    build_env = {k: v for k, v in os.environ.items() if k != "GE_PLUGIN_NO_EXTENSIONS"}
    build_env["PIP_CONSTRAINT"] = str(CONSTRAINTS)
    src = _source_tree(tmp_path / "src")

    built = _run(
        [sys.executable, "-m", "build", "--outdir", str(tmp_path / "dist"), str(src)],
        timeout=900,
        env=build_env,
    )

    assert "Successfully built ge_plugin-0.1.0.tar.gz and ge_plugin-0.1.0-" in built.stdout
    assert "ge-plugin: building the compiled fast path, optimised" in built.stdout + built.stderr
    (sdist,) = (tmp_path / "dist").glob("*.tar.gz")
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert f"COPY {sdist.name} " in dockerfile()  # the serving image installs exactly this sdist
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
        "ge_plugin/bench/specs/llama.yaml",
        "ge_plugin/models/llama.py",
        "ge_plugin/models/bert.py",
        "ge_plugin/backend/model.py",
    } <= in_wheel
    assert 'Requires-Dist: matplotlib>=3.5; extra == "bench"' in requires

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], timeout=120)
    _run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            f"{wheel}[sim,serve]",
            "-c",
            str(CONSTRAINTS),
        ],
        timeout=900,
        env=build_env,
    )
    picked = _run(
        [str(venv / "bin" / "python"), "-c", "import ge_plugin.fastpath as f; print(f.IMPLEMENTATION)"],
        timeout=60,
        env=build_env,
        cwd=tmp_path,
    )
    assert picked.stdout.strip() == "c"  # the extension compiled from the sdist loads

    empty = tmp_path / "empty"
    home = tmp_path / "home"
    empty.mkdir()
    home.mkdir()
    # The caller's environment as is (GE_PLUGIN_NO_EXTENSIONS included: `make test-py` runs the installed demo
    # on the pure-Python twin), with a HOME of its own to catch any write outside the folder.
    demo = _run(
        [
            str(
                venv / "bin" / "ge-plugin",
            ),
            "demo",
        ],
        timeout=600,
        cwd=empty,
        env={**os.environ, "HOME": str(home)},
    )

    assert "every answer checked" in demo.stdout
    assert {path.name for path in empty.iterdir()} == DEMO_FOLDERS
    assert sorted(p.name for p in (empty / "specs").iterdir()) == ["bert.yaml", "llama.yaml"]
    assert sorted((empty / "model_repository").glob("*/1/*.om")) == [
        empty / "model_repository" / "bert_model" / "1" / "bert.om",
        empty / "model_repository" / "llama_model" / "1" / "llama.om",
    ]
    assert list(home.rglob("*")) == []
