"""``ge-plugin migrate`` over GE backend configs written from its reference (example/resnet, the CN-CLIP tuning
guide, gears over batch and sequence, a TF model without batching, the demo LLaMA): golden specs and notes,
specs that ``ge-plugin validate`` accepts and ATC builds, and every key accounted for."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from ge_plugin.migrate.convert import CARRIED_FIELDS
from ge_plugin.models import tiny_llama, write_model

HERE = Path(__file__).resolve().parent
CONFIGS = HERE / "configs"
GOLDEN = HERE / "golden"
CASES = ("resnet", "cnclip", "bert", "yolo", "llama")
#: parameters whose value the spec carries as is, without a note: key -> how to find it in the spec
CARRIED_AS_IS = {
    "device_ids": lambda spec, value: spec["placement"]["devices"] == [int(v) for v in value.split(",")],
    "session.ge.exec.precision_mode_v2": lambda spec, value: (
        spec["precision"] == value.replace("mixed_bfloat16", "bf16")
    ),
}


def ge_plugin(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ge_plugin", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def model_folders(directory: Path) -> Path:
    """The configs as model folders, with the model files the GE backend would have found in them."""
    for case in CASES:
        shutil.copytree(CONFIGS / case, directory / case)
    (directory / "resnet" / "resnet50.onnx").write_bytes(b"")  # only its name matters to migrate
    (directory / "yolo" / "yolo.pb").write_bytes(b"")
    (directory / "llama" / "1").mkdir()
    write_model(directory / "llama" / "1" / "model.onnx", tiny_llama())
    return directory


@pytest.fixture
def workdir(tmp_path) -> Path:
    """model_folders of the test's own, which it may change."""
    return model_folders(tmp_path)


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    """``migrated(case)``: (the folder, the migrate run) of each case as is, migrated once per module into
    specs/CASE.yaml of a shared model_folders (the tests only read it)."""
    shared = model_folders(tmp_path_factory.mktemp("migrate"))
    done: dict[str, subprocess.CompletedProcess[str]] = {}

    def run(case: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
        if case not in done:
            done[case] = migrate(shared, case)
        return shared, done[case]

    return run


def migrate(workdir: Path, case: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return ge_plugin(
        "migrate",
        f"{case}/config.pbtxt",
        "--soc-version",
        "Ascend910B3",
        "-o",
        f"specs/{case}.yaml",
        *extra,
        cwd=workdir,
    )


@pytest.mark.parametrize("case", CASES)
def test_migrate_writes_the_golden_spec_and_notes(migrated, case):
    workdir, result = migrated(case)

    assert result.returncode == 0, result.stderr
    assert (workdir / "specs" / f"{case}.yaml").read_text() == (GOLDEN / f"{case}.yaml").read_text()
    assert result.stderr == (GOLDEN / f"{case}.notes").read_text()


@pytest.mark.parametrize("case", CASES)
def test_migrated_spec_passes_ge_plugin_validate(migrated, case):
    workdir, migration = migrated(case)
    assert migration.returncode == 0

    result = ge_plugin("validate", f"specs/{case}.yaml", cwd=workdir)

    assert (result.returncode, result.stderr) == (0, "")


@pytest.mark.parametrize("case", CASES)
def test_every_parameter_and_field_is_carried_or_named_with_a_reason(migrated, case):
    workdir, result = migrated(case)
    spec = yaml.safe_load((workdir / "specs" / f"{case}.yaml").read_text())
    config = text_format.Parse((CONFIGS / case / "config.pbtxt").read_text(), mc.ModelConfig())

    for key, value in config.parameters.items():
        named = f": parameters.{key}: " in result.stderr or f": {key}: " in result.stderr
        carried = key in CARRIED_AS_IS and CARRIED_AS_IS[key](spec, value.string_value)
        assert named or carried, key
    for descriptor, _value in config.ListFields():
        assert descriptor.name in CARRIED_FIELDS or f": {descriptor.name}: " in result.stderr, descriptor.name
    # and the notes are in the spec file too, as comments
    text = (workdir / "specs" / f"{case}.yaml").read_text()
    for line in result.stderr.splitlines()[1:]:
        assert f"# {line}" in text


def test_migrated_llama_compiles_with_atc_into_an_om_with_the_ge_gears(workdir):
    assert migrate(workdir, "llama").returncode == 0

    result = ge_plugin("atc", "specs/llama.yaml", "--sim", "--repository", "repo", cwd=workdir)

    assert result.returncode == 0, result.stderr
    assert (workdir / "repo" / "llama" / "1" / "llama.om").is_file()
    printed = ge_plugin("atc", "specs/llama.yaml", "--print", cwd=workdir)
    assert "--dynamic_dims=1,16;1,32;8,16;8,32" in printed.stdout.replace("'", "")


def test_migrate_to_stdout_prints_the_spec_and_notes_on_stderr(workdir):
    result = ge_plugin("migrate", "resnet/config.pbtxt", "--soc-version", "Ascend310P3", cwd=workdir)

    assert result.returncode == 0
    spec = yaml.safe_load(result.stdout)
    assert spec["model"] == {
        "om": "resnet.om",
        "source": "resnet/resnet50.onnx",
        "soc_version": "Ascend310P3",
    }
    assert result.stderr.startswith("carried over with a change:\n")


def test_dynamic_dims_without_gears_need_dims_gears(workdir):
    config = workdir / "bert" / "config.pbtxt"
    lines = [
        line
        for line in config.read_text().splitlines()
        if "ge.inputShape" not in line and "ge.dynamicDims" not in line
    ]
    config.write_text("\n".join(lines) + "\n")

    refused = migrate(workdir, "bert")
    given = migrate(workdir, "bert", "--dims-gears", "64,128")

    assert refused.returncode == 1
    assert refused.stderr.startswith(
        "ge-plugin migrate: error: bert/config.pbtxt:6: input_ids dims[0], attention_mask dims[0] are -1 and the "
        "config names no gears for them"
    )
    assert "--dims-gears" in refused.stderr
    assert given.returncode == 0, given.stderr
    spec = yaml.safe_load((workdir / "specs" / "bert.yaml").read_text())
    assert spec["dims_gears"] == [[64, 64], [128, 128]]
    assert spec["batching"]["gears"] == [1, 2, 4]  # derived: powers of two up to max_batch_size 4


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('backend: "npu_ge"', 'backend: "ge"'), "resnet/config.pbtxt:3: backend is 'ge', not \"npu_ge\""),
        (('backend: "npu_ge"', 'backend: "onnxruntime"'), "ge-plugin migrate reads CANN GE backend configs"),
        (("max_batch_size: 8", "max_batch_sise: 8"), "resnet/config.pbtxt:4: not a Triton model config"),
        (
            ("TYPE_FP32\n    dims: [ 3", "TYPE_BF16\n    dims: [ 3"),
            "resnet/config.pbtxt:7: input 'image': TYPE_BF16",
        ),
        (
            ("image:-1,3,224,224", "pixels:-1,3,224,224"),
            "names input 'pixels', which the config does not declare",
        ),
        (('"1;2;4;8"', '"1,2;4,8"'), "each gear has 2 values but graph.ge.inputShape has 1 -1 dims"),
    ],
)
def test_configs_that_cannot_migrate_exit_1_naming_file_and_line(workdir, edit, message):
    config = workdir / "resnet" / "config.pbtxt"
    config.write_text(config.read_text().replace(*edit))

    result = migrate(workdir, "resnet")

    assert result.returncode == 1
    assert message in result.stderr
    assert not (workdir / "specs" / "resnet.yaml").exists()


def test_soc_version_is_required_and_gear_options_are_checked_as_usage(workdir):
    missing = ge_plugin("migrate", "resnet/config.pbtxt", cwd=workdir)
    bad = ge_plugin(
        "migrate", "resnet/config.pbtxt", "--soc-version", "Ascend910B3", "--dims-gears", "16,x", cwd=workdir
    )

    assert missing.returncode == bad.returncode == 2
    assert "--soc-version" in missing.stderr
    assert "expected comma-separated integers, got '16,x'" in bad.stderr


def test_a_chip_the_spec_refuses_is_reported_from_the_spec_loader(workdir):
    result = ge_plugin("migrate", "resnet/config.pbtxt", "--soc-version", "910B3", cwd=workdir)

    assert result.returncode == 1
    assert "the migrated spec does not validate" in result.stderr
    assert "$.model.soc_version: expected 'Ascend' + the chip name" in result.stderr


def test_migrate_help_ends_with_examples(tmp_path):
    result = ge_plugin("migrate", "--help", cwd=tmp_path)

    assert result.returncode == 0
    assert (
        "examples:\n  ge-plugin migrate models/resnet/config.pbtxt --soc-version Ascend910B3" in result.stdout
    )


def test_migrate_doc_covers_every_key_the_ge_backend_reads():
    from ge_plugin.migrate.ge_config import FIXED_KEYS

    text = (HERE.parents[1] / "docs" / "migrate.md").read_text()

    assert [key for key in FIXED_KEYS if f"`{key}" not in text] == []
    for prefix in ("session.", "graph.", "global."):
        assert f"`{prefix}" in text
