"""``ge-plugin validate`` and ``ge-plugin render`` as a user runs them: in a subprocess, from the checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

ROOT = Path(__file__).resolve().parents[2]


def ge_plugin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ge_plugin", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_validate_prints_ok_per_spec():
    result = ge_plugin("validate", "specs")

    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (
        "ok: specs/bert.yaml (bert_model)\nok: specs/cnn_jpeg.yaml (cnn_jpeg)\nok: specs/llama.yaml (llama_model)\n"
        "ok: specs/llama_generate.yaml (llama_generate)\n"
        "ok: specs/llama_generate_layers.yaml (llama_generate_layers)\n"
    )


def test_validate_reports_bad_dtype_and_unknown_key_with_file_and_line(tmp_path):
    lines = (ROOT / "specs" / "llama.yaml").read_text().splitlines()
    dtype_line = lines.index("    dtype: int64") + 1
    lines[dtype_line - 1] = "    dtype: int46"
    lines.append("precison: fp16")
    broken = tmp_path / "llama.yaml"
    broken.write_text("\n".join(lines) + "\n")

    result = ge_plugin("validate", str(broken), "specs/bert.yaml")

    assert result.returncode == 1
    assert result.stdout == "ok: specs/bert.yaml (bert_model)\n"
    problems = result.stderr.splitlines()
    assert problems[0].startswith(f"{broken}:{dtype_line}: $.inputs[0].dtype: unknown data type 'int46'")
    assert (
        problems[1]
        == f"{broken}:{len(lines)}: $.precison: unknown key 'precison' (did you mean 'precision'?)"
    )
    assert problems[2].startswith("ge-plugin validate: 2 problems")


def test_render_writes_a_repository_that_parses(tmp_path):
    out = tmp_path / "out"

    result = ge_plugin("render", "specs", "-o", str(out))

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        f"rendered {out / 'bert_model' / 'config.pbtxt'} (new: 1/)",
        f"rendered {out / 'cnn_jpeg' / 'config.pbtxt'} (new: 1/)",
        f"rendered {out / 'llama_model' / 'config.pbtxt'} (new: 1/)",
    ]
    # the generating ones copy their tokenizer too, when demo-models has written it
    assert [line.split(" (new: 1/")[0] for line in lines[3:]] == [
        f"rendered {out / 'llama_generate' / 'config.pbtxt'}",
        f"rendered {out / 'llama_generate_layers' / 'config.pbtxt'}",
    ]
    config = text_format.Parse((out / "llama_model" / "config.pbtxt").read_text(), mc.ModelConfig())
    assert (config.backend, config.max_batch_size) == ("ge", 8)
    assert [(i.name, i.data_type, list(i.dims)) for i in config.input] == [("input_ids", mc.TYPE_INT64, [-1])]
    assert [(o.name, o.data_type, list(o.dims)) for o in config.output] == [
        ("logits", mc.TYPE_FP32, [-1, 32000])
    ]
    assert config.parameters["om_model_path"].string_value == "llama.om"
    assert list(config.dynamic_batching.preferred_batch_size) == [8]
    assert [g.name for g in config.instance_group] == ["npu0"]
    assert (out / "llama_model" / "1").is_dir()


def test_render_again_says_what_it_left_unchanged(tmp_path):
    out = tmp_path / "out"
    ge_plugin("render", "specs/llama.yaml", "specs/bert.yaml", "-o", str(out))
    bert = out / "bert_model" / "config.pbtxt"
    bert.write_text(bert.read_text().replace("max_batch_size: 8", "max_batch_size: 4"))
    before = (out / "llama_model" / "config.pbtxt").stat().st_mtime_ns

    result = ge_plugin("render", "specs/llama.yaml", "specs/bert.yaml", "-o", str(out))

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"unchanged {out / 'llama_model' / 'config.pbtxt'}",
        f"rendered {bert}",
    ]
    assert (out / "llama_model" / "config.pbtxt").stat().st_mtime_ns == before


def test_render_check_passes_on_the_committed_model_repository():
    result = ge_plugin("render", "--check", "specs", "-o", "model_repository")

    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "ok: model_repository matches 5 specs\n",
        "",
    )


def test_render_check_fails_with_a_diff_and_writes_nothing(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "model_repository", repo)
    config = repo / "llama_model" / "config.pbtxt"
    config.write_text(config.read_text().replace('string_value: "llama.om"', 'string_value: "old.om"'))
    before = config.read_text()

    result = ge_plugin("render", "--check", "specs", "-o", str(repo))

    assert result.returncode == 1
    assert f"--- {config}\n" in result.stdout
    assert '\n-    string_value: "old.om"\n+    string_value: "llama.om"\n' in result.stdout
    assert "differs from the specs; run `ge-plugin render specs -o" in result.stderr
    assert config.read_text() == before


def test_render_of_an_invalid_spec_exits_1_and_writes_nothing(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        (ROOT / "specs" / "llama.yaml").read_text().replace("gears: [1, 4, 8]", "gears: [8, 4, 1]")
    )

    result = ge_plugin("render", str(spec), "-o", str(tmp_path / "repo"))

    assert result.returncode == 1
    assert ": $.batching.gears[1]: gears must be strictly ascending, got [8, 4, 1]" in result.stderr
    assert not (tmp_path / "repo").exists()


@pytest.mark.parametrize("args", [("validate",), ("render", "specs"), ("render", "-o", "x")])
def test_commands_exit_2_on_usage_errors(args):
    result = ge_plugin(*args)

    assert result.returncode == 2
    assert "usage: ge-plugin" in result.stderr


@pytest.mark.parametrize("command", ["validate", "render"])
def test_commands_help_ends_with_examples(command):
    result = ge_plugin(command, "--help")

    assert result.returncode == 0
    examples = result.stdout.split("examples:\n", 1)[1]
    assert f"ge-plugin {command} specs" in examples


def test_render_warns_about_a_stale_ge_model_but_keeps_it(tmp_path):
    repo = tmp_path / "repo"
    stale = repo / "old_model" / "config.pbtxt"
    stale.parent.mkdir(parents=True)
    stale.write_text('name: "old_model"\nbackend: "ge"\n')

    result = ge_plugin("render", "specs", "-o", str(repo))

    assert result.returncode == 0
    assert (
        result.stderr
        == f"warning: {stale} is a ge model that no given spec renders; delete it if it is stale\n"
    )
    assert stale.is_file()


def test_validate_refuses_a_billion_laughs_at_its_line(tmp_path):
    levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    levels += [f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]" for p, n in zip("abcdefgh", "bcdefghi")]
    laughs = tmp_path / "laughs.yaml"
    laughs.write_text("\n".join(levels) + "\n")

    result = ge_plugin("validate", str(laughs))

    assert result.returncode == 1
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"{laughs}:5: $.e[0]: YAML aliases expand this document to more than 10000 nodes")
    assert "'billion laughs' document is refused" in first
