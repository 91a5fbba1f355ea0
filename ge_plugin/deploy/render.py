"""The files of ``ge-plugin deploy k8s``.

``render_k8s`` returns every file as data (file name -> object, or text for the Dockerfile) so tests can
validate each object against its schema; ``write_files`` writes them and removes the files of a previous
render that this one no longer makes. Output layout:

- ``kustomization.yaml``: the kustomize base (``kubectl apply -k DIR``) listing the core objects:
  ``deployment.yaml``, ``service.yaml``, ``hpa.yaml``, ``pdb.yaml``, ``networkpolicy.yaml`` (and
  ``service-headless.yaml``, ``servicemonitor.yaml`` when asked);
- ``prometheus-adapter/values.yaml``: Helm values for the adapter that serves the HPA's metric;
- ``kserve/``: ``servingruntime.yaml``, ``inferenceservice.yaml``, ``hpa.yaml``, ``pdb.yaml`` when asked (apply
  instead of the above);
- ``Dockerfile``: the serving image; ``models.Dockerfile`` with a models image.

docs/deploy.md walks from specs to a running Deployment.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Union

import attrs
import yaml

from ge_plugin._files import write_atomic
from ge_plugin.deploy import k8s, sizing
from ge_plugin.deploy.dockerfile import dockerfile, models_dockerfile
from ge_plugin.deploy.k8s import K8sOptions
from ge_plugin.deploy.npu import npu_request
from ge_plugin.errors import DeployError
from ge_plugin.spec.model import ModelSpec

__all__ = ["K8sOptions", "Written", "render_k8s", "to_text", "write_files"]

#: what a previous render wrote (name -> sha256), so a re-render removes exactly its own stale files
MANIFEST = ".ge-plugin-rendered.json"


class _Dumper(yaml.SafeDumper):
    """Writes every object in full: kubectl reads anchors, but people and some tools do not."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


#: one line on top of every YAML file
HEADER = (
    "# Rendered by `ge-plugin deploy k8s` for {models}; render again rather than edit (docs/deploy.md).\n"
)


def render_k8s(specs: Sequence[ModelSpec], options: K8sOptions) -> dict[str, Union[dict[str, Any], str]]:
    """File name -> object (or text) for one Deployment serving every model of ``specs``.

    SpecError (file:line) when the specs cannot share a pod: different chips, device ids that are not
    ``0..N-1``, a chip with no known device plugin resource and no ``npu_resource``.
    """
    npu = npu_request(specs, options.npu_resource)
    if options.shm_size is None:
        try:
            options = attrs.evolve(options, shm_size=sizing.shm_size(specs))
        except ValueError as exc:
            raise DeployError(f"{exc} (sized from the specs' largest tensors: docs/deploy.md)") from None
    if (
        options.kserve
        and options.storage_uri is None
        and options.models_claim is None
        and options.models_uri is None
    ):
        raise DeployError(
            "KServe fetches the repository from a storage URI, the model claim or the object store"
        )
    core: dict[str, dict[str, Any]] = {
        "deployment.yaml": k8s.deployment(specs, npu, options),
        "service.yaml": k8s.service(options),
        "hpa.yaml": k8s.horizontal_pod_autoscaler(options),
        "pdb.yaml": k8s.pod_disruption_budget(options),
    }
    if options.network_policy:
        core["networkpolicy.yaml"] = k8s.network_policy(options)
    if options.headless_service:
        core["service-headless.yaml"] = k8s.headless_service(options)
    if options.service_monitor:
        core["servicemonitor.yaml"] = k8s.service_monitor(options)
    files: dict[str, Union[dict[str, Any], str]] = {
        "kustomization.yaml": k8s.kustomization(list(core)),
        **core,
    }
    files["prometheus-adapter/values.yaml"] = k8s.prometheus_adapter_rules(options)
    if options.kserve:
        uri = options.storage_uri or options.models_uri or f"pvc://{options.models_claim}/{k8s.CLAIM_SUBPATH}"
        runtime, service = k8s.kserve_objects(specs, npu, options, storage_uri=uri)
        files["kserve/servingruntime.yaml"] = runtime
        files["kserve/inferenceservice.yaml"] = service
        files["kserve/hpa.yaml"], files["kserve/pdb.yaml"] = k8s.kserve_scaling(options)
    files["Dockerfile"] = dockerfile(uid=options.run_as[0], gid=options.run_as[1])
    if options.models_image is not None:
        files["models.Dockerfile"] = models_dockerfile()
    return files


def to_text(content: Union[dict[str, Any], str], models: Sequence[str]) -> str:
    """A file's text: the Dockerfile as is; an object as YAML, in the order it was built, under HEADER."""
    if isinstance(content, str):
        return content
    header = HEADER.format(models=", ".join(models))
    return header + yaml.dump(content, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=110)


@attrs.frozen
class Written:
    """What ``write_files`` did: every file of this render, the stale files of the previous one it removed,
    and stale files it kept because they changed since it wrote them."""

    written: list[Path]
    removed: list[Path]
    kept: list[Path]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _previous(directory: Path) -> dict[str, str]:
    """The previous render's manifest (name -> sha256); empty when there is none or it is unreadable."""
    try:
        found = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = found.get("files") if isinstance(found, dict) else None
    return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}


def write_files(
    files: dict[str, Union[dict[str, Any], str]],
    directory: Union[str, os.PathLike[str]],
    models: Sequence[str],
) -> Written:
    """Write every file under ``directory`` (created if missing; a file is rewritten only when it changes),
    then remove what the previous render wrote and this one does not: only files listed in its manifest and
    unchanged since (an edited one is kept and reported), never anything else in the folder."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise DeployError(f"{directory} is not a directory")
    previous = _previous(directory)
    written, digests = [], {}
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
        digests[name] = _digest(data)
    removed, kept = [], []
    for name, digest in sorted(previous.items()):
        path = directory / name
        if name in files or Path(name).is_absolute() or ".." in Path(name).parts or not path.is_file():
            continue
        try:
            if _digest(path.read_bytes()) != digest:
                kept.append(path)
                continue
            path.unlink()
        except OSError as exc:
            raise DeployError(f"cannot remove the stale {path}: {exc.strerror or exc}") from None
        removed.append(path)
        parent = path.parent
        if parent != directory and not any(parent.iterdir()):
            parent.rmdir()
    manifest = {
        "files": {
            **{str(p.relative_to(directory)): previous[str(p.relative_to(directory))] for p in kept},
            **digests,
        }
    }
    try:
        write_atomic(directory / MANIFEST, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())
    except OSError as exc:
        raise DeployError(f"cannot write {directory / MANIFEST}: {exc.strerror or exc}") from None
    return Written(written=written, removed=removed, kept=kept)
