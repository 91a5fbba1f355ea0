"""``python -m ge_plugin.sim run``: an unmodified pyACL program runs against the simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SAMPLE = Path(__file__).parent / "samples" / "acl_sample.py"
ASYNC_SAMPLE = Path(__file__).parent / "samples" / "acl_async_sample.py"
LITE_SAMPLE = Path(__file__).parent / "samples" / "lite_sample.py"
DYNAMIC_HW_SAMPLE = Path(__file__).parent / "samples" / "dynamic_hw_sample.py"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ge_plugin.sim", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize("batch", [2, 4])
def test_reference_written_sample_runs_unmodified(oms, graphs, tmp_path, batch):
    x = np.random.default_rng(batch).standard_normal((batch, 3, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", graphs.reference(graphs.matmul_add(), {"x": x})[0])
    result = _run(
        "run", str(SAMPLE), str(oms["batch"]), str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), str(batch)
    )
    assert result.returncode == 0, result.stderr
    assert f"sample OK ({batch}, 3, 3)" in result.stdout


def test_events_and_callbacks_sample_runs_unmodified(oms, graphs, tmp_path):
    batch = 4
    x = np.random.default_rng(7).standard_normal((batch, 3, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", graphs.reference(graphs.matmul_add(), {"x": x})[0])
    reports = tmp_path / "reports"
    result = _run(
        "run",
        str(ASYNC_SAMPLE),
        str(oms["batch"]),
        str(tmp_path / "x.npy"),
        str(tmp_path / "y.npy"),
        str(batch),
        env={"GE_PLUGIN_SIM_REPORT_DIR": str(reports), "GE_PLUGIN_SIM_EXECUTE_LATENCY_MS": "20"},
    )
    assert result.returncode == 0, result.stderr
    assert "async sample OK: 3 requests" in result.stdout
    (report,) = reports.glob("sim-*.json")
    device = json.loads(report.read_text())["devices"][0]
    assert device["executes"] == 3 and device["executes_by_gear"] == {"4": 3}
    assert device["model_bytes"] == 0, "the sample gave the model its own memory"
    assert device["memcpy_calls"]["d2h"] == 6  # three callbacks, three copies on the second stream


@pytest.mark.parametrize("load_type", [0, 1], ids=["load_from_file", "load_from_mem"])
def test_acllite_style_sample_runs_to_completion_under_check(oms, graphs, tmp_path, load_type):
    """A program in the style of the public acllite samples (its helpers in samples/lite/, written here):
    logging through acl.app_log, the run mode asked before acl.init, bytes_to_ptr copies both ways, every
    batch gear synchronously and on a stream. Under --check it finishes with no error, no raw pointer and
    no leak, and its log lines reach the terminal as CANN prints them."""
    x = np.random.default_rng(load_type).standard_normal((4, 3, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", graphs.reference(graphs.matmul_add(), {"x": x})[0])
    result = _run(
        "run",
        "--check",
        str(LITE_SAMPLE),
        str(oms["batch"]),
        str(tmp_path / "x.npy"),
        str(tmp_path / "y.npy"),
        str(load_type),
        env={"ASCEND_SLOG_PRINT_TO_STDOUT": "1", "ASCEND_GLOBAL_LOG_LEVEL": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert "lite sample OK: 6 runs over batches [1, 2, 4]" in result.stdout
    assert "ge-plugin sim check: 0 errors, 0 unchecked raw pointers, 0 leaked allocations" in result.stderr
    assert "[INFO] APP(" in result.stdout and "[INFO] batch 4 OK" in result.stdout


def _dynamic_hw_files(tmp_path: Path, graphs) -> list[str]:
    from ge_plugin.models import tiny_cnn

    img = np.random.default_rng(31).standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "img.npy", img)
    np.save(tmp_path / "logits.npy", graphs.reference(tiny_cnn(), {"images": img}, ["logits"])[0])
    return [str(tmp_path / "img.npy"), str(tmp_path / "logits.npy"), "8", "8"]


def test_the_dynamic_hw_samples_read_past_its_image_runs_as_on_hardware_and_warns_once(oms, graphs, tmp_path):
    """Issue 31's regression: the public dynamic-HW sample copies the largest gear's size (16x16) from the
    bytes of a smaller image (8x8). Real pyACL lets it through; so does the simulator by default, reading
    zeros past the object, with one warning naming the call, the object and the overrun. Seen failing
    before (ret=100000)."""
    env = {k: v for k, v in os.environ.items() if k != "GE_PLUGIN_SIM_CHECK"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ge_plugin.sim",
            "run",
            str(DYNAMIC_HW_SAMPLE),
            str(oms["cnn_hw"]),
            *_dynamic_hw_files(tmp_path, graphs),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "dynamic hw sample OK (2, 10)" in result.stdout
    assert result.stderr.count("ge-plugin sim: warning:") == 1, result.stderr
    over = 2 * 3 * (16 * 16 - 8 * 8) * 4
    assert "in acl.rt.memcpy at " in result.stderr and "dynamic_hw_sample.py:58 " in result.stderr
    assert f"runs {over} bytes past its end" in result.stderr
    assert "a 1536-byte bytes object" in result.stderr and "then 4608 zeros" in result.stderr


def test_the_dynamic_hw_samples_read_past_its_image_is_a_finding_under_check(oms, graphs, tmp_path):
    result = _run(
        "run", "--check", str(DYNAMIC_HW_SAMPLE), str(oms["cnn_hw"]), *_dynamic_hw_files(tmp_path, graphs)
    )
    assert result.returncode == 1
    assert "ge-plugin sim check: use-after-free in acl.rt.memcpy" in result.stderr
    assert "runs 4608 bytes past its end" in result.stderr
    assert "ge-plugin sim: warning:" not in result.stderr


def test_run_reports_the_scripts_exit_status_and_leaks(oms, tmp_path):
    script = tmp_path / "leaky.py"
    script.write_text(
        "import sys, acl\n"
        "assert acl.init() == 0 and acl.rt.set_device(0) == 0\n"
        "acl.rt.malloc(64, 0)\n"
        "assert acl.finalize() == 0\n"
        "sys.exit(sys.argv[1])\n"
    )
    result = _run(
        "run",
        str(script),
        "3",
        env={"GE_PLUGIN_SIM_REPORT_DIR": str(tmp_path / "reports"), "GE_PLUGIN_SIM_CHECK": "0"},
    )
    assert result.returncode == 1 and result.stderr.strip() == "3"
    (report,) = (tmp_path / "reports").glob("sim-*.json")
    assert json.loads(report.read_text())["devices"][0]["live_allocations"] == 1


def test_run_missing_script_is_a_usage_error(tmp_path):
    result = _run("run", str(tmp_path / "nope.py"))
    assert result.returncode == 2 and "does not exist" in result.stderr


def test_om_prints_the_header(oms):
    result = _run("om", str(oms["dims"]))
    assert result.returncode == 0
    header = json.loads(result.stdout)
    assert header["dynamic"]["mode"] == "dims" and len(header["dynamic"]["gears"]) == 4


def test_om_on_a_non_sim_file_explains(tmp_path):
    real = tmp_path / "real.om"
    real.write_bytes(b"IMOD" + bytes(64))
    result = _run("om", str(real))
    assert result.returncode == 1 and "ge-plugin atc" in result.stderr
