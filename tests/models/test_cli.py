"""``ge-plugin demo-models`` through a real subprocess, as a user runs it."""

from __future__ import annotations

import hashlib
import subprocess
import sys

from ge_plugin import models


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ge_plugin", "demo-models", *args], capture_output=True, text=True, timeout=120
    )


def test_demo_models_cli_writes_and_describes_each_model(tmp_path):
    result = _run(str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(models.DEMO_MODELS) + 2  # and the tokenizer's two files
    assert lines[-2].startswith(str(tmp_path / "out" / "tokenizer.json"))
    assert lines[-1].startswith(str(tmp_path / "out" / "tokenizer_config.json"))
    assert lines[-1].endswith("byte-level BPE, 512 tokens, <pad>=0 <s>=1 </s>=2  (written)")
    for line, (stem, build) in zip(lines, models.DEMO_MODELS.items()):
        # Built in another process, yet the same bytes: the sha256 printed there matches ours.
        sha = hashlib.sha256(build().SerializeToString()).hexdigest()[:12]
        assert line.startswith(str(tmp_path / "out" / f"{stem}.onnx"))
        assert f"sha256 {sha}" in line
        assert line.endswith("(written)")
    assert "input_ids int64[batch,seq] -> logits float32[batch,seq,32000]" in lines[0]
    assert (
        "input_ids int64[batch,seq], attention_mask int64[batch,seq] -> last_hidden_state float32[batch,seq,64]"
        in lines[1]
    )
    assert "INPUT0 float32[batch,16] -> OUTPUT0 float32[batch,16]" in lines[2]
    assert (
        "images float32[batch,3,height,width] -> logits float32[batch,10], features float32[batch,4,height,width]"
        in lines[3]
    )
    assert "x bfloat16[batch,8] -> y bfloat16[batch,8]" in lines[4]


def test_demo_models_cli_second_run_reports_unchanged(tmp_path):
    assert _run(str(tmp_path)).returncode == 0
    second = _run(str(tmp_path))
    assert second.returncode == 0
    assert [line.rsplit(" ", 1)[-1] for line in second.stdout.splitlines()] == ["(unchanged)"] * (
        len(models.DEMO_MODELS) + 2
    )


def test_demo_models_cli_reports_a_directory_it_cannot_create(tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("a file")
    result = _run(str(taken))
    assert result.returncode == 1
    assert result.stderr.startswith(f"ge-plugin demo-models: error: cannot write models to {taken}:")
    assert result.stdout == ""


def test_demo_models_cli_help_ends_with_an_example():
    result = _run("--help")
    assert result.returncode == 0
    assert "examples:\n  ge-plugin demo-models models" in result.stdout


def test_demo_models_cli_without_a_directory_is_a_usage_error():
    result = _run()
    assert result.returncode == 2
    assert "DIR" in result.stderr
