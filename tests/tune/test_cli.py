"""``ge-plugin tune`` and ``tune-profile`` refuse bad options before anything is built or served."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ge_plugin.cli import main

LLAMA = Path(__file__).resolve().parents[2] / "specs" / "llama.yaml"


def test_unknown_knobs_are_named(capsys, tmp_path):
    code = main(["tune", str(LLAMA), "--latency-p99-ms", "10", "--seed-profile", "--knobs", "instances,gearz",
                 "-o", str(tmp_path)])  # fmt: skip
    assert code == 1
    assert "--knobs gearz: unknown; the knobs are instances, streams" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batch-gears", "1,x"], "'x' in '1,x' is not a gear"),
        (["--concurrency", "0"], "'0' is not an integer >= 1"),
        (["--profile", "p.json", "--seed-profile"], "not allowed with argument"),
    ],
)
def test_malformed_options_are_usage_errors(capsys, args, message):
    with pytest.raises(SystemExit) as exited:
        main(["tune", str(LLAMA), "--latency-p99-ms", "10", *args])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_a_profile_with_bad_entries_stops_the_sweep_before_it_starts(capsys, tmp_path):
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"execute_latency_ms": {"1,16": 78, "4": 145, "8,16": -1}}))
    code = main(
        ["tune", str(LLAMA), "--latency-p99-ms", "300", "--profile", str(profile), "-o", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert (
        "gear '4' is not a gear of this model: a label is 2 values" in err
        and "'8,16': -1 is not a time" in err
    )
    assert not (tmp_path / "o" / "work" / "repository").exists()


def test_dims_gear_sets_must_fit_the_models_dynamic_dims(capsys, tmp_path):
    bert = LLAMA.parent / "bert.yaml"
    code = main(["tune", str(bert), "--latency-p99-ms", "10", "--seed-profile", "--dims-gears", "16x32x64",
                 "-o", str(tmp_path)])  # fmt: skip
    assert code == 1
    assert "--dims-gears: 16x32x64 has 3 values; bert_model has 2 -1 dims" in capsys.readouterr().err
