"""Every command that starts tritonserver leaves no process and no /dev/shm region behind when a signal ends
it: SIGTERM (a CI timeout, ``kill``), SIGINT (Ctrl-C, to the whole process group as a terminal sends it) or
SIGHUP (a closed terminal). Each command runs with its smallest settings and is signalled once its model's
stub is up; then nothing that carries its server's shm prefix may be left, nor the front's ring."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
_PREFIX = re.compile(rb"shm-region-prefix-name=(ge_plugin_[0-9a-f]+_)")


def processes() -> dict[int, tuple[int, bytes, str]]:
    """pid -> (parent pid, command line, state) of every process."""
    found = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                found[int(proc.name)] = (int(stat[1]), (proc / "cmdline").read_bytes(), stat[0])
            except (OSError, IndexError):
                continue
    return found


def server_of(pid: int) -> tuple[int, bytes] | None:
    """The tritonserver ``pid`` started and its shm prefix, once one of its stubs is up with its region."""
    table = processes()
    for child, (parent, cmdline, _) in table.items():
        match = _PREFIX.search(cmdline)
        if parent == pid and match:
            prefix = match.group(1)
            stubs = [p for p, (pp, line, _) in table.items() if pp == child and prefix in line]
            if stubs and list(Path("/dev/shm").glob(prefix.decode() + "*")):
                return child, prefix
    return None


def leftovers(prefix: bytes, pid: int) -> list[str]:
    alive = [
        f"process {p} ({state}): {line[:120]!r}"
        for p, (_, line, state) in processes().items()
        if prefix in line and state != "Z"
    ]
    regions = [str(r) for r in Path("/dev/shm").glob(prefix.decode() + "*")]
    rings = [str(r) for r in Path("/dev/shm").glob(f"ge_plugin_gone_{pid}_*")]
    return alive + regions + rings


def as_in_a_terminal() -> None:
    """The command's stop signals take their default action, as in a terminal's shell: a suite started with
    ``&`` (SIGINT ignored) or nohup (SIGHUP ignored) would hand them to it ignored, and Python keeps that."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def signalled(
    command: list[str], signum: int, *, group: bool = False, ready_port: int | None = None
) -> tuple[int, list[str]]:
    """Run ``ge-plugin COMMAND``, signal it once its server's stub is up (and, with ``ready_port``, the server
    ready); its exit status and what it left."""
    child = subprocess.Popen(
        [sys.executable, "-m", "ge_plugin", *command],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=as_in_a_terminal,
    )
    try:
        deadline = time.monotonic() + 240
        while (server := server_of(child.pid)) is None or (ready_port and not ready(ready_port)):
            assert child.poll() is None, child.stderr.read().decode(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "no tritonserver with a stub came up"
            time.sleep(0.2)
        if group:
            os.killpg(child.pid, signum)
        else:
            child.send_signal(signum)
        status = child.wait(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return status, leftovers(server[1], child.pid)


def test_serve_stopped_by_sigterm(session_models, triton_work_dir):
    repo, _ = session_models
    ports = [str(p) for p in (_free(), _free(), _free())]
    command = [
        "serve",
        str(repo),
        "--http-port",
        ports[0],
        "--grpc-port",
        ports[1],
        "--metrics-port",
        ports[2],
    ]
    command += [
        "--model-control-mode",
        "explicit",
        "--load-model",
        "identity_e2e",
        "--work-dir",
        str(triton_work_dir),
    ]
    status, left = signalled(command, signal.SIGTERM, ready_port=int(ports[0]))
    assert status == 0  # a graceful stop
    assert left == []


def test_bench_stopped_by_sigterm(tmp_path):
    from ge_plugin.models import write_model
    from ge_plugin.models.identity_model import identity

    write_model(tmp_path / "identity.onnx", identity())
    spec = tmp_path / "identity_bench.yaml"
    spec.write_text(
        "name: identity_bench\n"
        "model: {om: identity.om, source: identity.onnx, soc_version: Ascend910B3}\n"
        "inputs: [{name: INPUT0, dtype: fp32, dims: [16]}]\n"
        "outputs: [{name: OUTPUT0, dtype: fp32, dims: [16]}]\n"
        "batching: {gears: [1, 2]}\n"
    )
    profile = tmp_path / "profile.json"
    profile.write_text('{"execute_latency_ms": {"base_ms": 1.0}}')
    status, left = signalled(
        [
            "bench",
            str(spec),
            "--profile",
            str(profile),
            "--concurrency",
            "1",
            "--measurement-ms",
            "60000",
            "-o",
            str(tmp_path / "out"),
        ],
        signal.SIGTERM,
    )
    assert status == 128 + signal.SIGTERM
    assert left == []


def test_demo_stopped_by_ctrl_c(tmp_path):
    status, left = signalled(["demo", "-o", str(tmp_path)], signal.SIGINT, group=True)
    assert status == 128 + signal.SIGINT
    assert left == []


def test_tune_stopped_by_sighup(tmp_path):
    from ge_plugin.models import write_demo_models

    (tmp_path / "specs").mkdir()
    spec = tmp_path / "specs" / "llama.yaml"
    spec.write_text((ROOT / "specs" / "llama.yaml").read_text())
    write_demo_models(tmp_path / "build" / "models")  # where the spec's ../build/models source points
    command = ["tune", str(spec), "--latency-p99-ms", "500", "--seed-profile"]
    command += ["--knobs", "instances", "--instances", "1", "--concurrency", "1", "--measurement-ms", "200"]
    command += ["--max-trials", "1", "--no-confirm", "--budget-minutes", "1", "-o", str(tmp_path / "out")]
    status, left = signalled(command, signal.SIGHUP)
    assert status == 128 + signal.SIGHUP
    assert left == []


def _free() -> int:
    from ge_plugin.serve import free_port

    return free_port()
