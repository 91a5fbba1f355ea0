"""From specs to a cluster: ``ge-plugin deploy k8s`` renders the objects that serve the specs' models.

``render_k8s`` returns every file as data (file name -> object, or text for the Dockerfile) so tests can
validate each object against the Kubernetes OpenAPI schemas; ``write_files`` writes them. Output layout,
chosen so that ``kubectl apply -f DIR`` applies exactly the core objects:

- ``deployment.yaml``, ``service.yaml``, ``hpa.yaml`` (and ``servicemonitor.yaml`` when asked);
- ``prometheus-adapter/values.yaml``: Helm values for the adapter that serves the HPA's metric;
- ``kserve/servingruntime.yaml``, ``kserve/inferenceservice.yaml`` when asked (apply instead of the above);
- ``Dockerfile``: the serving image.

docs/deploy.md walks from specs to a running Deployment.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Union

import yaml

from ge_plugin._files import write_atomic
from ge_plugin.deploy import k8s
from ge_plugin.deploy.dockerfile import dockerfile
from ge_plugin.deploy.k8s import K8sOptions
from ge_plugin.deploy.npu import npu_request
from ge_plugin.errors import DeployError
from ge_plugin.spec.model import ModelSpec

__all__ = ["K8sOptions", "render_k8s", "to_text", "write_files"]


class _Dumper(yaml.SafeDumper):
    """Writes every object in full: kubectl reads anchors, but people and some tools do not."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


#: one line on top of every YAML file
HEADER = (
    "# Rendered by `ge-plugin deploy k8s` for {models}; render again rather than edit (docs/deploy.md).\n"
)


def render_k8s(
    specs: Sequence[ModelSpec],
    options: K8sOptions,
    *,
    npu_resource: str | None = None,
    service_monitor: bool = False,
    kserve: bool = False,
    storage_uri: str | None = None,
) -> dict[str, Union[dict[str, Any], str]]:
    """File name -> object (or text) for one Deployment serving every model of ``specs``.

    SpecError (file:line) when the specs cannot share a pod: different chips, device ids that are not
    ``0..N-1``, a chip with no known device plugin resource and no ``npu_resource``.
    """
    npu = npu_request(specs, npu_resource)
    files: dict[str, Union[dict[str, Any], str]] = {
        "deployment.yaml": k8s.deployment(specs, npu, options),
        "service.yaml": k8s.service(options),
        "hpa.yaml": k8s.horizontal_pod_autoscaler(options),
    }
    if service_monitor:
        files["servicemonitor.yaml"] = k8s.service_monitor(options)
    files["prometheus-adapter/values.yaml"] = k8s.prometheus_adapter_rules()
    if kserve:
        uri = storage_uri or f"pvc://{options.models_claim}/{k8s.CLAIM_SUBPATH}"
        runtime, service = k8s.kserve_objects(npu, options, storage_uri=uri)
        files["kserve/servingruntime.yaml"] = runtime
        files["kserve/inferenceservice.yaml"] = service
    elif storage_uri is not None:
        raise DeployError("--storage-uri is where KServe fetches the repository from: it needs --kserve")
    files["Dockerfile"] = dockerfile()
    return files


def to_text(content: Union[dict[str, Any], str], models: Sequence[str]) -> str:
    """A file's text: the Dockerfile as is; an object as YAML, in the order it was built, under HEADER."""
    if isinstance(content, str):
        return content
    header = HEADER.format(models=", ".join(models))
    return header + yaml.dump(content, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=110)


def write_files(
    files: dict[str, Union[dict[str, Any], str]],
    directory: Union[str, os.PathLike[str]],
    models: Sequence[str],
) -> list[Path]:
    """Write every file under ``directory`` (created if missing); a file is rewritten only when it changes."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise DeployError(f"{directory} is not a directory")
    written = []
    for name, content in files.items():
        path = directory / name
        data = to_text(content, models).encode("utf-8")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not (path.is_file() and path.read_bytes() == data):
                write_atomic(path, data)
        except OSError as exc:
            raise DeployError(f"cannot write {path}: {exc.strerror or exc}") from None
        written.append(path)
    return written
