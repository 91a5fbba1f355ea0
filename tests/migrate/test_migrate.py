"""``ge-plugin migrate`` over GE backend configs written from its reference (example/resnet, the CN-CLIP tuning
guide, gears over batch and sequence, a TF model without batching, the demo LLaMA): golden specs and notes,
specs that ``ge-plugin validate`` accepts and ATC builds, and every key accounted for."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml
from google.protobuf import text_format
from onnx import TensorProto, helper, numpy_helper
from tritonclient.grpc import model_config_pb2 as mc

from ge_plugin.migrate import tf_graph
from ge_plugin.migrate.convert import CARRIED_FIELDS
from ge_plugin.models import tiny_llama, write_model

HERE = Path(__file__).resolve().parent
CONFIGS = HERE / "configs"
GOLDEN = HERE / "golden"
CASES = ("resnet", "cnclip", "bert", "yolo", "llama", "resnet_example", "tf_frozen")
#: the launch side of a case: what its server was started with, and how it is migrated
EXTRA_ARGS = {
    "resnet_example": (
        "--renumber-devices",
        "--backend-config=npu_ge,ge.aicoreNum=12|10",
        "--backend-config=npu_ge,profiling=dynamic",
        "--backend-config=python,shm-default-byte-size=33554432",
    ),
    "tf_frozen": (
        "--backend-config=npu_ge,session.ge.exec.precision_mode_v2=fp16",
        "--backend-config",
        "npu_ge,device_ids=0,1",
    ),
}
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


def resnet_like() -> onnx.ModelProto:
    """The tensors of the ONNX model CANN's resnet example serves (resnet18-v1-7: ``data`` float [N, 3, 224,
    224] -> ``resnetv24_dense0_fwd`` float [N, 1000]), computing a pooled linear layer."""
    weights = numpy_helper.from_array(np.ones((3, 1000), dtype=np.float32), "w")
    axes = numpy_helper.from_array(np.array([2, 3], dtype=np.int64), "axes")
    graph = helper.make_graph(
        [
            helper.make_node("ReduceMean", ["data", "axes"], ["pooled"], keepdims=0),
            helper.make_node("MatMul", ["pooled", "w"], ["resnetv24_dense0_fwd"]),
        ],
        "resnet_like",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, ["N", 3, 224, 224])],
        [helper.make_tensor_value_info("resnetv24_dense0_fwd", TensorProto.FLOAT, ["N", 1000])],
        [weights, axes],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def frozen_graph(*, output_shapes: bool = True) -> bytes:
    """A TensorFlow frozen graph as tf.compat.v1 writes one: Placeholder ``input_1`` float [1, 224, 224, 3] ->
    Const weights, MatMul, Softmax ``predictions/Softmax`` [1, 1000] (its shape in ``_output_shapes`` when the
    exporter added shapes), plus a NoOp."""
    graph = tf_graph.message("GraphDef")()

    def node(name: str, op: str, inputs=(), dtype_attr: str = "T"):
        made = graph.node.add(name=name, op=op, input=list(inputs))
        made.attr[dtype_attr].type = 1  # DT_FLOAT
        return made

    placeholder = node("input_1", "Placeholder", dtype_attr="dtype")
    for size in (1, 224, 224, 3):
        placeholder.attr["shape"].shape.dim.add(size=size)
    node("dense/kernel", "Const", dtype_attr="dtype")
    node("dense/MatMul", "MatMul", ["input_1", "dense/kernel"])
    softmax = node("predictions/Softmax", "Softmax", ["dense/MatMul"])
    if output_shapes:
        shape = softmax.attr["_output_shapes"].list.shape.add()
        shape.dim.add(size=1)
        shape.dim.add(size=1000)
    graph.node.add(name="init", op="NoOp", input=["^dense/kernel"])
    return graph.SerializeToString()


def model_folders(directory: Path) -> Path:
    """The configs as model folders, with the model files the GE backend would have found in them."""
    for case in CASES:
        shutil.copytree(CONFIGS / case, directory / case)
    (directory / "resnet" / "resnet50.onnx").write_bytes(b"")  # only its name matters to migrate
    (directory / "yolo" / "yolo.pb").write_bytes(b"")
    (directory / "llama" / "1").mkdir()
    write_model(directory / "llama" / "1" / "model.onnx", tiny_llama())
    (directory / "resnet_example" / "1").mkdir()
    onnx.save(resnet_like(), directory / "resnet_example" / "1" / "resnet18-v1-7.onnx")
    (directory / "tf_frozen" / "1").mkdir()
    (directory / "tf_frozen" / "1" / "model.pb").write_bytes(frozen_graph())
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
        *EXTRA_ARGS.get(case, ()),
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
        if key in ("device_ids",) and case in EXTRA_ARGS:
            named = named or f"--backend-config=npu_ge,{key}:" in result.stderr
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
            ("TYPE_FP32\n    dims: [ 3", "TYPE_STRING\n    dims: [ 3"),
            "resnet/config.pbtxt:7: input 'image': TYPE_STRING: strings cannot go to an OM",
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


def test_a_bf16_tensor_is_carried_as_bf16_with_a_note_that_the_ge_backend_could_not_serve_it(workdir):
    config = workdir / "resnet" / "config.pbtxt"
    config.write_text(config.read_text().replace("TYPE_FP32\n    dims: [ 3", "TYPE_BF16\n    dims: [ 3"))

    result = migrate(workdir, "resnet")

    assert result.returncode == 0, result.stderr
    spec = yaml.safe_load((workdir / "specs" / "resnet.yaml").read_text())
    assert [t["dtype"] for t in spec["inputs"]] == ["bf16"]
    assert (
        "resnet/config.pbtxt:7: input[0].data_type: TYPE_BF16, which the GE backend's config parser maps to INVALID"
        in (result.stderr)
    )
    validated = ge_plugin("validate", "specs/resnet.yaml", cwd=workdir)
    assert validated.returncode == 0, validated.stderr


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


# --- what the GE backend reads from the model, from its launch, and a pod's device numbers -------------------


def test_io_the_config_omits_is_read_from_the_onnx_model_in_the_version_folder(migrated):
    workdir, result = migrated("resnet_example")
    spec = yaml.safe_load((workdir / "specs" / "resnet_example.yaml").read_text())

    assert result.returncode == 0, result.stderr
    assert spec["inputs"] == [{"name": "data", "dtype": "fp32", "dims": [3, 224, 224]}]
    assert spec["outputs"] == [{"name": "resnetv24_dense0_fwd", "dtype": "fp32", "dims": [1000]}]
    assert spec["model"]["source"] == "../resnet_example/1/resnet18-v1-7.onnx"
    assert (
        "resnet_example/config.pbtxt:1: input: not in the config: read from resnet18-v1-7.onnx as the GE backend "
        "does: data fp32 [3, 224, 224] (dim 0, the batch, dropped: max_batch_size 64)"
    ) in result.stderr


def test_io_of_a_tensorflow_frozen_graph_is_read_without_tensorflow(migrated):
    workdir, result = migrated("tf_frozen")
    spec = yaml.safe_load((workdir / "specs" / "tf_frozen.yaml").read_text())

    assert result.returncode == 0, result.stderr
    assert spec["inputs"] == [{"name": "input_1", "dtype": "fp32", "dims": [1, 224, 224, 3]}]
    assert spec["outputs"] == [{"name": "predictions/Softmax", "dtype": "fp32", "dims": [1, 1000]}]
    assert "batching" not in spec


def test_a_frozen_graph_without_output_shapes_asks_for_the_output_in_the_config(workdir):
    (workdir / "tf_frozen" / "1" / "model.pb").write_bytes(frozen_graph(output_shapes=False))

    result = migrate(workdir, "tf_frozen")

    assert result.returncode == 1
    assert (
        "1/model.pb: the graph does not record the shape (the exporter wrote no _output_shapes) of output "
        "'predictions/Softmax': list output (name, data_type, dims) in the config"
    ) in result.stderr


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (None, "the config lists no inputs and outputs and there is no model file to read them from"),
        (b"not a model", "resnet18-v1-7.onnx: not an ONNX model the GE backend could have read"),
    ],
)
def test_omitted_io_without_a_readable_model_file_exits_1_saying_what_to_add(workdir, model, message):
    path = workdir / "resnet_example" / "1" / "resnet18-v1-7.onnx"
    if model is None:
        path.unlink()
    else:
        path.write_bytes(model)

    result = migrate(workdir, "resnet_example")

    assert result.returncode == 1
    assert message in result.stderr
    assert not (workdir / "specs" / "resnet_example.yaml").exists()


def test_launch_settings_are_carried_like_parameters_or_noted(migrated):
    workdir, result = migrated("resnet_example")
    spec = yaml.safe_load((workdir / "specs" / "resnet_example.yaml").read_text())
    notes = result.stderr

    assert "--backend-config=npu_ge,ge.aicoreNum: 12|10: a GEInitialize (global) option" in notes
    assert "--backend-config=npu_ge,profiling: run the server under msprof" in notes
    assert (
        "--backend-config=python,shm-default-byte-size: a setting of backend 'python', not of the GE backend"
        in notes
    )
    assert spec["placement"]["devices"] == [0, 1]
    _, tf = migrated("tf_frozen")
    tf_spec = yaml.safe_load((migrated("tf_frozen")[0] / "specs" / "tf_frozen.yaml").read_text())
    assert tf_spec["precision"] == "fp16"  # session.ge.exec.precision_mode_v2 from the launch
    assert (
        "--backend-config=npu_ge,device_ids: 0,1: config.pbtxt sets it too (line 7); the spec takes the config's value '2'"
        in tf.stderr
    )


def test_gears_given_at_launch_make_the_same_spec_as_gears_in_the_config(workdir):
    config = workdir / "bert" / "config.pbtxt"
    lines = config.read_text().splitlines()
    launch = [
        f"--backend-config=npu_ge,{key}={value}"
        for line in lines
        for key, value in [_parameter(line)]
        if key in ("graph.ge.inputShape", "graph.ge.dynamicDims")
    ]
    config.write_text(
        "\n".join(line for line in lines if "ge.inputShape" not in line and "ge.dynamicDims" not in line)
        + "\n"
    )

    result = migrate(workdir, "bert", *launch)

    assert result.returncode == 0, result.stderr
    spec = yaml.safe_load((workdir / "specs" / "bert.yaml").read_text())
    golden = yaml.safe_load((GOLDEN / "bert.yaml").read_text())
    assert (spec["batching"]["gears"], spec["dims_gears"]) == (
        golden["batching"]["gears"],
        golden["dims_gears"],
    )
    assert (
        "--backend-config=npu_ge,graph.ge.inputShape: GE's online gear options become the spec's gears"
        in result.stderr
    )


def _parameter(line: str) -> tuple[str, str]:
    import re

    match = re.search(r'key:\s*"([^"]+)".*string_value:\s*"([^"]*)"', line)
    return (match.group(1), match.group(2)) if match else ("", "")


@pytest.mark.parametrize("value", ["npu_ge", "npu_ge,ge.aicoreNum", ",x=1"])
def test_a_malformed_backend_config_is_a_usage_error(workdir, value):
    result = migrate(workdir, "resnet", f"--backend-config={value}")

    assert result.returncode == 2
    assert "expected BACKEND,KEY=VALUE as tritonserver takes it" in result.stderr


def test_a_migrated_spec_with_host_device_ids_deploys_only_renumbered(workdir, tmp_path):
    kept = ge_plugin(
        "migrate", "bert/config.pbtxt", "--soc-version", "Ascend910B3", "-o", "specs/kept.yaml", cwd=workdir
    )
    renumbered = migrate(workdir, "resnet_example")
    assert kept.returncode == renumbered.returncode == 0
    assert "4,5: kept as the host's NPU ids; ge-plugin deploy k8s needs 0..N-1" in kept.stderr
    assert "4,5: renumbered 0, 1 (--renumber-devices)" in renumbered.stderr

    refused = ge_plugin("deploy", "k8s", "specs/kept.yaml", "-o", str(tmp_path / "a"), cwd=workdir)
    deployed = ge_plugin("deploy", "k8s", "specs/resnet_example.yaml", "-o", str(tmp_path / "b"), cwd=workdir)

    assert refused.returncode == 1 and "device 4, 5 would not exist" in refused.stderr
    assert deployed.returncode == 0, deployed.stderr
    deployment = yaml.safe_load((tmp_path / "b" / "deployment.yaml").read_text())
    limits = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["huawei.com/Ascend910"] == "2"
