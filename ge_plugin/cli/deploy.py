"""``ge-plugin deploy k8s SPEC_OR_DIR... -o DIR``: Kubernetes objects serving the specs' models."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ge_plugin import __version__
from ge_plugin.cli._common import add_command, argument_type

if TYPE_CHECKING:
    from ge_plugin.deploy.render import K8sOptions
    from ge_plugin.spec.model import ModelSpec

EXAMPLES = """
  ge-plugin deploy k8s specs/llama.yaml -o deploy/llama
  ge-plugin deploy k8s specs/ -o deploy/all --name ge-serving --image registry.example/ge-plugin:0.1.0
  ge-plugin deploy k8s specs/llama.yaml -o deploy/llama --namespace inference --cpu 8 --memory 32Gi \\
      --node-selector accelerator=huawei-Ascend910 --toleration huawei.com/Ascend910:NoSchedule
  ge-plugin deploy k8s specs/llama.yaml -o deploy/llama --service-monitor --prometheus-release kube-prometheus-stack
  ge-plugin deploy k8s specs/llama.yaml -o deploy/llama --driver hostpath --npu-smi /usr/local/sbin/npu-smi
  ge-plugin deploy k8s specs/llama.yaml -o deploy/llama --models-image registry.example/llama-models:1 \\
      --admin-key-secret llama-admin-key --allow-namespace apps --scheduler-name volcano
  ge-plugin deploy k8s specs/llama.yaml -o deploy/llama-sim --simulator   # a cluster without NPUs
  kubectl apply -k deploy/llama        # the kustomize base: Deployment, Services, HPA, PDB (ServiceMonitor)
"""


def _key_value(what: str) -> Callable[[str], tuple[str, str]]:
    from ge_plugin.deploy.k8s import key_value

    return lambda text: key_value(text, what)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"must be >= 1, got {value}")
    return value


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ge_plugin.deploy.dockerfile import NPU_GID, NPU_UID
    from ge_plugin.deploy.k8s import (
        ACCESS_MODES,
        DEFAULT_PROMETHEUS_URL,
        DRIVER_MODES,
        MODELS_IMAGE_DIR,
        MODELS_SIZE,
        MONITORING_NAMESPACE,
        TMP_SIZE,
        check_label_value,
        check_name,
        check_namespace,
        check_quantity,
        prometheus_url,
        run_as,
        toleration,
    )
    from ge_plugin.deploy.npu import check_resource_name

    parser = add_command(
        subparsers,
        "deploy",
        help="render deployment files (Kubernetes) from specs",
        description="Render what runs `ge-plugin serve` beyond one machine, from the same specs.",
        examples=EXAMPLES,
    )
    targets = parser.add_subparsers(dest="target", metavar="TARGET")
    targets.required = True
    k8s = add_command(
        targets,
        "k8s",
        help="Deployment, Service, HPA, Prometheus scraping, optional KServe objects, Dockerfile",
        description=(
            "One Deployment serving every model of the specs with `ge-plugin serve`: NPUs requested from the Ascend\n"
            "device plugin (from soc_version and the devices), the CANN driver from the Ascend Docker Runtime (or\n"
            "host mounts), the model repository from a PersistentVolumeClaim, CPU and memory requests = limits, a\n"
            "non-root read-only container, readiness on each model's /v2/models/NAME/ready, liveness on\n"
            "/v2/health/live, rollouts with maxSurge 0; a Service (HTTP, gRPC, metrics), a PodDisruptionBudget, a\n"
            "HorizontalPodAutoscaler on Triton's mean queue time per request, served by the Prometheus adapter\n"
            "(prometheus-adapter/values.yaml); a kustomize base (kubectl apply -k DIR); optionally a headless\n"
            "Service, a ServiceMonitor and a KServe ServingRuntime + InferenceService; a Dockerfile for the image.\n"
            "A re-render removes the files of the previous render it no longer makes (never other files).\n"
            "Spec problems are reported as FILE:LINE: $.path: message (exit 1). See docs/deploy.md."
        ),
        examples=EXAMPLES,
    )
    k8s.add_argument("specs", nargs="+", metavar="SPEC_OR_DIR", help="spec files or folders of specs")
    k8s.add_argument("-o", "--output", type=Path, required=True, metavar="DIR", help="folder to write to")
    k8s.add_argument(
        "--name",
        type=argument_type(check_name),
        help="name of the Deployment and its objects (default: the model's name as a DNS label; ge-plugin for several)",
    )
    k8s.add_argument(
        "--image",
        default=f"ge-plugin:{__version__}",
        help="serving image, built from DIR/Dockerfile (default: %(default)s)",
    )
    models = k8s.add_argument_group("the model repository")
    models.add_argument(
        "--models-claim",
        type=argument_type(check_name),
        metavar="PVC",
        help="PersistentVolumeClaim holding model_repository/ (default: NAME-models)",
    )
    models.add_argument(
        "--models-access-mode",
        choices=ACCESS_MODES,
        default="ReadOnlyMany",
        help="the claim's access mode: replicas on several nodes need ReadOnlyMany or ReadWriteMany; a "
        "single-node mode is refused with more than one replica (default: %(default)s)",
    )
    models.add_argument(
        "--models-image",
        metavar="IMAGE",
        help=f"instead of a claim: an image holding the repository in {MODELS_IMAGE_DIR}/ (DIR/models.Dockerfile "
        "builds one), copied into the pod by an init container",
    )
    models.add_argument(
        "--models-uri",
        metavar="URI",
        help="instead of a claim: an object store tritonserver reads the repository from (s3://BUCKET/PATH, or "
        "s3://https://HOST:PORT/BUCKET/PATH for another endpoint)",
    )
    models.add_argument(
        "--models-secret",
        type=argument_type(check_name),
        metavar="SECRET",
        help="with --models-uri: a Secret of its credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, "
        "AWS_DEFAULT_REGION), given to the server as environment",
    )
    models.add_argument(
        "--models-size",
        default=MODELS_SIZE,
        type=argument_type(check_quantity),
        metavar="QUANTITY",
        help="with --models-image: the size limit of the models' emptyDir (default: %(default)s)",
    )
    k8s.add_argument(
        "--min-replicas", type=argument_type(_positive), default=1, metavar="N", help="(default: 1)"
    )
    k8s.add_argument(
        "--max-replicas", type=argument_type(_positive), default=4, metavar="N", help="(default: 4)"
    )
    k8s.add_argument(
        "--target-queue-ms",
        type=float,
        default=20.0,
        metavar="MS",
        help="the HPA adds pods while requests wait longer than this in Triton's queue, on average (default: 20)",
    )
    k8s.add_argument(
        "--shm-size",
        type=argument_type(check_quantity),
        metavar="QUANTITY",
        help="/dev/shm for Triton's Python backend (default: sized from the specs' largest tensors, streams and "
        "instances; docs/deploy.md)",
    )
    k8s.add_argument(
        "--tmp-size",
        default=TMP_SIZE,
        type=argument_type(check_quantity),
        metavar="QUANTITY",
        help="/tmp's size limit and ephemeral-storage request (work dir, CANN's log files) (default: %(default)s)",
    )
    k8s.add_argument(
        "--npu-resource",
        type=argument_type(check_resource_name),
        metavar="NAME",
        help="extended resource instead of the one soc_version implies (e.g. huawei.com/Ascend910-4c, a vNPU)",
    )
    pod = k8s.add_argument_group("pod")
    pod.add_argument(
        "--namespace", type=argument_type(check_namespace), help="namespace of every object (default: none)"
    )
    pod.add_argument(
        "--label",
        action="append",
        default=[],
        type=argument_type(_key_value("label")),
        metavar="KEY=VALUE",
        help="extra label on every object and pod (repeatable; the selector's own labels are fixed)",
    )
    pod.add_argument(
        "--cpu",
        default="4",
        type=argument_type(check_quantity),
        metavar="QUANTITY",
        help="CPU request, and limit unless --cpu-limit (default: %(default)s)",
    )
    pod.add_argument(
        "--cpu-limit",
        type=argument_type(check_quantity),
        metavar="QUANTITY",
        help="a CPU limit above the request",
    )
    pod.add_argument(
        "--memory",
        default="16Gi",
        type=argument_type(check_quantity),
        metavar="QUANTITY",
        help="memory request and limit; the /dev/shm emptyDir counts against it (default: %(default)s)",
    )
    pod.add_argument(
        "--run-as",
        type=argument_type(run_as),
        default=(NPU_UID, NPU_GID),
        metavar="UID:GID",
        help=f"the serving process's ids: the host's HwHiAiUser, which owns the NPU devices (default: {NPU_UID}:{NPU_GID})",
    )
    pod.add_argument(
        "--driver",
        choices=DRIVER_MODES,
        default="runtime",
        help="how the container gets the CANN driver: runtime (the Ascend Docker Runtime mounts it; no host volumes, "
        "passes Pod Security baseline) or hostpath (host mounts; needs a namespace exempt from baseline) "
        "(default: %(default)s)",
    )
    pod.add_argument(
        "--npu-smi",
        metavar="PATH",
        help="with --driver hostpath: mount npu-smi from this host path (its place differs between driver packages)",
    )
    pod.add_argument(
        "--runtime-class", type=argument_type(check_name), metavar="NAME", help="the pod's runtimeClassName"
    )
    pod.add_argument(
        "--node-selector",
        action="append",
        default=[],
        type=argument_type(_key_value("node selector")),
        metavar="KEY=VALUE",
        help="schedule only on nodes with this label (repeatable)",
    )
    pod.add_argument(
        "--toleration",
        action="append",
        default=[],
        type=argument_type(toleration),
        metavar="KEY[=VALUE][:EFFECT]",
        help="tolerate this taint (repeatable)",
    )
    pod.add_argument(
        "--scheduler-name",
        type=argument_type(check_name),
        metavar="NAME",
        help="the pods' scheduler (volcano on MindCluster sites; default: the cluster's default scheduler)",
    )
    pod.add_argument(
        "--simulator",
        action="store_true",
        help="serve on the CPU simulator: no NPU resources, no driver (a cluster without NPUs, to try things)",
    )
    pod.add_argument(
        "--image-pull-secret",
        action="append",
        default=[],
        type=argument_type(check_name),
        metavar="NAME",
        help="a docker-registry Secret for pulling the image (repeatable)",
    )
    access = k8s.add_argument_group("access")
    access.add_argument(
        "--admin-key-secret",
        type=argument_type(check_name),
        metavar="SECRET",
        help="a Secret you create (data key admin-key) whose key opens the control plane (model repository, shared "
        "memory, logging, trace, config, statistics) to clients that send it; without it the control plane is "
        "closed to every client",
    )
    access.add_argument(
        "--network-policy",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a NetworkPolicy: inference ports from --allow-namespace, metrics from --monitoring-namespace, "
        "nothing else (default: on)",
    )
    access.add_argument(
        "--allow-namespace",
        action="append",
        default=[],
        type=argument_type(check_namespace),
        metavar="NS",
        help="a namespace whose pods may reach the inference ports (repeatable; default: the pods' own namespace)",
    )
    access.add_argument(
        "--monitoring-namespace",
        default=MONITORING_NAMESPACE,
        type=argument_type(check_namespace),
        metavar="NS",
        help="where Prometheus runs: may reach the metrics port (default: %(default)s)",
    )
    extras = k8s.add_argument_group("services, monitoring and KServe")
    extras.add_argument(
        "--headless-service",
        action="store_true",
        help="also NAME-headless (clusterIP None): gRPC clients balance over the pods with round_robin",
    )
    extras.add_argument(
        "--service-monitor", action="store_true", help="also a ServiceMonitor (Prometheus Operator)"
    )
    extras.add_argument(
        "--prometheus-release",
        type=argument_type(check_label_value),
        metavar="NAME",
        help="with --service-monitor: its release label, which kube-prometheus-stack's Prometheus selects by",
    )
    extras.add_argument(
        "--prometheus-url",
        default=DEFAULT_PROMETHEUS_URL,
        type=argument_type(prometheus_url),
        metavar="URL",
        help="where the Prometheus adapter queries Prometheus (default: %(default)s)",
    )
    extras.add_argument(
        "--kserve", action="store_true", help="also kserve/: a ServingRuntime and an InferenceService"
    )
    extras.add_argument(
        "--storage-uri",
        metavar="URI",
        help="with --kserve: where KServe fetches the repository (default: pvc://PVC/model_repository)",
    )
    k8s.set_defaults(func=run_k8s, parser=k8s)


def run_k8s(args: argparse.Namespace) -> int:
    from ge_plugin.deploy.render import render_k8s, write_files
    from ge_plugin.errors import DeployError, SpecError
    from ge_plugin.spec import load_specs

    try:
        specs = load_specs(args.specs)
        files = render_k8s(specs, _options(args, specs))
    except SpecError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 1
    except DeployError as exc:
        print(f"ge-plugin deploy k8s: {exc}", file=sys.stderr)
        return 1
    done = write_files(files, args.output, [spec.name for spec in specs])
    for path in done.written:
        print(f"rendered {path}")
    for path in done.removed:
        print(f"removed {path} (rendered before, not by this render)")
    for path in done.kept:
        print(
            f"kept {path}: rendered before and not by this render, but changed since; delete it if it is stale"
        )
    return 0


def _options(args: argparse.Namespace, specs: Sequence[ModelSpec]) -> K8sOptions:
    """K8sOptions from the command line; a usage error (exit 2) when options disagree (--memory not above
    --shm-size...) or a name derived from the specs is not a DNS label."""
    from ge_plugin.deploy.k8s import default_name
    from ge_plugin.deploy.render import K8sOptions

    name = args.name or default_name(specs)
    try:
        return K8sOptions(
            name=name,
            image=args.image,
            models_claim=args.models_claim
            or (None if args.models_image or args.models_uri else f"{name}-models"),
            models_uri=args.models_uri,
            models_secret=args.models_secret,
            models_access_mode=args.models_access_mode,
            models_image=args.models_image,
            models_size=args.models_size,
            tmp_size=args.tmp_size,
            admin_key_secret=args.admin_key_secret,
            network_policy=args.network_policy,
            allow_namespaces=tuple(args.allow_namespace),
            monitoring_namespace=args.monitoring_namespace,
            scheduler_name=args.scheduler_name,
            simulator=args.simulator,
            min_replicas=args.min_replicas,
            max_replicas=args.max_replicas,
            target_queue_us=round(args.target_queue_ms * 1000),
            shm_size=args.shm_size,
            cpu=args.cpu,
            cpu_limit=args.cpu_limit,
            memory=args.memory,
            namespace=args.namespace,
            labels=tuple(args.label),
            run_as=args.run_as,
            driver=args.driver,
            npu_smi=args.npu_smi,
            runtime_class=args.runtime_class,
            node_selector=tuple(args.node_selector),
            tolerations=tuple(args.toleration),
            image_pull_secrets=tuple(args.image_pull_secret),
            prometheus_release=args.prometheus_release,
            prometheus_url=args.prometheus_url,
            headless_service=args.headless_service,
            npu_resource=args.npu_resource,
            service_monitor=args.service_monitor,
            kserve=args.kserve,
            storage_uri=args.storage_uri,
        )
    except ValueError as exc:  # options that disagree, or a derived name too long for a DNS label
        parser: argparse.ArgumentParser = args.parser  # typed: error() does not return
        hint = " (give --name or --models-claim)" if "DNS label" in str(exc) else ""
        parser.error(f"{exc}{hint}")
