"""The profile-then-tune workflow of docs/tune.md, as a user runs it from a checkout: ``ge-plugin tune-profile
specs/<model>.yaml -o <model>.json``, then ``ge-plugin tune specs/<model>.yaml --profile <model>.json``. The
gear labels the first writes are the ones the second reads (issue 33: tune refused every label tune-profile
wrote for bert and llama, "gear '1x16' is not a gear of this model")."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ge_plugin", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(("model", "gears"), [("bert", 16), ("llama", 12)])
def test_tune_reads_back_the_profile_tune_profile_wrote(tmp_path, demo_models_dir, model, gears):
    # a checkout's layout: specs/ beside build/models/, where the specs' sources are
    (tmp_path / "specs").mkdir()
    shutil.copyfile(REPO / "specs" / f"{model}.yaml", tmp_path / "specs" / f"{model}.yaml")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "models").symlink_to(demo_models_dir)

    measured = _cli(
        tmp_path, "tune-profile", f"specs/{model}.yaml", "-o", f"{model}.json", "--seconds", "0.02"
    )
    assert measured.returncode == 0, measured.stderr[-3000:]
    profile = json.loads((tmp_path / f"{model}.json").read_text())
    assert len(profile["execute_latency_ms"]) == gears

    tuned = _cli(
        tmp_path, "tune", f"specs/{model}.yaml", "--latency-p99-ms", "1000", "--profile", f"{model}.json",
        "--knobs", "instances", "--instances", "1", "--concurrency", "1", "--measurement-ms", "300",
        "--no-confirm",
    )  # fmt: skip
    assert tuned.returncode == 0, tuned.stderr[-3000:] + tuned.stdout[-3000:]
    assert "is not a gear of this model" not in tuned.stderr
    report = json.loads((tmp_path / "tune-results" / "report.json").read_text())
    # every gear of the spec took the profile's own time: none was missing, none interpolated
    assert report["profile"]["by_gear"] == profile["execute_latency_ms"]
    (candidate,) = report["candidates"]
    assert candidate["status"] == "measured" and candidate["device_note"] == ""
    assert candidate["points"][0]["throughput"] > 0
    # the labels are the simulator's (docs/tune.md): ATC's values of the gear, the batch first
    assert next(iter(profile["execute_latency_ms"])) == ("1,16,1,16" if model == "bert" else "1,16")
