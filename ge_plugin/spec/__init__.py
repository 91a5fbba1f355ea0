"""The spec language: one YAML file per model, checked in full before anything is rendered or compiled."""

from ge_plugin.spec.load import check_specs, load_spec, load_specs, spec_files
from ge_plugin.spec.model import (
    Batching,
    DimRef,
    InputDecl,
    ModelFiles,
    ModelSpec,
    OutputDecl,
    Placement,
    QueuePolicy,
    VersionFiles,
    VersionPolicy,
)

__all__ = [
    "Batching",
    "DimRef",
    "InputDecl",
    "ModelFiles",
    "ModelSpec",
    "OutputDecl",
    "Placement",
    "QueuePolicy",
    "VersionFiles",
    "VersionPolicy",
    "check_specs",
    "load_spec",
    "load_specs",
    "spec_files",
]
