"""``ge-plugin tune`` end to end on the simulator: a real tritonserver, perf_analyzer, a tiny profile, the
chosen spec written, validated and confirmed; an impossible constraint; a profile measured by the engine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ge_plugin.models import identity, write_model
from ge_plugin.spec import load_spec

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SPEC = """\
# The identity model, batched: the sweep's subject.
name: ident_tune
model:
  om: identity.om
  source: identity.onnx
  soc_version: Ascend910B3
inputs:
  - name: INPUT0
    dtype: fp32
    dims: [16]
outputs:
  - name: OUTPUT0
    dtype: fp32
    dims: [16]
batching:
  gears: [1, 2, 4]
  max_queue_delay_us: 0
placement:
  instances_per_device: 1
warmup: 1
"""
#: device time per gear (ms): large enough against the host's noise that the device sets the pace
PROFILE = {"device": "hand-written for the test", "execute_latency_ms": {"1": 8.0, "2": 9.0, "4": 11.0}}


def _cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ge_plugin", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def model(tmp_path: Path) -> Path:
    write_model(tmp_path / "identity.onnx", identity())
    spec = tmp_path / "ident.yaml"
    spec.write_text(SPEC)
    (tmp_path / "profile.json").write_text(json.dumps(PROFILE))
    return spec


def test_a_small_sweep_writes_a_spec_that_validates_and_meets_its_constraint_when_served_again(
    model, tmp_path
):
    out = tmp_path / "out"
    run = _cli(
        "tune", str(model), "--latency-p99-ms", "250", "--profile", str(tmp_path / "profile.json"),
        "--concurrency", "4", "--knobs", "instances,max_queue_delay_us", "--instances", "1,2",
        "--queue-delays-us", "0,4000", "--measurement-ms", "500",
        "-o", str(out),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["label"].startswith("CPU simulator (timing-only), ")
    candidates = report["candidates"]
    assert 2 <= len(candidates) <= 4  # of the 4 configurations: the search prunes, never repeats
    assert candidates[0]["origin"] == "the input spec"
    assert all(c["status"] == "measured" and c["points"][0]["throughput"] > 0 for c in candidates)
    assert report["pareto"] and report["chosen"] is not None
    # the confirming run served the written file and met the constraint
    confirmed = report["confirmed"]
    assert confirmed is not None and confirmed["p99_ms"] <= 250 and confirmed["throughput"] > 0
    written = Path(report["written"])
    assert written.parent == out
    validate = _cli("validate", str(written))
    assert validate.returncode == 0, validate.stdout + validate.stderr
    text = written.read_text()
    assert "# Tuned by `ge-plugin tune`" in text and "CPU simulator (timing-only)" in text
    assert "confirmed from this file: p99" in text and "meets the constraints" in text
    assert "# The identity model, batched: the sweep's subject." in text  # the user's own comments stay
    tuned = load_spec(written)
    chosen = next(c for c in candidates if c["id"] == report["chosen"]["candidate"])
    assert tuned.placement.instances_per_device == chosen["config"]["instances"]
    assert tuned.source_path.resolve() == (tmp_path / "identity.onnx").resolve()
    assert (out / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown = (out / "report.md").read_text()
    assert "## Pareto front (p99 against throughput)" in markdown and "CPU simulator" in markdown
    assert "chosen: #" in run.stdout and "confirmed:" in run.stdout


def test_an_impossible_constraint_says_the_best_p99_found(model, tmp_path):
    out = tmp_path / "out"
    run = _cli(
        "tune", str(model), "--latency-p99-ms", "0.5", "--profile", str(tmp_path / "profile.json"),
        "--concurrency", "1", "--knobs", "instances", "--instances", "1", "--measurement-ms", "300",
        "-o", str(out),
    )  # fmt: skip
    assert run.returncode == 1
    assert "no configuration met p99 <= 0.5 ms in 1 candidates: the best p99 found was" in run.stderr
    best = json.loads((out / "report.json").read_text())["candidates"][0]["points"][0]["p99_ms"]
    assert f"the best p99 found was {best:.2f} ms" in run.stderr
    assert best >= 8.0  # the profile's device time is a floor
    assert not (out / "ident.yaml").exists()  # nothing is written that does not meet the constraint


def test_the_simulator_refuses_to_sweep_without_device_times(model, tmp_path):
    run = _cli("tune", str(model), "--latency-p99-ms", "10", "-o", str(tmp_path / "out"))
    assert run.returncode == 1
    assert "the simulator needs each gear's device time: --profile FILE" in run.stderr


def test_tune_profile_measures_every_gear_and_tune_reads_it_back(model, tmp_path):
    path = tmp_path / "measured.json"
    run = _cli("tune-profile", str(model), "-o", str(path), "--seconds", "0.1", "--work", str(tmp_path / "w"))
    assert run.returncode == 0, run.stderr[-3000:]
    data = json.loads(path.read_text())
    assert set(data["execute_latency_ms"]) == {"1", "2", "4"}
    assert data["device"].startswith("CPU simulator")
    assert all(v["calls"] >= 10 and v["stream_ms"] > 0 for v in data["measured"].values())
    from ge_plugin.tune.profile import load_profile

    profile = load_profile(path, load_spec(model))
    assert profile.by_gear == data["execute_latency_ms"]
