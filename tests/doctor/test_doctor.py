"""ge-plugin doctor: one line per piece this host runs, each failure with what to do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ge_plugin import doctor, fastpath
from ge_plugin.cli import main
from ge_plugin.device import aclapi


def lines(capsys) -> dict[str, str]:
    out = capsys.readouterr().out
    return {line.split()[1]: line for line in out.splitlines() if line.split()[0] in ("ok", "warn", "fail")}


def test_doctor_after_make_setup_finds_every_piece(capsys, monkeypatch):
    monkeypatch.delenv("GE_PLUGIN_DEVICE", raising=False)
    assert main(["doctor"]) == 0
    found = lines(capsys)
    assert set(found) == {
        "device",
        "fast",
        "numpy",
        "glibc",
        "tritonserver",
        "perf_analyzer",
        "http",
        "grpc",
        "loads",
    }
    assert all(line.startswith("ok") for line in found.values()), found


def test_doctor_fails_on_a_fast_path_that_fell_back(capsys, monkeypatch):
    monkeypatch.setattr(fastpath, "FALLBACK_REASON", "the compiled ge_plugin._fastpath did not load (boom)")
    monkeypatch.setattr(fastpath, "IMPLEMENTATION", "py")
    assert main(["doctor"]) == 1
    line = lines(capsys)["fast"]
    assert line.startswith("fail")
    assert "20-49x slower" in line and "(boom)" in line and "rebuild the extension" in line


def test_doctor_fails_when_ascend_is_asked_for_and_pyacl_is_missing(monkeypatch):
    monkeypatch.setattr(aclapi, "_acl", None)
    monkeypatch.setitem(sys.modules, "acl", None)  # importing it raises ImportError
    monkeypatch.setenv("GE_PLUGIN_DEVICE", "ascend")
    finding = doctor.check_device()
    assert finding.status == doctor.FAIL
    assert "source the CANN set_env.sh" in finding.detail


def test_doctor_fails_when_ascend_is_asked_for_and_acl_is_the_simulator(monkeypatch):
    from ge_plugin.sim import acl as simulated

    monkeypatch.setattr(aclapi, "_acl", None)
    monkeypatch.setitem(sys.modules, "acl", simulated)
    monkeypatch.setenv("GE_PLUGIN_DEVICE", "ascend")
    finding = doctor.check_device()
    assert finding.status == doctor.FAIL
    assert "gives ge-plugin's simulator, not CANN's pyACL" in finding.detail


def test_doctor_fails_on_numpy_2(monkeypatch):
    monkeypatch.setattr(np, "__version__", "2.1.0")
    finding = doctor.check_numpy()
    assert finding.status == doctor.FAIL
    assert "pip install 'numpy<2'" in finding.detail


@pytest.mark.parametrize(
    ("confstr", "status", "said"),
    [
        ("glibc 2.36", doctor.OK, "2.36 (>= 2.35"),  # Debian 12
        ("glibc 2.35", doctor.OK, "2.35 (>= 2.35"),  # Ubuntu 22.04
        (
            "glibc 2.34",
            doctor.FAIL,
            "2.34: tritonserver (nvidia-pytriton 0.7.0, manylinux_2_35 wheels) needs glibc 2.35",
        ),
        ("glibc 2.28", doctor.FAIL, "openEuler 22.03 has 2.34"),
        (None, doctor.FAIL, "not a glibc system (no CS_GNU_LIBC_VERSION)"),  # musl: confstr has no answer
        ("musl 1.2.4", doctor.FAIL, "not a glibc system (musl 1.2.4)"),
    ],
)
def test_doctor_checks_the_glibc_tritonserver_needs(monkeypatch, confstr, status, said):
    monkeypatch.setattr(doctor.os, "confstr", lambda name: confstr)

    finding = doctor.check_glibc()

    assert (finding.status, finding.what) == (status, "glibc")
    assert said in finding.detail


def test_doctor_warns_when_perf_analyzer_misses_a_library(monkeypatch):
    from ge_plugin.measure import perf

    monkeypatch.setattr(perf, "environment", lambda base=None: {"PATH": "/usr/bin:/bin"})
    finding = doctor.check_perf_analyzer()
    assert finding.status == doctor.WARN
    assert "missing libcudart.so.12" in finding.detail
    assert "only ge-plugin bench, tune and perf-analyzer need it" in finding.detail


def test_doctor_says_how_to_run_perf_analyzer_when_the_shell_alone_would_not_start_it():
    from ge_plugin.measure import perf

    # a user's shell after make setup and activate: nothing on LD_LIBRARY_PATH
    finding = doctor.check_perf_analyzer({"PATH": "/usr/bin:/bin"})

    assert finding.status == doctor.OK
    assert "every library found when run as `ge-plugin perf-analyzer ARGS`" in finding.detail
    assert "run alone from this shell it would not start (missing libcudart.so.12)" in finding.detail
    assert f"export LD_LIBRARY_PATH={perf.library_dir()}" in finding.detail
    # what doctor advises works: perf_analyzer alone starts with that path, and through the wrapper
    env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": str(perf.library_dir())}
    alone = subprocess.run([str(perf.binary()), "--version"], env=env, capture_output=True, text=True)
    assert alone.returncode == 0 and "2.51" in alone.stdout + alone.stderr
    wrapped = subprocess.run(
        [str(Path(sys.executable).parent / "ge-plugin"), "perf-analyzer", "--version"],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert wrapped.returncode == 0 and "Perf Analyzer Version 2.51" in wrapped.stdout + wrapped.stderr


def test_doctor_says_when_the_shell_finds_perf_analyzers_libraries_itself():
    from ge_plugin.measure import perf

    finding = doctor.check_perf_analyzer(
        {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": str(perf.library_dir())}
    )

    assert finding.status == doctor.OK
    assert finding.detail.endswith("every library found, from this shell too")


@pytest.mark.parametrize("check", doctor.CHECKS, ids=lambda c: c.__name__)
def test_every_check_names_what_it_checked(check):
    finding = check()
    assert finding.status in (doctor.OK, doctor.WARN, doctor.FAIL)
    assert finding.what and finding.detail


# -- the control plane ----------------------------------------------------------------------------------


def test_doctor_says_the_defaults_close_the_control_plane_to_every_client(capsys, monkeypatch):
    monkeypatch.delenv("GE_PLUGIN_ADMIN_KEY", raising=False)
    assert main(["doctor"]) == 0
    found = lines(capsys)
    for protocol in ("http", "grpc"):
        assert "every client: health, metadata, inference;" in found[protocol]
        assert "no client (no admin key given): shared-memory, model-config" in found[protocol]
    assert "model files uploaded with a load: refused" in found["loads"]


def test_doctor_with_serves_flags_says_who_may_use_what(capsys, monkeypatch, tmp_path):
    key = tmp_path / "key"
    key.write_text("x" * 32)
    monkeypatch.delenv("GE_PLUGIN_ADMIN_KEY", raising=False)
    argv = ["doctor", "--admin-key-file", str(key), "--open-api", "logging", "--allow-model-files"]
    assert main([*argv, "--model-root", "/models"]) == 0
    found = lines(capsys)
    assert (
        found["http"].startswith("warn")
        and "open to every client: logging change the server" in found["http"]
    )
    assert "the admin key: shared-memory, model-config, model-repository, statistics, trace" in found["http"]
    # the gRPC front checks loads as the HTTP one does, so the key opens the repository API on both
    assert "the admin key: shared-memory, model-config, model-repository, statistics, trace" in found["grpc"]
    assert found["loads"].startswith("warn") and "ALLOWED" in found["loads"] and "/models" in found["loads"]
    # without the gRPC front nobody checks a gRPC load, so nobody may make one
    assert main([*argv, "--model-root", "/models", "--no-grpc-guard"]) == 0
    assert "no client (no front checks loads on this protocol): model-repository" in lines(capsys)["grpc"]


@pytest.mark.parametrize(
    ("argv", "env", "said"),
    [
        (["--admin-key-file", "/nonexistent/key"], {}, "cannot read it"),
        ([], {"GE_PLUGIN_ADMIN_KEY": "short"}, "fewer than 16"),
        (["--", "--http-restricted-api=logging,k=v"], {}, "APIS:KEY=VALUE"),
    ],
)
def test_doctor_fails_on_a_control_plane_serve_would_refuse(capsys, monkeypatch, argv, env, said):
    monkeypatch.delenv("GE_PLUGIN_ADMIN_KEY", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["doctor", *argv]) == 1
    assert said in lines(capsys)["control"]
