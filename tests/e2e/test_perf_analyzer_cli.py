"""``ge-plugin perf-analyzer``: the perf_analyzer of the tritonclient wheel, from a shell with nothing on
LD_LIBRARY_PATH (where it alone does not start), measuring a served ge model with its own arguments."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ge_plugin.measure.perf import NO_STABILITY_CHECK, SERVER_APIS

pytestmark = pytest.mark.e2e

MODEL = "identity_e2e"
#: a user's shell after `. .venv/bin/activate`: the venv's bin on PATH, no LD_LIBRARY_PATH
SHELL = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}


def test_perf_analyzer_measures_a_served_model_from_a_plain_shell(session_models, own_server, tmp_path):
    repo, _ = session_models
    server = own_server(repo, model_control_mode="explicit", load_models=[MODEL], open_apis=SERVER_APIS)
    csv = tmp_path / "c1.csv"
    argv = ["-m", MODEL, "-i", "grpc", "-u", server.grpc_url, "--concurrency-range", "1:1"]
    argv += ["--measurement-mode=count_windows", "--measurement-request-count", "50", "-f", str(csv)]
    argv += [
        "--stability-percentage",
        str(NO_STABILITY_CHECK),
        "--max-trials",
        "3",
    ]  # a busy host: no verdict

    out = subprocess.run(
        ["ge-plugin", "perf-analyzer", *argv], env=SHELL, capture_output=True, text=True, timeout=300
    )

    assert out.returncode == 0, out.stdout + out.stderr
    assert "Concurrency: 1, throughput:" in out.stdout  # its own report, measured against our server
    assert csv.read_text().startswith("Concurrency,Inferences/Second")  # -f, passed through as given


def test_perf_analyzer_errors_are_its_own_and_so_is_its_status():
    out = subprocess.run(
        ["ge-plugin", "perf-analyzer", "-m", MODEL, "-u", "127.0.0.1:1"],
        env=SHELL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0
    said = out.stdout + out.stderr
    assert "libcudart" not in said  # it started; what failed is the connection it was given
    assert "Couldn't connect to server" in said, said
