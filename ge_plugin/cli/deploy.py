"""``ge-plugin deploy k8s SPEC_OR_DIR... -o DIR``: Kubernetes objects serving the specs' models."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ge_plugin import __version__
from ge_plugin.cli._common import add_command

if TYPE_CHECKING:
    from ge_plugin.deploy import K8sOptions
    from ge_plugin.spec.model import ModelSpec

EXAMPLES = """
  ge-plugin deploy k8s specs/llama.yaml -o deploy/llama
  ge-plugin deploy k8s my-specs/ -o deploy/all --name ge-serving --image registry.example/ge-plugin:0.1.0
  ge-plugin deploy k8s specs/llama.yaml -o deploy/llama --max-replicas 8 --target-queue-ms 5
  ge-plugin deploy k8s specs/llama.yaml -o deploy/llama --service-monitor --kserve
  kubectl apply -f deploy/llama        # Deployment, Service, HorizontalPodAutoscaler
"""


def _type(check):
    def convert(text: str):
        try:
            return check(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"must be >= 1, got {value}")
    return value


def register(subparsers) -> None:
    from ge_plugin.deploy.k8s import check_name
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
            "device plugin (from soc_version and the devices), the CANN driver mounted from the host, the model\n"
            "repository from a PersistentVolumeClaim, readiness on each model's /v2/models/NAME/ready, liveness on\n"
            "/v2/health/live; a Service (HTTP, gRPC, metrics); a HorizontalPodAutoscaler on Triton's mean queue\n"
            "time per request, served by the Prometheus adapter (prometheus-adapter/values.yaml); optionally a\n"
            "ServiceMonitor and a KServe ServingRuntime + InferenceService; a Dockerfile for the image.\n"
            "Spec problems are reported as FILE:LINE: $.path: message (exit 1). See docs/deploy.md."
        ),
        examples=EXAMPLES,
    )
    k8s.add_argument("specs", nargs="+", metavar="SPEC_OR_DIR", help="spec files or folders of specs")
    k8s.add_argument("-o", "--output", type=Path, required=True, metavar="DIR", help="folder to write to")
    k8s.add_argument(
        "--name",
        type=_type(check_name),
        help="Deployment, Service and HPA name (default: the model's name as a DNS label; ge-plugin for several)",
    )
    k8s.add_argument(
        "--image",
        default=f"ge-plugin:{__version__}",
        help="serving image, built from DIR/Dockerfile (default: %(default)s)",
    )
    k8s.add_argument(
        "--models-claim",
        type=_type(check_name),
        metavar="PVC",
        help="PersistentVolumeClaim holding model_repository/ (default: NAME-models)",
    )
    k8s.add_argument("--min-replicas", type=_type(_positive), default=1, metavar="N", help="(default: 1)")
    k8s.add_argument("--max-replicas", type=_type(_positive), default=4, metavar="N", help="(default: 4)")
    k8s.add_argument(
        "--target-queue-ms",
        type=float,
        default=20.0,
        metavar="MS",
        help="the HPA adds pods while requests wait longer than this in Triton's queue, on average (default: 20)",
    )
    k8s.add_argument(
        "--shm-size",
        default="1Gi",
        metavar="QUANTITY",
        help="/dev/shm for Triton's Python backend (default: 1Gi)",
    )
    k8s.add_argument(
        "--npu-resource",
        type=_type(check_resource_name),
        metavar="NAME",
        help="extended resource instead of the one soc_version implies (e.g. huawei.com/Ascend910-4c, a vNPU)",
    )
    k8s.add_argument(
        "--service-monitor", action="store_true", help="also a ServiceMonitor (Prometheus Operator)"
    )
    k8s.add_argument(
        "--kserve", action="store_true", help="also kserve/: a ServingRuntime and an InferenceService"
    )
    k8s.add_argument(
        "--storage-uri",
        metavar="URI",
        help="with --kserve: where KServe fetches the repository (default: pvc://PVC/model_repository)",
    )
    k8s.set_defaults(func=run_k8s, parser=k8s)


def run_k8s(args: argparse.Namespace) -> int:
    from ge_plugin.deploy import render_k8s, write_files
    from ge_plugin.errors import SpecError
    from ge_plugin.spec import load_specs

    if args.storage_uri is not None and not args.kserve:
        args.parser.error("--storage-uri needs --kserve")
    if args.min_replicas > args.max_replicas:
        args.parser.error(
            f"--min-replicas {args.min_replicas} is more than --max-replicas {args.max_replicas}"
        )
    if not args.target_queue_ms > 0:
        args.parser.error(f"--target-queue-ms must be positive, got {args.target_queue_ms}")
    try:
        specs = load_specs(args.specs)
        files = render_k8s(
            specs,
            _options(args, specs),
            npu_resource=args.npu_resource,
            service_monitor=args.service_monitor,
            kserve=args.kserve,
            storage_uri=args.storage_uri,
        )
    except SpecError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 1
    for path in write_files(files, args.output, [spec.name for spec in specs]):
        print(f"rendered {path}")
    return 0


def _options(args: argparse.Namespace, specs: Sequence[ModelSpec]) -> K8sOptions:
    """K8sOptions from the command line; a usage error (exit 2) when a name derived from the specs is not a
    DNS label."""
    from ge_plugin.deploy import K8sOptions
    from ge_plugin.deploy.k8s import default_name

    name = args.name or default_name(specs)
    try:
        return K8sOptions(
            name=name,
            image=args.image,
            models_claim=args.models_claim or f"{name}-models",
            min_replicas=args.min_replicas,
            max_replicas=args.max_replicas,
            target_queue_us=max(1, round(args.target_queue_ms * 1000)),
            shm_size=args.shm_size,
        )
    except ValueError as exc:  # a derived name too long for a DNS label
        parser: argparse.ArgumentParser = args.parser  # typed: error() does not return
        parser.error(f"{exc} (give --name or --models-claim)")
