"""``ge-plugin deploy k8s``: golden files, every object validated against Kubernetes' OpenAPI schemas, and
the pieces that must agree with the rest of ge-plugin (serve's flags, the readiness probe, the HPA metric)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from ge_plugin.cli import build_parser
from ge_plugin.deploy import K8sOptions, render_k8s
from ge_plugin.deploy import k8s as k8s_module
from ge_plugin.deploy.npu import npu_request, resource_for
from ge_plugin.errors import DeployError, SpecError
from ge_plugin.serve.triton import EXIT_TIMEOUT_S
from ge_plugin.spec import load_spec, load_specs

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

#: golden folder -> the command line that renders it (run from the checkout's root)
CASES = {
    "llama": ["specs/llama.yaml", "--service-monitor", "--kserve"],
    "pair": [
        "tests/deploy/specs/pair",
        "--name",
        "ge-pair",
        "--image",
        "registry.example/ge-plugin:0.1.0",
        "--max-replicas",
        "8",
        "--target-queue-ms",
        "5",
        "--models-claim",
        "ascend-models",
    ],
}
#: the oldest and the newest Kubernetes whose schemas kubernetes-validate ships
KUBERNETES_VERSIONS = ("1.25", "1.37")
#: custom resources: kubernetes-validate has no schema for them (their CRDs live in other projects)
CUSTOM_KINDS = {"ServiceMonitor", "ServingRuntime", "InferenceService"}


def deploy(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ge_plugin", "deploy", "k8s", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """``rendered(case)``: the folder ``ge-plugin deploy k8s`` rendered the case into, run once per module
    (the tests only read it)."""
    done: dict[str, Path] = {}

    def render(case: str) -> Path:
        if case not in done:
            out = tmp_path_factory.mktemp("deploy") / case
            result = deploy(*CASES[case], "-o", str(out))
            assert result.returncode == 0, result.stderr
            done[case] = out
        return done[case]

    return render


def objects(directory: Path) -> list[dict]:
    return [yaml.safe_load(path.read_text()) for path in sorted(directory.rglob("*.yaml"))]


def k8s_objects(directory: Path) -> list[dict]:
    """The files that are Kubernetes objects (the adapter's Helm values are not)."""
    return [obj for obj in objects(directory) if "apiVersion" in obj]


@pytest.mark.parametrize("case", CASES)
def test_deploy_k8s_writes_the_golden_files(rendered, case):
    out = rendered(case)

    golden = HERE / "golden" / case
    names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(golden).as_posix() for p in golden.rglob("*") if p.is_file())
    for name in names:
        assert (out / name).read_text() == (golden / name).read_text(), name


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("case", CASES)
def test_every_core_object_validates_strictly_against_the_kubernetes_schemas(rendered, case, version):
    validated = []
    for obj in k8s_objects(rendered(case)):
        if obj["kind"] in CUSTOM_KINDS:
            continue
        kubernetes_validate.validate(obj, version, strict=True)  # strict: an unknown field is an error
        validated.append(obj["kind"])

    assert sorted(validated) == ["Deployment", "HorizontalPodAutoscaler", "Service"]


def test_custom_resources_have_no_schema_in_kubernetes_validate_so_their_pod_parts_are_checked_as_a_pod(
    rendered,
):
    out = rendered("llama")
    by_kind = {obj["kind"]: obj for obj in k8s_objects(out)}
    for kind in CUSTOM_KINDS:
        with pytest.raises(kubernetes_validate.SchemaNotFoundError):
            kubernetes_validate.validate(by_kind[kind], "1.37", strict=True)

    runtime = by_kind["ServingRuntime"]["spec"]
    model = by_kind["InferenceService"]["spec"]["predictor"]["model"]
    # The runtime's containers and volumes are core types, and the model's resources merge into its container.
    container = {**runtime["containers"][0], "resources": model["resources"]}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "kserve-runtime-check"},
        "spec": {"containers": [container], "volumes": runtime["volumes"]},
    }
    for version in KUBERNETES_VERSIONS:
        kubernetes_validate.validate(pod, version, strict=True)
    monitor = by_kind["ServiceMonitor"]
    service = by_kind["Service"]
    assert monitor["spec"]["selector"]["matchLabels"] == service["metadata"]["labels"]
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    assert "metrics" in [p["name"] for p in service["spec"]["ports"]]


def test_strict_validation_catches_a_misspelt_field():
    # the check above can fail: an unknown field is an error in strict mode
    deployment = render_k8s([load_spec(ROOT / "specs" / "llama.yaml")], _options())["deployment.yaml"]
    deployment["spec"]["template"]["spec"]["terminationGracePeriod"] = 45

    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, "1.37", strict=True)


def test_deployment_runs_serve_with_flags_ge_plugin_serve_accepts_and_a_grace_period_beyond_its_exit_timeout():
    deployment = render_k8s([load_spec(ROOT / "specs" / "llama.yaml")], _options())["deployment.yaml"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    argv = container["args"]
    assert argv[0] == "ge-plugin"

    args = build_parser(["serve"]).parse_args(argv[1:])

    assert (str(args.repository), args.host, args.http_port, args.grpc_port, args.metrics_port) == (
        "/models",
        "0.0.0.0",
        8000,
        8001,
        8002,
    )
    assert "--" not in argv  # nothing passed around serve to tritonserver
    assert args.exit_timeout_secs == k8s_module.SERVE_EXIT_TIMEOUT_S == EXIT_TIMEOUT_S
    assert args.model_control_mode == "explicit"
    prestop = int(container["lifecycle"]["preStop"]["exec"]["command"][1])
    assert pod["terminationGracePeriodSeconds"] > prestop + k8s_module.SERVE_EXIT_TIMEOUT_S
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {
        "/models",
        "/dev/shm",
        "/tmp",
        "/usr/local/Ascend/driver",
    }
    assert str(args.work_dir).startswith("/tmp/")  # on the emptyDir, not the image's filesystem
    assert container["env"] == [{"name": "GE_PLUGIN_DEVICE", "value": "ascend"}]


def test_readiness_is_the_models_own_ready_endpoint():
    one = render_k8s([load_spec(ROOT / "specs" / "llama.yaml")], _options())["deployment.yaml"]
    two = render_k8s(load_specs([HERE / "specs" / "pair"]), _options())["deployment.yaml"]

    probe = one["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
    assert probe["httpGet"] == {"path": "/v2/models/llama_model/ready", "port": "http"}
    probe = two["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
    assert probe["exec"]["command"] == [
        "python3",
        "-m",
        "ge_plugin.deploy.ready",
        "--port",
        "8000",
        "classifier",
        "encoder",
    ]
    live = one["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]
    assert live["httpGet"]["path"] == "/v2/health/live"


def test_hpa_targets_the_metric_the_adapter_rule_serves_from_tritons_queue_counters():
    files = render_k8s([load_spec(ROOT / "specs" / "llama.yaml")], _options(target_queue_us=7000))
    (rule,) = files["prometheus-adapter/values.yaml"]["rules"]["custom"]
    (metric,) = files["hpa.yaml"]["spec"]["metrics"]

    assert metric["pods"]["metric"]["name"] == rule["name"]["as"] == "ge_plugin_queue_time_us"
    assert metric["pods"]["target"] == {"type": "AverageValue", "averageValue": "7000"}
    assert rule["seriesQuery"].startswith("nv_inference_queue_duration_us{")
    assert re.search(
        r"rate\(nv_inference_queue_duration_us\{.*\}\[1m\]\).*/.*rate\(nv_inference_request_success",
        rule["metricsQuery"],
    )
    assert "replicas" not in files["deployment.yaml"]["spec"]  # the HPA owns the count


@pytest.mark.parametrize(
    ("soc", "resource"),
    [
        ("Ascend910B3", "huawei.com/Ascend910"),
        ("Ascend910A", "huawei.com/Ascend910"),
        ("Ascend910_9391", "huawei.com/Ascend910"),
        ("Ascend310P3", "huawei.com/Ascend310P"),
        ("Ascend310B1", "huawei.com/Ascend310B"),
        ("Ascend310", "huawei.com/Ascend310"),
        ("Ascend610Lite", None),
    ],
)
def test_resource_for_soc_version(soc, resource):
    assert resource_for(soc) == resource


def test_npu_request_counts_the_devices_the_pods_models_share():
    request = npu_request(load_specs([HERE / "specs" / "pair"]))

    assert (request.resource, request.count) == ("huawei.com/Ascend910", 2)


def _spec(tmp_path: Path, name: str, *, soc: str = "Ascend910B3", devices: str = "[0]") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"name: {name}\n"
        "model:\n"
        f"  om: {name}.om\n"
        f"  source: {name}.onnx\n"
        f"  soc_version: {soc}\n"
        "inputs:\n"
        "  - {name: x, dtype: fp32, dims: [4]}\n"
        "outputs:\n"
        "  - {name: y, dtype: fp32, dims: [4]}\n"
        "placement:\n"
        f"  devices: {devices}\n"
    )
    return path


def test_npu_request_refuses_device_ids_a_pod_does_not_have_at_the_spec_line(tmp_path):
    path = _spec(tmp_path, "far", devices="[2, 3]")

    with pytest.raises(SpecError) as caught:
        npu_request([load_spec(path)])

    (problem,) = caught.value.problems
    assert problem.startswith(
        f"{path}:11: $.placement.devices: in a pod the device plugin's 2 NPUs are devices 0..1:"
    )
    assert "device 2, 3 would not exist" in problem


def test_npu_request_refuses_models_compiled_for_different_chips(tmp_path):
    first = _spec(tmp_path, "a")
    second = _spec(tmp_path, "b", soc="Ascend310P3")

    with pytest.raises(SpecError) as caught:
        npu_request(load_specs([first, second]))

    (problem,) = caught.value.problems
    assert problem.startswith(f"{second}:5: $.model.soc_version: one pod runs on one kind of NPU:")
    assert "Ascend910B3" in problem and "Ascend310P3" in problem


def test_npu_request_for_an_unknown_chip_asks_for_npu_resource_and_accepts_it(tmp_path):
    spec = load_spec(_spec(tmp_path, "lite", soc="Ascend610Lite"))

    with pytest.raises(
        SpecError,
        match=r"lite.yaml:5: \$.model.soc_version: no Ascend device plugin resource .* --npu-resource",
    ):
        npu_request([spec])
    assert npu_request([spec], "vendor.example/npu").resource == "vendor.example/npu"


def test_cli_reports_spec_problems_with_file_and_line_and_exits_1(tmp_path):
    first = _spec(tmp_path, "a")
    second = _spec(tmp_path, "b", soc="Ascend310P3")

    result = deploy(str(first), str(second), "-o", str(tmp_path / "out"))

    assert result.returncode == 1
    assert result.stderr.startswith(f"{second}:5: $.model.soc_version: one pod runs on one kind of NPU")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--name", "Llama_Model"], "a Kubernetes name here is a DNS label"),
        (["--min-replicas", "5", "--max-replicas", "2"], "--min-replicas 5 is more than --max-replicas 2"),
        (["--storage-uri", "s3://bucket/repo"], "--storage-uri needs --kserve"),
        (["--npu-resource", "Ascend910"], "an extended resource is DOMAIN/NAME"),
        (["--max-replicas", "0"], "must be >= 1, got 0"),
    ],
)
def test_cli_usage_errors_exit_2_and_name_the_option(tmp_path, args, message):
    result = deploy("specs/llama.yaml", "-o", str(tmp_path / "out"), *args)

    assert result.returncode == 2
    assert message in result.stderr
    assert not (tmp_path / "out").exists()


def test_cli_help_ends_with_examples():
    result = deploy("--help")

    assert result.returncode == 0
    assert "examples:\n  ge-plugin deploy k8s specs/llama.yaml -o deploy/llama" in result.stdout


def test_render_refuses_a_storage_uri_without_kserve():
    with pytest.raises(DeployError, match="needs --kserve"):
        render_k8s([load_spec(ROOT / "specs" / "llama.yaml")], _options(), storage_uri="s3://b/r")


def _options(**changes) -> K8sOptions:
    base = {"name": "llama-model", "image": "ge-plugin:0.1.0", "models_claim": "llama-model-models"}
    return K8sOptions(**{**base, **changes})


def test_deploy_doc_states_what_is_rendered():
    from ge_plugin.deploy.npu import DEVICE_PLUGIN_RESOURCES

    text = (ROOT / "docs" / "deploy.md").read_text()

    assert f"`--exit-timeout-secs {k8s_module.SERVE_EXIT_TIMEOUT_S}`" in text
    assert "`EXIT_TIMEOUT_S`" in text
    assert (
        f"{k8s_module.PRESTOP_SLEEP_S} + {k8s_module.SERVE_EXIT_TIMEOUT_S} + {k8s_module.TERMINATION_MARGIN_S} s "
        f"of margin = {k8s_module.TERMINATION_GRACE_S}"
    ) in text
    for _name, path, _kind in k8s_module.DRIVER_MOUNTS:
        assert f"`{path}`" in text
    for _pattern, resource in DEVICE_PLUGIN_RESOURCES:
        assert f"`{resource}`" in text
    assert f"`{k8s_module.QUEUE_METRIC}`" in text
