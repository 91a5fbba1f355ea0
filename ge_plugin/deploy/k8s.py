"""Specs -> the Kubernetes objects that run ``ge-plugin serve`` on an Ascend fleet, as plain dicts.

One Deployment serves every model of the specs it is rendered from, like one ``ge-plugin serve`` serves a
repository: its pods ask the Ascend device plugin for the NPUs the specs place models on, get the CANN driver
from the Ascend Docker Runtime (or, in ``hostpath`` mode, from host mounts), read the model repository
(configs rendered from the same specs, plus the OM files) from a PersistentVolumeClaim, and bind tritonserver
to the pod's address. Readiness asks Triton whether each model is ready; liveness asks whether the server
lives. Every pod runs as a numeric non-root user with no privilege escalation, no capabilities and a read-only
root filesystem (writable: the work emptyDir on /tmp and /dev/shm), with CPU and memory requests equal to
their limits (QoS Guaranteed: evicted last). Rollouts replace a pod before starting its successor
(``maxSurge: 0``): with every NPU of a node allocated, a surge pod would wait for NPUs forever. A
PodDisruptionBudget lets drains take one pod at a time. A HorizontalPodAutoscaler scales on the average time
requests wait in Triton's queue, which the Prometheus adapter computes from Triton's own counters; the Service
carries HTTP, gRPC and metrics, and an optional headless Service lets gRPC clients balance over the pods
themselves. ``kserve_objects`` is the same server as a KServe ServingRuntime with an InferenceService. Every
builder returns plain data: ``ge_plugin.deploy.render.write_files`` writes it, tests validate it against the
Kubernetes OpenAPI schemas and the CRDs' schemas.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, Optional

import attrs

from ge_plugin.deploy.dockerfile import NPU_GID, NPU_UID
from ge_plugin.deploy.npu import NpuRequest, check_resource_name
from ge_plugin.serve.triton import EXIT_TIMEOUT_S, remote_repository
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
#: the writable emptyDir (the root filesystem is read-only); ``ge-plugin serve --work-dir`` is under it
WRITABLE_DIR = "/tmp"
WORK_DIR = f"{WRITABLE_DIR}/ge-plugin"
#: the startup probe allows this long for loading and warming every model before liveness takes over
STARTUP_PERIOD_S = 10
STARTUP_FAILURES = 60
STARTUP_WINDOW_S = STARTUP_PERIOD_S * STARTUP_FAILURES
#: a CANN base image is several GB: on a node that has not pulled it yet, the pull alone can take minutes,
#: before the startup probe's window even starts. The rollout's deadline covers both, so ``kubectl rollout
#: status`` does not report a failure for pods that are still pulling or loading.
IMAGE_PULL_ALLOWANCE_S = 900
PROGRESS_DEADLINE_S = IMAGE_PULL_ALLOWANCE_S + STARTUP_WINDOW_S
#: /tmp (the work dir, CANN's logs): an emptyDir on the node's disk, bounded, and requested as
#: ephemeral storage so the scheduler counts it and the kubelet evicts a pod that outgrows it
TMP_SIZE = "4Gi"
#: where CANN writes its plog files (ASCEND_PROCESS_LOG_PATH); ASCEND_SLOG_PRINT_TO_STDOUT=1 sends them to
#: stdout too, where ``kubectl logs`` and the cluster's log collector read them
CANN_LOG_DIR = f"{WRITABLE_DIR}/ascend-log"

#: access modes of the model claim; ReadWriteOnce and ReadWriteOncePod attach to one node at a time
ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
SINGLE_NODE_ACCESS = ("ReadWriteOnce", "ReadWriteOncePod")
#: with --models-image: the folder of the image that holds the repository, copied into an emptyDir
MODELS_IMAGE_DIR = "/model_repository"
MODELS_SIZE = "20Gi"

#: Contract with ``ge-plugin serve``: the admin key's file, from a Secret the operator creates
ADMIN_KEY_DIR = "/etc/ge-plugin/admin-key"
ADMIN_KEY_ITEM = "admin-key"
#: where Prometheus runs (metrics port allowed from there by the NetworkPolicy)
MONITORING_NAMESPACE = "monitoring"

#: the custom metric the Prometheus adapter serves and the HPA targets: mean queue time per request (µs)
QUEUE_METRIC = "ge_plugin_queue_time_us"
#: Triton's counters it is computed from
TRITON_QUEUE_SERIES = "nv_inference_queue_duration_us"
TRITON_SUCCESS_SERIES = "nv_inference_request_success"
#: KServe's v2 runtimes listen on these (the HTTP port is the one KServe routes to)
KSERVE_HTTP_PORT = 8080
KSERVE_GRPC_PORT = 9000
KSERVE_MODEL_DIR = "/mnt/models"
KSERVE_MODEL_FORMAT = "ascend-om"

#: How the container gets the CANN driver: ``runtime``, the Ascend Docker Runtime mounts it into every
#: container the device plugin gave NPUs (no host volumes: the pod passes Pod Security "baseline");
#: ``hostpath``, host mounts as the device plugin's docs list them for a plain runc (needs a namespace
#: exempt from "baseline", which forbids hostPath).
DRIVER_MODES = ("runtime", "hostpath")
#: host paths of the CANN driver a container needs in hostpath mode, as the Ascend device plugin's docs
#: mount them. npu-smi is not among them: its path differs between driver packages (--npu-smi PATH).
DRIVER_MOUNTS: tuple[tuple[str, str, str], ...] = (
    ("ascend-driver", "/usr/local/Ascend/driver", "Directory"),
    ("ascend-install-info", "/etc/ascend_install.info", "File"),
    ("ascend-dcmi", "/usr/local/dcmi", "Directory"),
)
#: the labels every object carries and the selectors use; --label may not change them
SELECTOR_KEYS = ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component")
#: kube-prometheus-stack's Prometheus selects ServiceMonitors by this label (its Helm release's name)
RELEASE_LABEL = "release"
DEFAULT_PROMETHEUS_URL = "http://prometheus-operated.monitoring.svc:9090"

_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
_QUANTITY = re.compile(r"([0-9]+(?:\.[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?")
_SUFFIX: dict[Optional[str], Decimal] = {
    None: Decimal(1),
    "m": Decimal("0.001"),
    **{s: Decimal(1000) ** (i + 1) for i, s in enumerate("kMGTPE")},
    **{f"{s}i": Decimal(1024) ** (i + 1) for i, s in enumerate("KMGTPE")},
}
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

Obj = dict[str, Any]


def check_name(name: str) -> str:
    """A Deployment/Service name: a DNS-1035 label (Service names must be)."""
    if not _DNS_LABEL.fullmatch(name):
        raise ValueError(
            "a Kubernetes name here is a DNS label: lower-case letters, digits and '-', starting with a letter, "
            f"at most 63 characters, got {name!r}"
        )
    return name


def check_namespace(name: str) -> str:
    if not _DNS_1123_LABEL.fullmatch(name):
        raise ValueError(
            f"a namespace is a DNS label: lower-case letters, digits and '-', at most 63 characters, got {name!r}"
        )
    return name


def check_label_key(key: str) -> str:
    """``[prefix/]name``: a DNS subdomain prefix (at most 253) and a name of at most 63 characters."""
    prefix, _, name = key.rpartition("/")
    if (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix))) or not _LABEL_NAME.fullmatch(
        name
    ):
        raise ValueError(
            f"a label key is [PREFIX/]NAME (NAME: letters, digits, '-', '_', '.', at most 63), got {key!r}"
        )
    return key


def check_label_value(value: str) -> str:
    if not _LABEL_VALUE.fullmatch(value):
        raise ValueError(
            f"a label value is at most 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric, "
            f"got {value!r}"
        )
    return value


def key_value(text: str, what: str = "label") -> tuple[str, str]:
    """``KEY=VALUE`` (a label or node selector): each part checked as Kubernetes checks labels."""
    key, sep, value = text.partition("=")
    if not sep:
        raise ValueError(f"expected KEY=VALUE for a {what}, got {text!r}")
    return check_label_key(key), check_label_value(value)


def toleration(text: str) -> Obj:
    """``KEY[=VALUE][:EFFECT]`` (kubectl taint's form): Equal when a value is given, else Exists; no effect:
    every effect."""
    rest, sep, effect = text.rpartition(":")
    if not sep:
        rest, effect = text, ""
    if effect and effect not in _EFFECTS:
        raise ValueError(f"a toleration's effect is one of {', '.join(_EFFECTS)}, got {effect!r} in {text!r}")
    key, has_value, value = rest.partition("=")
    check_label_key(key)
    found: Obj = {"key": key, "operator": "Equal" if has_value else "Exists"}
    if has_value:
        found["value"] = check_label_value(value)
    if effect:
        found["effect"] = effect
    return found


def quantity(text: str) -> Decimal:
    """A Kubernetes resource quantity (``500m``, ``4``, ``16Gi``, ``1.5G``) as a number; ValueError otherwise."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f"expected a Kubernetes quantity such as 500m, 4, 16Gi, got {text!r}")
    try:
        value = Decimal(match.group(1)) * _SUFFIX[match.group(2)]
    except (InvalidOperation, KeyError):
        raise ValueError(f"expected a Kubernetes quantity such as 500m, 4, 16Gi, got {text!r}") from None
    if value <= 0:
        raise ValueError(f"a resource quantity must be positive, got {text!r}")
    return value


def check_quantity(text: str) -> str:
    quantity(text)
    return text


def run_as(text: str) -> tuple[int, int]:
    """``UID:GID`` of the serving process: non-root numbers (the pod's runAsNonRoot checks the number)."""
    uid, sep, gid = text.partition(":")
    try:
        ids = (int(uid), int(gid if sep else uid))
    except ValueError:
        raise ValueError(f"expected UID:GID (numbers), got {text!r}") from None
    if min(ids) < 1:
        raise ValueError(f"the serving process runs as a non-root user: UID and GID >= 1, got {text!r}")
    return ids


def prometheus_url(text: str) -> str:
    parsed = urllib.parse.urlsplit(text)
    if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.query or parsed.fragment:
        raise ValueError(f"expected Prometheus' URL as http(s)://HOST[:PORT][/PATH], got {text!r}")
    try:
        parsed.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise ValueError(f"expected Prometheus' URL as http(s)://HOST[:PORT][/PATH], got {text!r}") from None
    return text


def default_name(specs: Sequence[ModelSpec]) -> str:
    """The model's name made a DNS label (llama_model -> llama-model); ``ge-plugin`` for several models."""
    if len(specs) != 1:
        return "ge-plugin"
    name = re.sub(r"[^a-z0-9]+", "-", specs[0].name.lower()).strip("-")
    if not name or not name[0].isalpha():
        name = f"ge-{name}".rstrip("-")
    return name[:63].rstrip("-")


def _optional(check: Callable[[str], str]) -> Callable[[Any, Any, Optional[str]], None]:
    """An attrs validator: ``check`` on a value that is given, nothing on None."""

    def validate(_instance: Any, _attribute: Any, value: Optional[str]) -> None:
        if value is not None:
            check(value)

    return validate


@attrs.frozen
class K8sOptions:
    """What the specs do not say about a cluster."""

    name: str = attrs.field(validator=lambda _i, _a, value: check_name(value))
    image: str
    #: the PersistentVolumeClaim holding the model repository (configs + OM files); None with ``models_image``
    models_claim: Optional[str] = attrs.field(validator=_optional(check_name))
    min_replicas: int = 1
    max_replicas: int = 4
    #: the HPA adds pods while the mean queue time per request exceeds this
    target_queue_us: int = 20_000
    #: the emptyDir on /dev/shm: Triton's Python backend moves every tensor through shared memory; None:
    #: sized from the specs (``shm_size_for``)
    shm_size: Optional[str] = attrs.field(default=None, validator=_optional(check_quantity))
    #: the /tmp emptyDir's sizeLimit, and the container's ephemeral-storage request and limit
    tmp_size: str = attrs.field(default=TMP_SIZE, validator=lambda _i, _a, value: check_quantity(value))
    #: how the pods share the model claim: ReadOnlyMany (the default) or ReadWriteMany let replicas on several
    #: nodes mount it; a single-node mode is refused when replicas can exceed one
    models_access_mode: str = "ReadOnlyMany"
    #: an OCI image holding the repository in MODELS_IMAGE_DIR: an init container copies it into an emptyDir
    #: (no claim; a model update is a new image tag, rolled out like any other change)
    models_image: Optional[str] = None
    #: an object store tritonserver reads the repository from (``s3://...``), with its credentials from the
    #: Secret ``models_secret`` (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION...) as environment
    models_uri: Optional[str] = None
    models_secret: Optional[str] = attrs.field(default=None, validator=_optional(check_name))
    #: that emptyDir's sizeLimit
    models_size: str = attrs.field(default=MODELS_SIZE, validator=lambda _i, _a, value: check_quantity(value))
    #: a Secret the operator created (data key ``admin-key``): mounted, and ``ge-plugin serve --admin-key-file``
    #: reads it; None: the control plane (repository, shared memory, logging, trace...) is closed to everyone
    admin_key_secret: Optional[str] = attrs.field(default=None, validator=_optional(check_name))
    #: a NetworkPolicy: inference ports from ``allow_namespaces`` (none: the pods' own namespace), the metrics
    #: port from ``monitoring_namespace``; nothing else reaches the pods
    network_policy: bool = True
    allow_namespaces: tuple[str, ...] = ()
    monitoring_namespace: str = MONITORING_NAMESPACE
    #: the pods' schedulerName (``volcano`` on MindCluster sites); None: the default scheduler
    scheduler_name: Optional[str] = None
    #: the simulator instead of pyACL: no NPU resources, no driver, GE_PLUGIN_DEVICE=sim (a cluster without NPUs)
    simulator: bool = False
    #: CPU and memory of the serving container: requests, and limits equal to them (QoS Guaranteed)
    cpu: str = attrs.field(default="4", validator=lambda _i, _a, value: check_quantity(value))
    memory: str = attrs.field(default="16Gi", validator=lambda _i, _a, value: check_quantity(value))
    #: a CPU limit above the request (then QoS Burstable); None: equal to it
    cpu_limit: Optional[str] = None
    namespace: Optional[str] = None
    #: extra labels on every object and pod (never the selector's)
    labels: tuple[tuple[str, str], ...] = ()
    #: the serving process's uid and gid: the host's HwHiAiUser, which owns the NPU device nodes
    run_as: tuple[int, int] = (NPU_UID, NPU_GID)
    driver: str = "runtime"
    #: hostpath mode: the host's npu-smi binary, mounted at the same path (None: not mounted)
    npu_smi: Optional[str] = None
    runtime_class: Optional[str] = None
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Obj, ...] = ()
    image_pull_secrets: tuple[str, ...] = ()
    #: the ``release`` label of the ServiceMonitor (kube-prometheus-stack selects by it)
    prometheus_release: Optional[str] = None
    prometheus_url: str = attrs.field(
        default=DEFAULT_PROMETHEUS_URL, validator=lambda _i, _a, value: prometheus_url(value)
    )
    headless_service: bool = False
    #: another extended resource than the one the specs' soc_version implies (a vNPU, another device plugin)
    npu_resource: Optional[str] = attrs.field(default=None, validator=_optional(check_resource_name))
    service_monitor: bool = False
    #: a KServe ServingRuntime and InferenceService too, reading the repository from ``storage_uri``
    kserve: bool = False
    storage_uri: Optional[str] = None

    def __attrs_post_init__(self) -> None:
        """Every rule that spans options, once, in the domain's words (the CLI maps flags to fields and shows
        these messages as they are)."""
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise ValueError(
                f"replicas: the minimum ({self.min_replicas}) must be at least 1 and at most the maximum "
                f"({self.max_replicas})"
            )
        if self.target_queue_us < 1:
            raise ValueError(f"the queue-time target must be positive, got {self.target_queue_us} µs")
        if self.driver not in DRIVER_MODES:
            raise ValueError(f"the driver mode is one of {', '.join(DRIVER_MODES)}, got {self.driver!r}")
        if self.npu_smi is not None and self.driver != "hostpath":
            raise ValueError("npu-smi is mounted from the host only in hostpath driver mode")
        if self.npu_smi is not None and not self.npu_smi.startswith("/"):
            raise ValueError(f"npu-smi's path on the hosts must be absolute, got {self.npu_smi!r}")
        if self.cpu_limit is not None and quantity(self.cpu_limit) < quantity(self.cpu):
            raise ValueError(f"the CPU limit ({self.cpu_limit}) is below the CPU request ({self.cpu})")
        if self.shm_size is not None and quantity(self.memory) <= quantity(self.shm_size):
            raise ValueError(
                f"memory ({self.memory}) must exceed /dev/shm ({self.shm_size}): the /dev/shm emptyDir is memory "
                "the container's limit counts, and tritonserver needs memory of its own"
            )
        if self.prometheus_release is not None and not self.service_monitor:
            raise ValueError(
                "the Prometheus release label is the ServiceMonitor's: it needs the ServiceMonitor"
            )
        if self.storage_uri is not None and not self.kserve:
            raise ValueError("the storage URI is where KServe fetches the repository from: it needs KServe")
        if self.models_access_mode not in ACCESS_MODES:
            raise ValueError(
                f"the model claim's access mode is one of {', '.join(ACCESS_MODES)}, got {self.models_access_mode!r}"
            )
        sources = [s for s in (self.models_claim, self.models_image, self.models_uri) if s is not None]
        if len(sources) != 1:
            raise ValueError(
                "the model repository comes from one place: a claim, a models image or an object store, "
                f"got {len(sources)}"
            )
        if self.models_uri is not None and not remote_repository(self.models_uri):
            raise ValueError(
                f"an object-store repository is s3://, gs:// or as:// (as tritonserver reads them), got {self.models_uri!r}"
            )
        if self.models_secret is not None and self.models_uri is None:
            raise ValueError("the models' credentials Secret is for an object-store repository")
        if (
            self.models_claim is not None
            and self.models_access_mode in SINGLE_NODE_ACCESS
            and self.max_replicas > 1
        ):
            raise ValueError(
                f"a {self.models_access_mode} claim attaches to one node at a time, and replicas are spread over "
                f"nodes (pod anti-affinity): with up to {self.max_replicas} replicas the second would never start "
                "(Multi-Attach error). Use a ReadOnlyMany or ReadWriteMany claim, a models image, or one replica"
            )
        if self.simulator and (self.driver != "runtime" or self.runtime_class is not None):
            raise ValueError(
                "the simulator needs no CANN driver: it takes neither the hostpath driver nor a runtime class"
            )
        for namespace in (*self.allow_namespaces, self.monitoring_namespace):
            check_namespace(namespace)
        if self.scheduler_name is not None:
            check_name(self.scheduler_name)
        if self.headless_service:
            check_name(f"{self.name}-headless")
        if self.namespace is not None:
            check_namespace(self.namespace)
        for key, value in (*self.labels, *self.node_selector):
            check_label_key(key)
            check_label_value(value)
        clash = [key for key, _value in self.labels if key in SELECTOR_KEYS]
        if clash:
            raise ValueError(
                f"label {clash[0]}: ge-plugin sets it (the selector uses it); choose another key"
            )
        for secret in self.image_pull_secrets:
            check_name(secret)
        if self.prometheus_release is not None:
            check_label_value(self.prometheus_release)


def selector_labels(options: K8sOptions) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "ge-plugin",
        "app.kubernetes.io/instance": options.name,
        "app.kubernetes.io/component": "inference-server",
    }


def labels(options: K8sOptions) -> dict[str, str]:
    """Every object's and pod's labels: the selector's, then --label ones."""
    return {**selector_labels(options), **dict(options.labels)}


def metadata(options: K8sOptions, name: str | None = None, **extra: Any) -> Obj:
    found: Obj = {"name": name or options.name}
    if options.namespace is not None:
        found["namespace"] = options.namespace
    found["labels"] = labels(options)
    found.update(extra)
    return found


def serve_args(
    *,
    repository: str = MODEL_REPOSITORY,
    http_port: int = HTTP_PORT,
    grpc_port: int = GRPC_PORT,
    metrics_port: int = METRICS_PORT,
    admin_key: bool = False,
) -> list[str]:
    """``ge-plugin serve`` with every flag explicit: listening on the pod's address, nothing left to defaults
    that were chosen for a laptop (loopback, the user's cache); with ``admin_key``, the control plane opened to
    clients that send the key the mounted Secret holds."""
    key = ["--admin-key-file", f"{ADMIN_KEY_DIR}/{ADMIN_KEY_ITEM}"] if admin_key else []
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
        "explicit",  # a stop unloads the models first (serve's default, said explicitly)
        "--load-model",
        "*",  # explicit mode loads only what --load-model names, as tritonserver's does: every model
        "--exit-timeout-secs",
        str(SERVE_EXIT_TIMEOUT_S),
        "--work-dir",
        WORK_DIR,
        *key,
    ]


def readiness_probe(specs: Sequence[ModelSpec], *, port: int = HTTP_PORT, port_name: str = "http") -> Obj:
    """Triton's per-model ready endpoint: one model is an HTTP probe, several an exec of ge_plugin.deploy.ready
    (a probe has one handler, and the server's own /v2/health/ready is not per model)."""
    names = [spec.name for spec in specs]
    handler: Obj
    if len(names) == 1:
        handler = {"httpGet": {"path": f"/v2/models/{names[0]}/ready", "port": port_name}}
    else:
        handler = {
            "exec": {"command": ["python3", "-m", "ge_plugin.deploy.ready", "--port", str(port), *names]}
        }
    return {**handler, "periodSeconds": 5, "timeoutSeconds": 3, "failureThreshold": 2}


def probes(specs: Sequence[ModelSpec], *, port: int, port_name: str) -> Obj:
    """Startup (loading and warming every gear may take minutes), liveness and per-model readiness."""
    live = {"httpGet": {"path": "/v2/health/live", "port": port_name}}
    return {
        "startupProbe": {**live, "periodSeconds": STARTUP_PERIOD_S, "failureThreshold": STARTUP_FAILURES},
        "livenessProbe": {**live, "periodSeconds": 10, "timeoutSeconds": 3, "failureThreshold": 3},
        "readinessProbe": readiness_probe(specs, port=port, port_name=port_name),
    }


def container_security_context() -> Obj:
    """What Pod Security "restricted" asks of a container: nothing to escalate to, nothing to write outside
    its volumes."""
    return {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def pod_security_context(options: K8sOptions) -> Obj:
    uid, gid = options.run_as
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": gid,
        "fsGroup": gid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _volumes(options: K8sOptions) -> tuple[list[Obj], list[Obj]]:
    """The model repository (Deployment only: a claim, or an emptyDir a models image fills), the writable
    emptyDir, /dev/shm, the admin key and the driver."""
    if options.models_uri is not None:
        models: tuple[list[Obj], list[Obj]] = ([], [])  # tritonserver reads the object store itself
    elif options.models_image is not None:
        models = (
            [{"name": "models", "emptyDir": {"sizeLimit": options.models_size}}],
            [{"name": "models", "mountPath": MODEL_REPOSITORY, "readOnly": True}],
        )
    else:
        models = (
            [
                {
                    "name": "models",
                    "persistentVolumeClaim": {"claimName": options.models_claim, "readOnly": True},
                }
            ],
            [{"name": "models", "mountPath": MODEL_REPOSITORY, "subPath": CLAIM_SUBPATH, "readOnly": True}],
        )
    writable = writable_volumes_and_mounts(options)
    key = admin_key_volumes_and_mounts(options)
    driver = driver_volumes_and_mounts(options)
    return models[0] + writable[0] + key[0] + driver[0], models[1] + writable[1] + key[1] + driver[1]


def models_init_container(options: K8sOptions) -> Obj:
    """With a models image: copy its repository into the pod's emptyDir before the server starts, as the
    same non-root user, with the same restricted security context."""
    return {
        "name": "models",
        "image": options.models_image,
        "command": ["cp", "-R", f"{MODELS_IMAGE_DIR}/.", "/models/"],
        "resources": {
            "requests": {"cpu": "100m", "memory": "64Mi"},
            "limits": {"cpu": "1", "memory": "256Mi"},
        },
        "securityContext": container_security_context(),
        "volumeMounts": [{"name": "models", "mountPath": "/models"}],
    }


def writable_volumes_and_mounts(options: K8sOptions) -> tuple[list[Obj], list[Obj]]:
    """/tmp (the root filesystem is read-only: the work dir, CANN's logs), bounded by ``tmp_size``, and
    /dev/shm in memory, ``shm_size`` large, for the Deployment's pods and KServe's alike."""
    return (
        [
            {"name": "work", "emptyDir": {"sizeLimit": options.tmp_size}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": options.shm_size}},
        ],
        [{"name": "work", "mountPath": WRITABLE_DIR}, {"name": "dshm", "mountPath": "/dev/shm"}],
    )


def admin_key_volumes_and_mounts(options: K8sOptions) -> tuple[list[Obj], list[Obj]]:
    """The operator's Secret, read-only and readable by the serving user only (0400 with fsGroup)."""
    if options.admin_key_secret is None:
        return [], []
    return (
        [
            {
                "name": "admin-key",
                "secret": {
                    "secretName": options.admin_key_secret,
                    "items": [{"key": ADMIN_KEY_ITEM, "path": ADMIN_KEY_ITEM}],
                    "defaultMode": 0o440,
                },
            }
        ],
        [{"name": "admin-key", "mountPath": ADMIN_KEY_DIR, "readOnly": True}],
    )


def driver_volumes_and_mounts(options: K8sOptions) -> tuple[list[Obj], list[Obj]]:
    """Nothing with the Ascend Docker Runtime; host mounts in hostpath mode."""
    if options.driver != "hostpath":
        return [], []
    mounts = list(DRIVER_MOUNTS)
    if options.npu_smi is not None:
        mounts.append(("npu-smi", options.npu_smi, "File"))
    volumes = [{"name": name, "hostPath": {"path": path, "type": kind}} for name, path, kind in mounts]
    return volumes, [{"name": name, "mountPath": path, "readOnly": True} for name, path, _kind in mounts]


def resources(npu: NpuRequest, options: K8sOptions) -> Obj:
    """CPU, memory and /tmp's ephemeral storage requested and limited alike (QoS Guaranteed unless
    --cpu-limit raises the CPU limit); the NPUs through limits, and equal requests (extended resources must
    have them equal); no NPUs for the simulator."""
    requests = {"cpu": options.cpu, "memory": options.memory, "ephemeral-storage": options.tmp_size}
    if not options.simulator:
        requests[npu.resource] = str(npu.count)
    limits = {**requests, "cpu": options.cpu_limit or options.cpu}
    return {"requests": requests, "limits": limits}


def _env_from(options: K8sOptions) -> Obj:
    """The object store's credentials, from the operator's Secret, as the environment tritonserver reads."""
    return {"envFrom": [{"secretRef": {"name": options.models_secret}}]} if options.models_secret else {}


def _env(options: K8sOptions) -> list[Obj]:
    return [
        # refuse to start without pyACL rather than fall back to the CPU simulator (unless it is asked for)
        {"name": "GE_PLUGIN_DEVICE", "value": "sim" if options.simulator else "ascend"},
        # the root filesystem is read-only: HOME on the emptyDir for whatever writes under it
        {"name": "HOME", "value": WRITABLE_DIR},
        # CANN's logs: printed to stdout for `kubectl logs` instead of files (the variable's name up to CANN 8,
        # and from CANN 9), and where anything CANN still writes to a file goes: the bounded emptyDir
        {"name": "ASCEND_SLOG_PRINT_TO_STDOUT", "value": "1"},
        {"name": "ASCEND_LOG_PRINT_TO_STDOUT", "value": "1"},
        {"name": "ASCEND_PROCESS_LOG_PATH", "value": CANN_LOG_DIR},
    ]


def _scheduling(options: K8sOptions) -> Obj:
    """The pod spec's scheduling fields: spread replicas over nodes (preferred), the operator's node
    selector, tolerations, runtime class and pull secrets."""
    found: Obj = {
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": selector_labels(options)},
                        },
                    }
                ]
            }
        }
    }
    if options.node_selector:
        found["nodeSelector"] = dict(options.node_selector)
    if options.tolerations:
        found["tolerations"] = [dict(t) for t in options.tolerations]
    if options.runtime_class:
        found["runtimeClassName"] = options.runtime_class
    if options.image_pull_secrets:
        found["imagePullSecrets"] = [{"name": name} for name in options.image_pull_secrets]
    if options.scheduler_name:
        found["schedulerName"] = options.scheduler_name
    return found


def serving_container(
    name: str,
    specs: Sequence[ModelSpec],
    npu: NpuRequest,
    options: K8sOptions,
    *,
    repository: str,
    http_port: int,
    grpc_port: int,
    mounts: list[Obj],
) -> Obj:
    """The container running ``ge-plugin serve``, for the Deployment and KServe's runtime alike: its ports
    named ``http`` (first: the one KServe routes HTTP to), ``grpc`` (KServe marks a port so named as gRPC)
    and ``metrics``."""
    return {
        "name": name,
        "image": options.image,
        # args, not command: the image's entrypoint sources CANN's set_env.sh and then runs them
        "args": serve_args(
            repository=repository,
            http_port=http_port,
            grpc_port=grpc_port,
            admin_key=options.admin_key_secret is not None,
        ),
        "env": _env(options),
        **_env_from(options),
        "ports": [
            {"name": "http", "containerPort": http_port, "protocol": "TCP"},
            {"name": "grpc", "containerPort": grpc_port, "protocol": "TCP"},
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
        ],
        "resources": resources(npu, options),
        **probes(specs, port=http_port, port_name="http"),
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", str(PRESTOP_SLEEP_S)]}}},
        "securityContext": container_security_context(),
        "volumeMounts": mounts,
    }


def deployment(specs: Sequence[ModelSpec], npu: NpuRequest, options: K8sOptions) -> Obj:
    volumes, mounts = _volumes(options)
    container = serving_container(
        "ge-plugin",
        specs,
        npu,
        options,
        repository=options.models_uri or MODEL_REPOSITORY,
        http_port=HTTP_PORT,
        grpc_port=GRPC_PORT,
        mounts=mounts,
    )
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(options),
        "spec": {
            # no replicas: the HorizontalPodAutoscaler owns the count (a replicas field here would reset it
            # on every apply)
            "selector": {"matchLabels": selector_labels(options)},
            # beyond an image pull and the startup probe's window: `rollout status` fails only a stuck rollout
            "progressDeadlineSeconds": PROGRESS_DEADLINE_S,
            # a new pod only once an old one is gone: its NPUs are what the new one needs
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
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
                    "automountServiceAccountToken": False,
                    "securityContext": pod_security_context(options),
                    "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
                    **_scheduling(options),
                    **({"initContainers": [models_init_container(options)]} if options.models_image else {}),
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def _service_ports(*names: str) -> list[Obj]:
    ports = {"http": HTTP_PORT, "grpc": GRPC_PORT, "metrics": METRICS_PORT}
    return [{"name": name, "port": ports[name], "targetPort": name, "protocol": "TCP"} for name in names]


def service(options: K8sOptions) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(options),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(options),
            "ports": _service_ports("http", "grpc", "metrics"),
        },
    }


def headless_service(options: K8sOptions) -> Obj:
    """``NAME-headless``: DNS answers with every ready pod's address, so a gRPC client with round_robin
    balancing spreads its calls over the pods (through the ClusterIP Service, one HTTP/2 connection stays
    on one pod)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(options, f"{options.name}-headless"),
        "spec": {
            "clusterIP": "None",
            "selector": selector_labels(options),
            "ports": _service_ports("grpc", "http"),
        },
    }


def pod_disruption_budget(options: K8sOptions, name: str | None = None, selector: Obj | None = None) -> Obj:
    """Voluntary disruptions (drains, upgrades) take one pod at a time; maxUnavailable, not minAvailable, so a
    single replica can still be drained."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(options, name),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector or selector_labels(options)}},
    }


def network_policy(options: K8sOptions) -> Obj:
    """Only inference clients reach the inference ports, and only Prometheus the metrics port: from the
    namespaces the operator names (none: the pods' own namespace), and from the monitoring namespace.
    Kubelet probes come from the node, which NetworkPolicy always allows, so the probes keep working; the HPA
    reads the queue time through Prometheus, which the metrics rule lets in."""

    def namespaces(names: Sequence[str]) -> list[Obj]:
        return [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}}} for name in names
        ]

    clients = namespaces(options.allow_namespaces) if options.allow_namespaces else [{"podSelector": {}}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(options),
        "spec": {
            "podSelector": {"matchLabels": selector_labels(options)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": clients,
                    "ports": [{"port": "http", "protocol": "TCP"}, {"port": "grpc", "protocol": "TCP"}],
                },
                {
                    "from": namespaces([options.monitoring_namespace]),
                    "ports": [{"port": "metrics", "protocol": "TCP"}],
                },
            ],
        },
    }


def horizontal_pod_autoscaler(options: K8sOptions, target: str | None = None) -> Obj:
    """Scales ``target`` (the Deployment; KServe's predictor Deployment with ``--kserve``) on the queue time."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": metadata(options, target),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target or options.name},
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
    """For clusters that run the Prometheus Operator (instead of the scrape annotations); with
    ``prometheus_release``, the ``release`` label kube-prometheus-stack's Prometheus selects by."""
    found = metadata(options)
    if options.prometheus_release is not None:
        found["labels"] = {**found["labels"], RELEASE_LABEL: options.prometheus_release}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": found,
        "spec": {
            "selector": {"matchLabels": selector_labels(options)},
            "endpoints": [
                {
                    "port": "metrics",
                    "path": "/metrics",
                    "interval": "15s",
                    # the node, so that an instance's physical_id joins npu-exporter's id of the same node
                    "relabelings": [
                        {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}
                    ],
                }
            ],
        },
    }


def kustomization(files: Sequence[str]) -> Obj:
    """A kustomize base of the core objects (``kubectl apply -k DIR``; overlays change the rest)."""
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": list(files),
    }


def prometheus_adapter_rules(options: K8sOptions) -> Obj:
    """Values for the prometheus-community/prometheus-adapter chart: where Prometheus is, and the rule that
    serves QUEUE_METRIC.

    Triton's counters are cumulative microseconds and requests; their rates over a minute divide into the
    mean queue time per request, summed over the pod's models. The pod and namespace labels are the ones
    both the scrape annotations (the chart's kubernetes-pods job) and a ServiceMonitor attach.
    """
    url = urllib.parse.urlsplit(options.prometheus_url)
    port = url.port or (443 if url.scheme == "https" else 80)
    rate = "sum by (<<.GroupBy>>) (rate({series}{{<<.LabelMatchers>>}}[1m]))"
    query = (
        f"{rate.format(series=TRITON_QUEUE_SERIES)} / "
        f"clamp_min({rate.format(series=TRITON_SUCCESS_SERIES)}, 1e-9)"
    )
    return {
        # the chart joins these as url:port/path
        "prometheus": {"url": f"{url.scheme}://{url.hostname}", "port": port, "path": url.path.rstrip("/")},
        "rules": {
            "default": False,
            "custom": [
                {
                    "seriesQuery": f'{TRITON_QUEUE_SERIES}{{namespace!="",pod!=""}}',
                    "resources": {
                        "overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
                    },
                    "name": {"matches": f"^{TRITON_QUEUE_SERIES}$", "as": QUEUE_METRIC},
                    "metricsQuery": query,
                }
            ],
        },
    }


def kserve_objects(
    specs: Sequence[ModelSpec], npu: NpuRequest, options: K8sOptions, *, storage_uri: str
) -> tuple[Obj, Obj]:
    """A ServingRuntime that runs ``ge-plugin serve`` on KServe's model directory, and an InferenceService
    (RawDeployment mode: KServe's serverless mode routes one port, and both HTTP and gRPC are served) that uses
    it for the repository at ``storage_uri`` (``pvc://CLAIM/PATH`` by default)."""
    writable_volumes, writable_mounts = writable_volumes_and_mounts(options)
    driver_volumes, driver_mounts = driver_volumes_and_mounts(options)
    runtime_name = f"{options.name}-runtime"
    runtime = {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ServingRuntime",
        "metadata": metadata(options, runtime_name),
        "spec": {
            "annotations": {
                "prometheus.kserve.io/port": str(METRICS_PORT),
                "prometheus.kserve.io/path": "/metrics",
            },
            "supportedModelFormats": [{"name": KSERVE_MODEL_FORMAT, "version": "1", "autoSelect": True}],
            "protocolVersions": ["v2", "grpc-v2"],
            "containers": [
                serving_container(
                    "kserve-container",
                    specs,
                    npu,
                    options,
                    repository=KSERVE_MODEL_DIR,
                    http_port=KSERVE_HTTP_PORT,
                    grpc_port=KSERVE_GRPC_PORT,
                    mounts=writable_mounts + driver_mounts,
                )
            ],
            "volumes": writable_volumes + driver_volumes,
        },
    }
    scheduling = _scheduling(options)
    predictor: Obj = {
        "minReplicas": options.min_replicas,
        "maxReplicas": options.max_replicas,
        "deploymentStrategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
        },
        "automountServiceAccountToken": False,
        "securityContext": pod_security_context(options),
        "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
        **scheduling,
        "model": {
            "modelFormat": {"name": KSERVE_MODEL_FORMAT},
            "runtime": runtime_name,
            "storageUri": storage_uri,
            "resources": resources(npu, options),
        },
    }
    service_ = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": metadata(
            options,
            annotations={
                "serving.kserve.io/deploymentMode": "RawDeployment",
                # KServe's own HPA would scale on CPU; "external" leaves scaling to the rendered HPA (queue time)
                "serving.kserve.io/autoscalerClass": "external",
            },
        ),
        "spec": {"predictor": predictor},
    }
    return runtime, service_


def kserve_predictor(options: K8sOptions) -> str:
    """The Deployment KServe's RawDeployment mode creates for the InferenceService's predictor."""
    return f"{options.name}-predictor"


def kserve_scaling(options: K8sOptions) -> tuple[Obj, Obj]:
    """The HPA (queue time, as for the Deployment) on KServe's predictor Deployment, and a PDB for its pods,
    which KServe labels with the InferenceService's name."""
    return (
        horizontal_pod_autoscaler(options, kserve_predictor(options)),
        pod_disruption_budget(
            options,
            kserve_predictor(options),
            {"serving.kserve.io/inferenceservice": options.name},
        ),
    )
