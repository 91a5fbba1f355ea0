"""``ge-plugin deploy k8s``: golden files, every object validated against Kubernetes' OpenAPI schemas, and
the pieces that must agree with the rest of ge-plugin (serve's flags, the readiness probe, the HPA metric)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import schema_contents
from referencing import Registry, Resource

from ge_plugin.cli import build_parser
from ge_plugin.deploy import k8s as k8s_module
from ge_plugin.deploy.npu import npu_request, resource_for
from ge_plugin.deploy.render import MANIFEST, K8sOptions, render_k8s
from ge_plugin.errors import DeployError, SpecError
from ge_plugin.serve.triton import EXIT_TIMEOUT_S
from ge_plugin.spec import load_spec, load_specs

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SCHEMAS = HERE / "schemas"

#: golden folder -> the command line that renders it (run from the checkout's root)
CASES = {
    "llama": [
        "specs/llama.yaml",
        "--service-monitor",
        "--prometheus-release",
        "kube-prometheus-stack",
        "--kserve",
        "--headless-service",
    ],
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
        "--namespace",
        "inference",
        "--label",
        "team=search",
        "--label",
        "example.com/cost-center=ml-42",
        "--cpu",
        "8",
        "--cpu-limit",
        "16",
        "--memory",
        "32Gi",
        "--shm-size",
        "4Gi",
        "--node-selector",
        "accelerator=huawei-Ascend910",
        "--toleration",
        "huawei.com/Ascend910:NoSchedule",
        "--toleration",
        "dedicated=inference",
        "--image-pull-secret",
        "registry-credentials",
        "--prometheus-url",
        "https://prometheus.monitoring.svc/prom",
        "--kserve",
    ],
    "hostpath": [
        "specs/llama.yaml",
        "--driver",
        "hostpath",
        "--npu-smi",
        "/usr/local/sbin/npu-smi",
        "--run-as",
        "1001:1001",
        "--runtime-class",
        "ascend",
    ],
}
#: the oldest and the newest Kubernetes whose schemas kubernetes-validate ships
KUBERNETES_VERSIONS = ("1.25", "1.37")
#: custom resources: validated against the schemas in tests/deploy/schemas (kubernetes-validate has none)
CRD_SCHEMAS = {
    "ServiceMonitor": "servicemonitor-monitoring-v1.json",
    "ServingRuntime": "servingruntime-serving-v1alpha1.json",
    "InferenceService": "inferenceservice-serving-v1beta1.json",
}
CORE_KINDS = {"Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget", "NetworkPolicy"}


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
        if obj["kind"] in CRD_SCHEMAS or obj["kind"] == "Kustomization":
            continue
        kubernetes_validate.validate(obj, version, strict=True)  # strict: an unknown field is an error
        validated.append(obj["kind"])

    assert set(validated) == CORE_KINDS


def crd_validator(kind: str) -> jsonschema.Draft202012Validator:
    """The vendored schema of a custom resource, its references to core types resolved to Kubernetes 1.37's
    strict schemas (as kubernetes-validate resolves its own)."""
    schema = json.loads((SCHEMAS / CRD_SCHEMAS[kind]).read_text())
    definitions = schema_contents("kubernetes-json-schema/v1.37.0-local-strict/_definitions.json", "1.37.0")
    registry = Resource.from_contents(definitions) @ Registry()
    return jsonschema.Draft202012Validator(schema, registry=registry)


@pytest.mark.parametrize("case", CASES)
def test_every_custom_resource_validates_against_its_crd_schema(rendered, case):
    validated = []
    for obj in k8s_objects(rendered(case)):
        if obj["kind"] in CRD_SCHEMAS:
            errors = [
                f"{list(e.absolute_path)}: {e.message}" for e in crd_validator(obj["kind"]).iter_errors(obj)
            ]
            assert errors == [], obj["kind"]
            validated.append(obj["kind"])

    expected = {"llama": set(CRD_SCHEMAS), "pair": {"ServingRuntime", "InferenceService"}, "hostpath": set()}
    assert set(validated) == expected[case]


@pytest.mark.parametrize(
    ("kind", "path", "field"),
    [
        ("ServiceMonitor", ["spec", "endpoints", 0], "intervall"),
        ("ServingRuntime", ["spec", "containers", 0], "readinessProbes"),
        ("ServingRuntime", ["spec"], "securityContext"),  # a pod field ServingRuntimePodSpec does not have
        ("InferenceService", ["spec", "predictor"], "minReplica"),
        ("InferenceService", ["spec", "predictor", "model"], "storageURI"),
    ],
)
def test_crd_schemas_reject_an_unknown_field(rendered, kind, path, field):
    (obj,) = [o for o in k8s_objects(rendered("llama")) if o["kind"] == kind]
    target = obj
    for step in path:
        target = target[step]
    target[field] = target.get(field, 1)

    errors = list(crd_validator(kind).iter_errors(obj))

    assert [e.validator for e in errors] == ["additionalProperties"]
    assert repr(field) in errors[0].message


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
    assert args.load_model == ["*"]  # explicit mode alone loads nothing (tritonserver's meaning): every model
    prestop = int(container["lifecycle"]["preStop"]["exec"]["command"][1])
    assert pod["terminationGracePeriodSeconds"] > prestop + k8s_module.SERVE_EXIT_TIMEOUT_S
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/models", "/dev/shm", "/tmp"}
    assert str(args.work_dir).startswith("/tmp/")  # on the emptyDir, not the image's read-only filesystem
    assert container["env"] == [
        {"name": "GE_PLUGIN_DEVICE", "value": "ascend"},
        {"name": "HOME", "value": "/tmp"},
        {"name": "ASCEND_SLOG_PRINT_TO_STDOUT", "value": "1"},
        {"name": "ASCEND_LOG_PRINT_TO_STDOUT", "value": "1"},
        {"name": "ASCEND_PROCESS_LOG_PATH", "value": "/tmp/ascend-log"},
    ]


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
        (
            ["--min-replicas", "5", "--max-replicas", "2"],
            "replicas: the minimum (5) must be at least 1 and at most the maximum (2)",
        ),
        (
            ["--storage-uri", "s3://bucket/repo"],
            "the storage URI is where KServe fetches the repository from: it needs KServe",
        ),
        (["--npu-resource", "Ascend910"], "an extended resource is DOMAIN/NAME"),
        (["--max-replicas", "0"], "must be >= 1, got 0"),
        (
            ["--label", "app.kubernetes.io/instance=x"],
            "label app.kubernetes.io/instance: ge-plugin sets it",
        ),
        (["--label", "team"], "expected KEY=VALUE for a label, got 'team'"),
        (["--label", "team=a b"], "a label value is at most 63 letters"),
        (["--node-selector", "bad_=x"], "a label key is [PREFIX/]NAME"),
        (["--toleration", "dedicated=x:NoRun"], "a toleration's effect is one of NoSchedule"),
        (["--memory", "2Gi", "--shm-size", "2Gi"], "memory (2Gi) must exceed /dev/shm (2Gi)"),
        (["--memory", "lots"], "expected a Kubernetes quantity such as 500m, 4, 16Gi, got 'lots'"),
        (["--cpu", "8", "--cpu-limit", "4"], "the CPU limit (4) is below the CPU request (8)"),
        (["--run-as", "0:0"], "non-root user: UID and GID >= 1"),
        (["--namespace", "Inference"], "a namespace is a DNS label"),
        (
            ["--npu-smi", "/usr/local/sbin/npu-smi"],
            "npu-smi is mounted from the host only in hostpath driver mode",
        ),
        (["--driver", "hostpath", "--npu-smi", "npu-smi"], "npu-smi's path on the hosts must be absolute"),
        (["--driver", "privileged"], "argument --driver: invalid choice: 'privileged'"),
        (
            ["--prometheus-release", "kps"],
            "the Prometheus release label is the ServiceMonitor's: it needs the ServiceMonitor",
        ),
        (["--prometheus-url", "prometheus:9090"], "expected Prometheus' URL as http(s)://HOST[:PORT][/PATH]"),
        (["--image-pull-secret", "Registry"], "a Kubernetes name here is a DNS label"),
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


def test_options_refuse_a_storage_uri_without_kserve_in_the_domains_words():
    with pytest.raises(ValueError, match="it needs KServe") as caught:
        _options(storage_uri="s3://b/r")
    assert "--" not in str(caught.value)  # the domain names no flag: the CLI shows its message as it is


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
    for flag in (
        "--namespace",
        "--label",
        "--cpu",
        "--memory",
        "--run-as",
        "--driver",
        "--npu-smi",
        "--node-selector",
        "--toleration",
        "--image-pull-secret",
        "--headless-service",
        "--prometheus-release",
        "--prometheus-url",
        "--shm-size",
        "--tmp-size",
        "--models-claim",
        "--models-access-mode",
        "--models-image",
        "--models-size",
        "--models-uri",
        "--models-secret",
        "--admin-key-secret",
        "--allow-namespace",
        "--monitoring-namespace",
        "--no-network-policy",
        "--scheduler-name",
        "--simulator",
    ):
        assert f"`{flag}" in text, flag
    for _pattern, resource in DEVICE_PLUGIN_RESOURCES:
        assert f"`{resource}`" in text
    assert f"`{k8s_module.QUEUE_METRIC}`" in text


# --- Pod Security Standards: the checks of "baseline" and "restricted" that a pod spec can fail -----------

#: capabilities "baseline" allows a container to add
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP",
    "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}  # fmt: skip
#: volume types "restricted" allows
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret",
}  # fmt: skip


def baseline_violations(pod: dict) -> list[str]:
    """Pod Security "baseline" (kubernetes.io/docs/concepts/security/pod-security-standards): one line per
    rule the pod spec breaks."""
    found = [f"spec.{field}" for field in ("hostNetwork", "hostPID", "hostIPC") if pod.get(field)]
    found += [f"volume {v['name']}: hostPath" for v in pod.get("volumes", []) if "hostPath" in v]
    for container in pod["containers"]:
        context = container.get("securityContext", {})
        if context.get("privileged"):
            found.append(f"{container['name']}: privileged")
        added = set(context.get("capabilities", {}).get("add", [])) - BASELINE_CAPABILITIES
        found += [f"{container['name']}: adds capability {cap}" for cap in sorted(added)]
        found += [
            f"{container['name']}: hostPort" for port in container.get("ports", []) if port.get("hostPort")
        ]
        if context.get("seccompProfile", {}).get("type") == "Unconfined":
            found.append(f"{container['name']}: seccomp Unconfined")
    if pod.get("securityContext", {}).get("seccompProfile", {}).get("type") == "Unconfined":
        found.append("pod: seccomp Unconfined")
    return found


def restricted_violations(pod: dict) -> list[str]:
    """Pod Security "restricted": baseline, and the hardening rules on top."""
    found = baseline_violations(pod)
    pod_context = pod.get("securityContext", {})
    for volume in pod.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            found.append(f"volume {volume['name']}: {', '.join(sorted(kinds))}")
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        context, name = container.get("securityContext", {}), container["name"]
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation not false")
        if not context.get("runAsNonRoot", pod_context.get("runAsNonRoot")):
            found.append(f"{name}: runAsNonRoot not true")
        if context.get("runAsUser", pod_context.get("runAsUser")) == 0:
            found.append(f"{name}: runAsUser 0")
        seccomp = context.get("seccompProfile", pod_context.get("seccompProfile", {})).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccomp {seccomp}")
        capabilities = context.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []) or set(capabilities.get("add", [])) - {
            "NET_BIND_SERVICE"
        }:
            found.append(f"{name}: capabilities not dropped")
    return found


def kserve_pod(directory: Path) -> dict:
    """The pod KServe makes of the runtime and the InferenceService's predictor: the runtime's containers
    and volumes, the predictor's pod fields."""
    by_kind = {obj["kind"]: obj for obj in k8s_objects(directory)}
    runtime, predictor = by_kind["ServingRuntime"]["spec"], by_kind["InferenceService"]["spec"]["predictor"]
    pod_fields = {k: v for k, v in predictor.items() if k not in ("model", "minReplicas", "maxReplicas")}
    return {**pod_fields, "containers": runtime["containers"], "volumes": runtime.get("volumes", [])}


def deployment_pod(directory: Path) -> dict:
    (deployment,) = [obj for obj in k8s_objects(directory) if obj["kind"] == "Deployment"]
    return deployment["spec"]["template"]["spec"]


def test_pod_security_checks_here_catch_what_each_level_forbids():
    pod = {"containers": [{"name": "c", "securityContext": {"privileged": True}}], "hostNetwork": True}
    assert baseline_violations(pod) == ["spec.hostNetwork", "c: privileged"]
    assert "c: allowPrivilegeEscalation not false" in restricted_violations({"containers": [{"name": "c"}]})


@pytest.mark.parametrize("case", ["llama", "pair"])
def test_runtime_mode_pods_pass_pod_security_restricted_and_so_baseline(rendered, case):
    out = rendered(case)

    assert restricted_violations(deployment_pod(out)) == []
    assert restricted_violations(kserve_pod(out)) == []


def test_hostpath_mode_mounts_the_driver_and_fails_baseline_as_docs_say(rendered):
    pod = deployment_pod(rendered("hostpath"))

    assert baseline_violations(pod) == [
        "volume ascend-driver: hostPath",
        "volume ascend-install-info: hostPath",
        "volume ascend-dcmi: hostPath",
        "volume npu-smi: hostPath",
    ]
    volumes = {v["name"]: v["hostPath"] for v in pod["volumes"] if "hostPath" in v}
    assert volumes["npu-smi"] == {
        "path": "/usr/local/sbin/npu-smi",
        "type": "File",
    }  # the path the operator named
    assert volumes["ascend-driver"] == {"path": "/usr/local/Ascend/driver", "type": "Directory"}
    assert pod["runtimeClassName"] == "ascend"
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (1001, 1001)
    text = (ROOT / "docs" / "deploy.md").read_text()
    assert "`--driver hostpath`" in text and "pod-security.kubernetes.io/enforce: privileged" in text


def test_no_host_mounts_without_hostpath_mode_and_npu_smi_only_where_the_operator_says(rendered):
    for case in ("llama", "pair"):
        for pod in (deployment_pod(rendered(case)), kserve_pod(rendered(case))):
            assert [v for v in pod.get("volumes", []) if "hostPath" in v] == []


@pytest.mark.parametrize("case", CASES)
def test_serving_containers_are_guaranteed_qos_non_root_read_only_with_writable_tmp_and_shm(rendered, case):
    out = rendered(case)
    for pod in [deployment_pod(out)] + ([kserve_pod(out)] if case != "hostpath" else []):
        (container,) = pod["containers"]
        requests, limits = container["resources"]["requests"], container["resources"]["limits"]
        assert {"cpu", "memory"} <= set(requests)
        assert requests["memory"] == limits["memory"]
        assert [r for r in requests if r.startswith("huawei.com/")] == [
            r for r in limits if r.startswith("huawei.com/")
        ]
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] and context["allowPrivilegeEscalation"] is False
        assert pod["securityContext"]["runAsNonRoot"] and pod["automountServiceAccountToken"] is False
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes[mounts["/tmp"]] == {"name": "work", "emptyDir": {"sizeLimit": "4Gi"}}
        assert limits["ephemeral-storage"] == "4Gi"  # what the kubelet evicts on, and the scheduler counts
        assert volumes[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"
        shm = k8s_module.quantity(volumes[mounts["/dev/shm"]]["emptyDir"]["sizeLimit"])
        assert k8s_module.quantity(limits["memory"]) > shm  # the shm emptyDir counts against the limit


def test_pair_carries_every_pod_knob_from_the_command_line(rendered):
    out = rendered("pair")
    objects_ = k8s_objects(out)
    pod = deployment_pod(out)
    (container,) = pod["containers"]

    assert {
        obj.get("metadata", {}).get("namespace") for obj in objects_ if obj["kind"] != "Kustomization"
    } == {"inference"}
    for obj in objects_:
        if obj["kind"] != "Kustomization":
            assert obj["metadata"]["labels"]["team"] == "search", obj["kind"]
            assert obj["metadata"]["labels"]["example.com/cost-center"] == "ml-42"
    (deployment,) = [obj for obj in objects_ if obj["kind"] == "Deployment"]
    assert "team" in deployment["spec"]["template"]["metadata"]["labels"]
    assert "team" not in deployment["spec"]["selector"]["matchLabels"]  # a selector never changes
    assert container["resources"] == {
        "requests": {"cpu": "8", "memory": "32Gi", "ephemeral-storage": "4Gi", "huawei.com/Ascend910": "2"},
        "limits": {"cpu": "16", "memory": "32Gi", "ephemeral-storage": "4Gi", "huawei.com/Ascend910": "2"},
    }
    assert pod["nodeSelector"] == {"accelerator": "huawei-Ascend910"}
    assert pod["tolerations"] == [
        {"key": "huawei.com/Ascend910", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "inference"},
    ]
    assert pod["imagePullSecrets"] == [{"name": "registry-credentials"}]
    predictor = kserve_pod(out)
    assert (predictor["nodeSelector"], predictor["tolerations"]) == (pod["nodeSelector"], pod["tolerations"])


@pytest.mark.parametrize("case", CASES)
def test_rollouts_never_surge_and_drains_take_one_pod_at_a_time(rendered, case):
    by_kind = {obj["kind"]: obj for obj in k8s_objects(rendered(case))}

    assert by_kind["Deployment"]["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
    }
    pdb = by_kind["PodDisruptionBudget"]["spec"]
    assert pdb == {"maxUnavailable": 1, "selector": by_kind["Deployment"]["spec"]["selector"]}
    if "InferenceService" in by_kind:
        strategy = by_kind["InferenceService"]["spec"]["predictor"]["deploymentStrategy"]
        assert strategy["rollingUpdate"]["maxSurge"] == 0


def test_headless_service_selects_the_pods_with_no_cluster_ip_for_grpc_client_balancing(rendered):
    services = {
        obj["metadata"]["name"]: obj for obj in k8s_objects(rendered("llama")) if obj["kind"] == "Service"
    }

    headless = services["llama-model-headless"]["spec"]
    assert headless["clusterIP"] == "None"
    assert headless["selector"] == services["llama-model"]["spec"]["selector"]
    assert [p["name"] for p in headless["ports"]] == ["grpc", "http"]
    assert "service-headless.yaml" not in (rendered("pair") / "kustomization.yaml").read_text()


def test_service_monitor_carries_the_release_label_kube_prometheus_stack_selects(rendered):
    (monitor,) = [obj for obj in k8s_objects(rendered("llama")) if obj["kind"] == "ServiceMonitor"]

    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["selector"]["matchLabels"] == k8s_module.selector_labels(_options())
    # the node, for joining physical_id with npu-exporter's id (issue 32)
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["relabelings"] == [
        {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}
    ]


@pytest.mark.parametrize(
    ("case", "prometheus"),
    [
        ("llama", {"url": "http://prometheus-operated.monitoring.svc", "port": 9090, "path": ""}),
        ("pair", {"url": "https://prometheus.monitoring.svc", "port": 443, "path": "/prom"}),
    ],
)
def test_adapter_values_say_where_prometheus_is_in_the_charts_fields(rendered, case, prometheus):
    values = yaml.safe_load((rendered(case) / "prometheus-adapter" / "values.yaml").read_text())

    assert values["prometheus"] == prometheus


def test_kserve_runtime_has_probes_cpu_memory_and_both_ports(rendered):
    by_kind = {obj["kind"]: obj for obj in k8s_objects(rendered("llama"))}
    (container,) = by_kind["ServingRuntime"]["spec"]["containers"]

    assert [(p["name"], p["containerPort"]) for p in container["ports"]] == [
        ("http", 8080),
        ("grpc", 9000),
        ("metrics", 8002),
    ]
    assert container["readinessProbe"]["httpGet"] == {"path": "/v2/models/llama_model/ready", "port": "http"}
    assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert container["startupProbe"]["failureThreshold"] == k8s_module.STARTUP_FAILURES
    args = build_parser(["serve"]).parse_args(container["args"][1:])
    assert (args.http_port, args.grpc_port) == (8080, 9000)
    assert {"cpu", "memory", "huawei.com/Ascend910"} <= set(container["resources"]["limits"])
    annotations = by_kind["InferenceService"]["metadata"]["annotations"]
    assert annotations == {
        "serving.kserve.io/deploymentMode": "RawDeployment",  # serverless routes one port
        "serving.kserve.io/autoscalerClass": "external",  # the rendered HPA scales it, on queue time, not CPU
    }


def test_kustomize_base_lists_exactly_the_core_objects(rendered):
    out = rendered("llama")
    listed = yaml.safe_load((out / "kustomization.yaml").read_text())["resources"]

    assert sorted(listed) == sorted(
        p.name for p in out.glob("*.yaml") if p.name != "kustomization.yaml"
    )  # the top folder: every object file, and only those


@pytest.mark.parametrize("case", CASES)
def test_kubectl_kustomize_renders_the_base_into_the_same_objects(rendered, case, tmp_path):
    """``make setup`` installs Debian's kubernetes-client where no kubectl is on PATH (its kustomize 2.0.3
    renders this base as kustomize 5 does)."""
    assert shutil.which("kubectl"), "no kubectl on PATH: make setup (scripts/system-deps.sh) installs one"
    out = rendered(case)

    result = subprocess.run(
        ["kubectl", "kustomize", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},  # kubectl may cache under HOME
    )

    assert result.returncode == 0, result.stderr
    built = sorted((o["kind"], o["metadata"]["name"]) for o in yaml.safe_load_all(result.stdout))
    listed = yaml.safe_load((out / "kustomization.yaml").read_text())["resources"]
    files = sorted(
        (o["kind"], o["metadata"]["name"]) for o in (yaml.safe_load((out / f).read_text()) for f in listed)
    )
    assert built == files


# --- re-rendering ------------------------------------------------------------------------------------------


def test_rerender_removes_the_stale_files_of_the_previous_render_and_nothing_else(tmp_path):
    out = tmp_path / "out"
    first = deploy("specs/llama.yaml", "-o", str(out), "--service-monitor", "--kserve")
    assert first.returncode == 0, first.stderr
    mine = out / "my-networkpolicy.yaml"
    mine.write_text("kind: NetworkPolicy\n")
    (out / "kserve" / "notes.txt").write_text("ours\n")

    second = deploy("specs/llama.yaml", "-o", str(out))

    assert second.returncode == 0, second.stderr
    assert not (out / "servicemonitor.yaml").exists()  # `kubectl apply -f DIR` would still apply it
    assert not (out / "kserve" / "servingruntime.yaml").exists()
    assert not (out / "kserve" / "inferenceservice.yaml").exists()
    assert mine.read_text() == "kind: NetworkPolicy\n"  # never a file the render did not write
    assert (out / "kserve" / "notes.txt").read_text() == "ours\n"  # and so its folder stays
    assert f"removed {out / 'servicemonitor.yaml'} (rendered before, not by this render)" in second.stdout
    assert "servicemonitor.yaml" not in (out / "kustomization.yaml").read_text()


def test_rerender_keeps_a_stale_file_the_operator_edited_and_says_so(tmp_path):
    out = tmp_path / "out"
    assert deploy("specs/llama.yaml", "-o", str(out), "--service-monitor").returncode == 0
    monitor = out / "servicemonitor.yaml"
    monitor.write_text(monitor.read_text() + "# tuned by hand\n")

    second = deploy("specs/llama.yaml", "-o", str(out))
    third = deploy("specs/llama.yaml", "-o", str(out))

    assert monitor.read_text().endswith("# tuned by hand\n")
    assert f"kept {monitor}: rendered before and not by this render, but changed since" in second.stdout
    assert f"kept {monitor}:" in third.stdout  # still tracked, still reported
    assert json.loads((out / MANIFEST).read_text())["files"].keys() >= {
        "deployment.yaml",
        "servicemonitor.yaml",
    }


def test_options_refuse_a_prometheus_release_without_a_service_monitor():
    with pytest.raises(ValueError, match="it needs the ServiceMonitor"):
        _options(prometheus_release="kps")


# --- round 3: where the models come from, access, sizing, the simulator ------------------------------------

LLAMA = ROOT / "specs" / "llama.yaml"


def _render(specs=None, **changes) -> dict:
    return render_k8s(specs or [load_spec(LLAMA)], _options(**changes))


def _pod(files: dict) -> dict:
    return files["deployment.yaml"]["spec"]["template"]["spec"]


def test_shm_is_sized_from_the_specs_largest_execute_times_streams_and_instances():
    from ge_plugin.deploy import sizing

    llama = load_spec(LLAMA)
    # 8 rows x 128 tokens of fp32 logits over 32000 ids, plus the int64 ids: the largest gear's execute
    assert sizing.execute_bytes(llama) == 8 * 128 * 32000 * 4 + 8 * 128 * 8
    volumes = {v["name"]: v for v in _pod(_render())["volumes"]}
    shm = k8s_module.quantity(volumes["dshm"]["emptyDir"]["sizeLimit"])
    # two streams of one instance, each with a batch in flight, fit with room to spare
    assert 2 * sizing.execute_bytes(llama) < shm <= 2 * 2 * sizing.execute_bytes(llama) + (256 << 20)
    explicit = {v["name"]: v for v in _pod(_render(shm_size="3Gi"))["volumes"]}
    assert explicit["dshm"]["emptyDir"]["sizeLimit"] == "3Gi"


def test_shm_sized_from_the_specs_must_still_fit_under_the_memory_limit():
    with pytest.raises(
        DeployError, match=r"memory \(512Mi\) must exceed /dev/shm \(512Mi\).*sized from the specs"
    ):
        _render(memory="512Mi")


@pytest.mark.parametrize("mode", ["ReadWriteOnce", "ReadWriteOncePod"])
def test_a_single_node_claim_with_replicas_spread_over_nodes_is_refused(mode):
    with pytest.raises(ValueError, match=f"a {mode} claim attaches to one node.*second would never start"):
        _options(models_access_mode=mode, max_replicas=2)
    # one replica (maxSurge 0 replaces it in place) is fine
    assert _options(models_access_mode=mode, min_replicas=1, max_replicas=1).max_replicas == 1


def test_cli_refuses_a_read_write_once_claim_with_several_replicas(tmp_path):
    result = deploy("specs/llama.yaml", "-o", str(tmp_path / "out"), "--models-access-mode", "ReadWriteOnce")

    assert result.returncode == 2
    assert "Multi-Attach" in result.stderr and "ReadOnlyMany or ReadWriteMany" in result.stderr


def test_models_image_fills_an_empty_dir_before_the_server_starts_with_no_claim(tmp_path):
    files = _render(models_claim=None, models_image="registry.example/llama-models:1")
    pod = _pod(files)

    (init,) = pod["initContainers"]
    assert init["image"] == "registry.example/llama-models:1"
    assert init["command"] == ["cp", "-R", "/model_repository/.", "/models/"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "persistentVolumeClaim" not in volumes["models"] and volumes["models"]["emptyDir"]["sizeLimit"]
    (server,) = pod["containers"]
    assert {"name": "models", "mountPath": "/models", "readOnly": True} in server["volumeMounts"]
    assert restricted_violations(pod) == []  # the init container is as locked down as the server
    for version in KUBERNETES_VERSIONS:
        kubernetes_validate.validate(files["deployment.yaml"], version, strict=True)
    assert "COPY model_repository /model_repository" in files["models.Dockerfile"]
    with pytest.raises(ValueError, match="comes from one place"):
        _options(models_image="registry.example/llama-models:1")


def test_admin_key_secret_is_mounted_read_only_and_given_to_serve_as_a_file():
    files = _render(admin_key_secret="llama-admin-key")
    pod = _pod(files)
    (container,) = pod["containers"]

    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["admin-key"]["secret"]["secretName"] == "llama-admin-key"
    assert volumes["admin-key"]["secret"]["items"] == [{"key": "admin-key", "path": "admin-key"}]
    assert {"name": "admin-key", "mountPath": "/etc/ge-plugin/admin-key", "readOnly": True} in container[
        "volumeMounts"
    ]
    args = build_parser(["serve"]).parse_args(container["args"][1:])
    assert str(args.admin_key_file) == "/etc/ge-plugin/admin-key/admin-key"
    assert "llama-admin-key" not in " ".join(container["args"])  # the key itself is never on a command line
    assert restricted_violations(pod) == []  # a secret volume is allowed by "restricted"
    # without the Secret, the control plane is closed to every client: nothing is mounted, no key is given
    (plain,) = _pod(_render())["containers"]
    assert "--admin-key-file" not in plain["args"]


def test_network_policy_lets_inference_clients_and_prometheus_in_and_nothing_else():
    policy = _render(allow_namespaces=("apps", "batch"), monitoring_namespace="observability")[
        "networkpolicy.yaml"
    ]
    for version in KUBERNETES_VERSIONS:
        kubernetes_validate.validate(policy, version, strict=True)

    assert policy["spec"]["podSelector"]["matchLabels"] == k8s_module.selector_labels(_options())
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    inference, metrics = policy["spec"]["ingress"]
    assert [p["port"] for p in inference["ports"]] == ["http", "grpc"]
    assert [
        f["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] for f in inference["from"]
    ] == [
        "apps",
        "batch",
    ]
    assert [p["port"] for p in metrics["ports"]] == ["metrics"]
    assert metrics["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}}
    ]
    # by default only the pods' own namespace reaches inference
    (default_inference, _metrics) = _render()["networkpolicy.yaml"]["spec"]["ingress"]
    assert default_inference["from"] == [{"podSelector": {}}]
    assert "networkpolicy.yaml" not in _render(network_policy=False)


def test_kserve_is_scaled_by_the_rendered_hpa_on_queue_time_with_a_pdb(rendered):
    out = rendered("llama")
    by_file = {p.relative_to(out).as_posix(): yaml.safe_load(p.read_text()) for p in out.rglob("*.yaml")}
    service = by_file["kserve/inferenceservice.yaml"]
    hpa, pdb = by_file["kserve/hpa.yaml"], by_file["kserve/pdb.yaml"]

    assert service["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "external"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": f"{service['metadata']['name']}-predictor",
    }
    assert hpa["spec"]["metrics"] == by_file["hpa.yaml"]["spec"]["metrics"]  # the same queue-time metric
    assert pdb["spec"]["selector"]["matchLabels"] == {
        "serving.kserve.io/inferenceservice": service["metadata"]["name"]
    }
    for version in KUBERNETES_VERSIONS:
        kubernetes_validate.validate(hpa, version, strict=True)
        kubernetes_validate.validate(pdb, version, strict=True)


def test_rollout_deadline_outlasts_an_image_pull_and_the_startup_window():
    deployment = _render()["deployment.yaml"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    startup = container["startupProbe"]["periodSeconds"] * container["startupProbe"]["failureThreshold"]

    assert deployment["spec"]["progressDeadlineSeconds"] >= startup + 600


def test_scheduler_name_and_cann_logs_to_stdout():
    pod = _pod(_render(scheduler_name="volcano"))
    (container,) = pod["containers"]

    assert pod["schedulerName"] == "volcano"
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["ASCEND_SLOG_PRINT_TO_STDOUT"] == env["ASCEND_LOG_PRINT_TO_STDOUT"] == "1"
    assert env["ASCEND_PROCESS_LOG_PATH"].startswith("/tmp/")  # on the bounded emptyDir
    assert "schedulerName" not in _pod(_render())


def test_simulator_render_asks_for_no_npu_and_serves_on_the_simulator():
    files = _render(simulator=True)
    pod = _pod(files)
    (container,) = pod["containers"]

    assert not [r for r in container["resources"]["limits"] if r.startswith("huawei.com/")]
    assert {e["name"]: e["value"] for e in container["env"]}["GE_PLUGIN_DEVICE"] == "sim"
    assert [v for v in pod["volumes"] if "hostPath" in v] == []
    assert restricted_violations(pod) == []
    with pytest.raises(ValueError, match="the simulator needs no CANN driver"):
        _options(simulator=True, driver="hostpath")


def test_readiness_probe_imports_no_more_than_a_plain_script():
    # the probe runs every 5 s in every pod: it must not import the renderer (specs, numpy, YAML) on the way
    code = (
        "import sys, runpy; sys.argv = ['ready', '--port', '1', '--timeout', '0.1', 'm']\n"
        "try:\n    runpy.run_module('ge_plugin.deploy.ready', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'yaml', 'attrs', 'cattrs', 'onnx')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)

    assert result.stdout.strip() == "[]", result.stdout + result.stderr
    assert "m: http://127.0.0.1:1/v2/models/m/ready" in result.stderr  # and it still probed


def test_an_object_store_repository_is_read_by_the_server_with_credentials_from_a_secret():
    files = _render(
        models_claim=None, models_uri="s3://models/model_repository", models_secret="s3-credentials"
    )
    pod = _pod(files)
    (container,) = pod["containers"]

    args = build_parser(["serve"]).parse_args(container["args"][1:])
    assert args.repository == "s3://models/model_repository"  # as written: tritonserver reads it
    assert container["envFrom"] == [{"secretRef": {"name": "s3-credentials"}}]
    assert "/models" not in {m["mountPath"] for m in container["volumeMounts"]}
    for version in KUBERNETES_VERSIONS:
        kubernetes_validate.validate(files["deployment.yaml"], version, strict=True)
    with pytest.raises(ValueError, match="comes from one place"):
        _options(models_uri="s3://models/model_repository")  # and the default claim
    with pytest.raises(ValueError, match="s3://, gs:// or as://"):
        _options(models_claim=None, models_uri="http://models/model_repository")
