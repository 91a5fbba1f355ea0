"""Specs -> the Kubernetes objects that run ``ge-plugin serve`` on an Ascend fleet, as plain dicts.

One Deployment serves every model of the specs it is rendered from, like one ``ge-plugin serve`` serves a
repository: its pods ask the Ascend device plugin for the NPUs the specs place models on, mount the CANN
driver from the host, read the model repository (configs rendered from the same specs, plus the OM files)
from a PersistentVolumeClaim, and bind tritonserver to the pod's address. Readiness asks Triton whether each
model is ready; liveness asks whether the server lives. A HorizontalPodAutoscaler scales on the average time
requests wait in Triton's queue, which the Prometheus adapter computes from Triton's own counters; the Service
carries HTTP, gRPC and metrics. ``kserve_objects`` is the same server as a KServe ServingRuntime with an
InferenceService. Every builder returns plain data: ``ge_plugin.deploy.write_files`` writes it, tests validate it against the
Kubernetes OpenAPI schemas.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import attrs

from ge_plugin.deploy.npu import NpuRequest
from ge_plugin.serve.triton import EXIT_TIMEOUT_S
from ge_plugin.spec.model import ModelSpec

#: ``ge-plugin serve``'s exit timeout (tritonserver's --exit-timeout-secs): how long in-flight requests may
#: finish after SIGTERM. Passed to serve explicitly, and the pod's grace period is derived from it.
SERVE_EXIT_TIMEOUT_S = EXIT_TIMEOUT_S
#: preStop sleep: endpoints controllers take a moment to stop sending traffic to a terminating pod
PRESTOP_SLEEP_S = 5
#: on top of preStop + exit timeout: the Python stubs' finalize and process exit
TERMINATION_MARGIN_S = 10
TERMINATION_GRACE_S = PRESTOP_SLEEP_S + SERVE_EXIT_TIMEOUT_S + TERMINATION_MARGIN_S

HTTP_PORT = 8000
GRPC_PORT = 8001
METRICS_PORT = 8002
#: where the model repository is mounted in the container
MODEL_REPOSITORY = "/models"
#: the repository's folder on the claim (what ``ge-plugin render specs -o model_repository`` writes, plus OMs)
CLAIM_SUBPATH = "model_repository"
#: ``ge-plugin serve --work-dir``: the backend directory it prepares, on an emptyDir
WORK_DIR = "/tmp/ge-plugin"
#: the startup probe allows this long for loading and warming every model before liveness takes over
STARTUP_PERIOD_S = 10
STARTUP_FAILURES = 60

#: the custom metric the Prometheus adapter serves and the HPA targets: mean queue time per request (µs)
QUEUE_METRIC = "ge_plugin_queue_time_us"
#: Triton's counters it is computed from
TRITON_QUEUE_SERIES = "nv_inference_queue_duration_us"
TRITON_SUCCESS_SERIES = "nv_inference_request_success"
#: KServe's v2 runtimes listen on these (the HTTP port is the one Knative routes to)
KSERVE_HTTP_PORT = 8080
KSERVE_GRPC_PORT = 9000
KSERVE_MODEL_DIR = "/mnt/models"
KSERVE_MODEL_FORMAT = "ascend-om"

#: host paths of the CANN driver a container needs, as the Ascend device plugin's docs mount them
DRIVER_MOUNTS: tuple[tuple[str, str, str], ...] = (
    ("ascend-driver", "/usr/local/Ascend/driver", "Directory"),
    ("ascend-install-info", "/etc/ascend_install.info", "File"),
    ("npu-smi", "/usr/local/bin/npu-smi", "File"),
    ("ascend-dcmi", "/usr/local/dcmi", "Directory"),
)

_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")

Obj = dict[str, Any]


def check_name(name: str) -> str:
    """A Deployment/Service name: a DNS-1035 label (Service names must be)."""
    if not _DNS_LABEL.fullmatch(name):
        raise ValueError(
            "a Kubernetes name here is a DNS label: lower-case letters, digits and '-', starting with a letter, "
            f"at most 63 characters, got {name!r}"
        )
    return name


def default_name(specs: Sequence[ModelSpec]) -> str:
    """The model's name made a DNS label (llama_model -> llama-model); ``ge-plugin`` for several models."""
    if len(specs) != 1:
        return "ge-plugin"
    name = re.sub(r"[^a-z0-9]+", "-", specs[0].name.lower()).strip("-")
    if not name or not name[0].isalpha():
        name = f"ge-{name}".rstrip("-")
    return name[:63].rstrip("-")


@attrs.frozen
class K8sOptions:
    """What the specs do not say about a cluster."""

    name: str = attrs.field(validator=lambda _i, _a, value: check_name(value))
    image: str
    #: the PersistentVolumeClaim holding the model repository (configs + OM files)
    models_claim: str = attrs.field(validator=lambda _i, _a, value: check_name(value))
    min_replicas: int = 1
    max_replicas: int = 4
    #: the HPA adds pods while the mean queue time per request exceeds this
    target_queue_us: int = 20_000
    #: the emptyDir on /dev/shm: Triton's Python backend moves every tensor through shared memory
    shm_size: str = "1Gi"

    def __attrs_post_init__(self) -> None:
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise ValueError(
                f"replicas: need 1 <= --min-replicas <= --max-replicas, got {self.min_replicas} and {self.max_replicas}"
            )
        if self.target_queue_us < 1:
            raise ValueError(f"the queue-time target must be positive, got {self.target_queue_us} µs")


def labels(options: K8sOptions) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "ge-plugin",
        "app.kubernetes.io/instance": options.name,
        "app.kubernetes.io/component": "inference-server",
    }


def serve_args(
    *,
    repository: str = MODEL_REPOSITORY,
    http_port: int = HTTP_PORT,
    grpc_port: int = GRPC_PORT,
    metrics_port: int = METRICS_PORT,
) -> list[str]:
    """``ge-plugin serve`` with every flag explicit: listening on the pod's address, nothing left to defaults
    that were chosen for a laptop (loopback, ./build/triton)."""
    return [
        "ge-plugin",
        "serve",
        repository,
        "--host",
        "0.0.0.0",
        "--http-port",
        str(http_port),
        "--grpc-port",
        str(grpc_port),
        "--metrics-port",
        str(metrics_port),
        "--model-control-mode",
        "explicit",  # every model loads at start; a stop unloads them (serve's default, said explicitly)
        "--exit-timeout-secs",
        str(SERVE_EXIT_TIMEOUT_S),
        "--work-dir",
        WORK_DIR,
    ]


def readiness_probe(specs: Sequence[ModelSpec]) -> Obj:
    """Triton's per-model ready endpoint: one model is an HTTP probe, several an exec of ge_plugin.deploy.ready
    (a probe has one handler, and the server's own /v2/health/ready is not per model)."""
    names = [spec.name for spec in specs]
    handler: Obj
    if len(names) == 1:
        handler = {"httpGet": {"path": f"/v2/models/{names[0]}/ready", "port": "http"}}
    else:
        handler = {
            "exec": {"command": ["python3", "-m", "ge_plugin.deploy.ready", "--port", str(HTTP_PORT), *names]}
        }
    return {**handler, "periodSeconds": 5, "timeoutSeconds": 3, "failureThreshold": 2}


def _volumes(options: K8sOptions) -> tuple[list[Obj], list[Obj]]:
    shm_volume, shm_mount = _shm(options)
    volumes: list[Obj] = [
        {"name": "models", "persistentVolumeClaim": {"claimName": options.models_claim, "readOnly": True}},
        {"name": "work", "emptyDir": {}},
        shm_volume,
    ]
    mounts: list[Obj] = [
        {"name": "models", "mountPath": MODEL_REPOSITORY, "subPath": CLAIM_SUBPATH, "readOnly": True},
        {"name": "work", "mountPath": "/tmp"},
        shm_mount,
    ]
    driver_volumes, driver_mounts = driver_volumes_and_mounts()
    return volumes + driver_volumes, mounts + driver_mounts


def _shm(options: K8sOptions) -> tuple[Obj, Obj]:
    """/dev/shm in memory, ``shm_size`` large, for the Deployment's pods and KServe's alike."""
    return (
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": options.shm_size}},
        {"name": "dshm", "mountPath": "/dev/shm"},
    )


def driver_volumes_and_mounts() -> tuple[list[Obj], list[Obj]]:
    volumes = [{"name": name, "hostPath": {"path": path, "type": kind}} for name, path, kind in DRIVER_MOUNTS]
    mounts = [{"name": name, "mountPath": path, "readOnly": True} for name, path, _kind in DRIVER_MOUNTS]
    return volumes, mounts


def npu_resources(npu: NpuRequest) -> Obj:
    """Extended resources are requested through limits; requests, when given, must equal them."""
    amount = {npu.resource: str(npu.count)}
    return {"limits": dict(amount), "requests": dict(amount)}


def deployment(specs: Sequence[ModelSpec], npu: NpuRequest, options: K8sOptions) -> Obj:
    volumes, mounts = _volumes(options)
    live = {"httpGet": {"path": "/v2/health/live", "port": "http"}}
    container: Obj = {
        "name": "ge-plugin",
        "image": options.image,
        # args, not command: the image's entrypoint sources CANN's set_env.sh and then runs them
        "args": serve_args(),
        "env": [
            # refuse to start without pyACL rather than fall back to the CPU simulator
            {"name": "GE_PLUGIN_DEVICE", "value": "ascend"},
        ],
        "ports": [
            {"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"},
            {"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
        ],
        "resources": npu_resources(npu),
        "startupProbe": {**live, "periodSeconds": STARTUP_PERIOD_S, "failureThreshold": STARTUP_FAILURES},
        "livenessProbe": {**live, "periodSeconds": 10, "timeoutSeconds": 3, "failureThreshold": 3},
        "readinessProbe": readiness_probe(specs),
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", str(PRESTOP_SLEEP_S)]}}},
        "volumeMounts": mounts,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": options.name, "labels": labels(options)},
        "spec": {
            # no replicas: the HorizontalPodAutoscaler owns the count (a replicas field here would reset it
            # on every apply)
            "selector": {"matchLabels": labels(options)},
            "template": {
                "metadata": {
                    "labels": labels(options),
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(METRICS_PORT),
                        "prometheus.io/path": "/metrics",
                    },
                },
                "spec": {
                    "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def service(options: K8sOptions) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": options.name, "labels": labels(options)},
        "spec": {
            "type": "ClusterIP",
            "selector": labels(options),
            "ports": [
                {"name": "http", "port": HTTP_PORT, "targetPort": "http", "protocol": "TCP"},
                {"name": "grpc", "port": GRPC_PORT, "targetPort": "grpc", "protocol": "TCP"},
                {"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"},
            ],
        },
    }


def horizontal_pod_autoscaler(options: K8sOptions) -> Obj:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": options.name, "labels": labels(options)},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": options.name},
            "minReplicas": options.min_replicas,
            "maxReplicas": options.max_replicas,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": QUEUE_METRIC},
                        "target": {"type": "AverageValue", "averageValue": str(options.target_queue_us)},
                    },
                }
            ],
        },
    }


def service_monitor(options: K8sOptions) -> Obj:
    """For clusters that run the Prometheus Operator (instead of the scrape annotations)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": options.name, "labels": labels(options)},
        "spec": {
            "selector": {"matchLabels": labels(options)},
            "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s"}],
        },
    }


def prometheus_adapter_rules() -> Obj:
    """Values for the prometheus-community/prometheus-adapter chart: the rule that serves QUEUE_METRIC.

    Triton's counters are cumulative microseconds and requests; their rates over a minute divide into the
    mean queue time per request, summed over the pod's models. The pod and namespace labels are the ones
    both the scrape annotations (the chart's kubernetes-pods job) and a ServiceMonitor attach.
    """
    rate = "sum by (<<.GroupBy>>) (rate({series}{{<<.LabelMatchers>>}}[1m]))"
    query = (
        f"{rate.format(series=TRITON_QUEUE_SERIES)} / "
        f"clamp_min({rate.format(series=TRITON_SUCCESS_SERIES)}, 1e-9)"
    )
    return {
        "rules": {
            "custom": [
                {
                    "seriesQuery": f'{TRITON_QUEUE_SERIES}{{namespace!="",pod!=""}}',
                    "resources": {
                        "overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
                    },
                    "name": {"matches": f"^{TRITON_QUEUE_SERIES}$", "as": QUEUE_METRIC},
                    "metricsQuery": query,
                }
            ]
        }
    }


def kserve_objects(npu: NpuRequest, options: K8sOptions, *, storage_uri: str) -> tuple[Obj, Obj]:
    """A ServingRuntime that runs ``ge-plugin serve`` on KServe's model directory, and an InferenceService
    that uses it for the repository at ``storage_uri`` (``pvc://CLAIM/PATH`` by default)."""
    volumes, mounts = driver_volumes_and_mounts()
    shm_volume, shm_mount = _shm(options)
    volumes.append(shm_volume)
    mounts.append(shm_mount)
    runtime_name = f"{options.name}-runtime"
    runtime = {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ServingRuntime",
        "metadata": {"name": runtime_name, "labels": labels(options)},
        "spec": {
            "annotations": {
                "prometheus.kserve.io/port": str(METRICS_PORT),
                "prometheus.kserve.io/path": "/metrics",
            },
            "supportedModelFormats": [{"name": KSERVE_MODEL_FORMAT, "version": "1", "autoSelect": True}],
            "protocolVersions": ["v2", "grpc-v2"],
            "containers": [
                {
                    "name": "kserve-container",
                    "image": options.image,
                    "args": serve_args(
                        repository=KSERVE_MODEL_DIR, http_port=KSERVE_HTTP_PORT, grpc_port=KSERVE_GRPC_PORT
                    ),
                    "env": [{"name": "GE_PLUGIN_DEVICE", "value": "ascend"}],
                    "ports": [{"containerPort": KSERVE_HTTP_PORT, "protocol": "TCP"}],
                    "resources": npu_resources(npu),
                    "volumeMounts": mounts,
                }
            ],
            "volumes": volumes,
        },
    }
    service_ = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": options.name, "labels": labels(options)},
        "spec": {
            "predictor": {
                "minReplicas": options.min_replicas,
                "maxReplicas": options.max_replicas,
                "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
                "model": {
                    "modelFormat": {"name": KSERVE_MODEL_FORMAT},
                    "runtime": runtime_name,
                    "storageUri": storage_uri,
                    "resources": npu_resources(npu),
                },
            }
        },
    }
    return runtime, service_
