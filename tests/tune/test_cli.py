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
    assert "knobs gearz: unknown; the knobs are instances, streams" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batch-gears", "1,x"], "'x' in '1,x' is not a gear"),
        (["--concurrency", "1,x"], "'x' is not an integer >= 0"),
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


def test_a_concurrency_below_one_is_refused_once_by_the_options_in_their_own_words(capsys, tmp_path):
    code = main(["tune", str(LLAMA), "--latency-p99-ms", "10", "--seed-profile", "--concurrency", "0,4",
                 "--tolerance", "150", "-o", str(tmp_path)])  # fmt: skip
    assert code == 1
    err = capsys.readouterr().err
    assert "ge-plugin tune: error: concurrencies must be integers >= 1, got [0, 4]" in err
    assert "the tolerance must be between 0 and 100 percent, got 150" in err
    assert not (tmp_path / "work").exists()


def test_every_flag_lands_in_the_options_record_under_its_field(monkeypatch, tmp_path):
    import ge_plugin.tune.run as tune_run

    seen = []
    monkeypatch.setattr(tune_run, "run_tune", lambda options: seen.append(options))
    code = main(["tune", str(LLAMA), "--latency-p99-ms", "300", "--min-throughput", "20", "--seed-profile",
                 "--concurrency", "1,8", "-o", str(tmp_path), "--budget-minutes", "3", "--measurement-ms", "500",
                 "--stability", "30", "--max-trials", "4", "--knobs", "instances,streams", "--instances", "1,2",
                 "--queue-delays-us", "0,100", "--tolerance", "10", "--no-confirm"])  # fmt: skip
    assert code == 0
    (options,) = seen
    assert (options.constraints.latency_p99_ms, options.constraints.min_throughput) == (300, 20)
    assert (options.concurrencies, options.output, options.budget_minutes) == ((1, 8), tmp_path, 3)
    assert (options.measurement_ms, options.stability_percentage, options.max_trials) == (500, 30, 4)
    assert options.seed_profile and not options.confirm and options.tolerance == 0.1
    assert options.knobs == ("instances", "streams")
    assert options.ladders == {"instances": (1, 2), "max_queue_delay_us": (0, 100)}
    assert options.output_spec is None and options.profile is None  # not given: the record's defaults
