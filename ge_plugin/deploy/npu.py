"""Which NPUs a pod asks Kubernetes for: the Ascend device plugin's extended resource and how many.

The Ascend device plugin (MindCluster / MindX DL) advertises each node's NPUs as an extended resource named
after the chip family: ``huawei.com/Ascend910`` (910, 910B and 910 A3 chips alike), ``huawei.com/Ascend310P``,
``huawei.com/Ascend310B``, ``huawei.com/Ascend310``. The container sees the N NPUs it was given as devices
``0..N-1``, so the specs one pod serves must use exactly those device ids, and they must all be compiled for
the same chip (an OM runs only on the chip ATC compiled it for). Problems point at the spec line, like every
spec error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import attrs

from ge_plugin.errors import SpecError
from ge_plugin.spec.load import show_path
from ge_plugin.spec.marks import load_marked
from ge_plugin.spec.model import ModelSpec

#: (soc_version pattern, extended resource), first match wins: 310P and 310B before plain 310
DEVICE_PLUGIN_RESOURCES: tuple[tuple[str, str], ...] = (
    (r"Ascend910.*", "huawei.com/Ascend910"),
    (r"Ascend310P.*", "huawei.com/Ascend310P"),
    (r"Ascend310B.*", "huawei.com/Ascend310B"),
    (r"Ascend310", "huawei.com/Ascend310"),
)

#: what an extended resource name looks like (a domain-prefixed name, as Kubernetes requires)
_RESOURCE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


@attrs.frozen
class NpuRequest:
    """``resources.limits`` of the serving container: ``{resource: count}``."""

    resource: str
    count: int


def resource_for(soc_version: str) -> str | None:
    """The device plugin resource for a chip, or None for a chip this table does not know."""
    for pattern, resource in DEVICE_PLUGIN_RESOURCES:
        if re.fullmatch(pattern, soc_version):
            return resource
    return None


def check_resource_name(name: str) -> str:
    """``--npu-resource``: a domain-prefixed extended resource name, such as huawei.com/Ascend910-4c."""
    if not _RESOURCE_NAME.fullmatch(name):
        raise ValueError(
            f"an extended resource is DOMAIN/NAME, e.g. huawei.com/Ascend910 or huawei.com/Ascend910-4c, got {name!r}"
        )
    return name


def npu_request(specs: Sequence[ModelSpec], resource: str | None = None) -> NpuRequest:
    """What one pod serving ``specs`` asks for; SpecError at the spec lines that make it impossible.

    ``resource`` overrides the table (virtual NPUs such as ``huawei.com/Ascend910-4c``, or another device
    plugin's names); the device ids and the chip must still agree.
    """
    if not specs:
        raise SpecError(["no specs to deploy"])
    first = specs[0]
    used = sorted({device for spec in specs for device in spec.placement.devices})
    chosen = resource or resource_for(first.model.soc_version)
    problems = [*_mixed_chips(specs), *_devices_beyond(specs, used)]
    if chosen is None:
        known = ", ".join(resource for _pattern, resource in DEVICE_PLUGIN_RESOURCES)
        problems.append(
            _at(
                first,
                ("model", "soc_version"),
                f"no Ascend device plugin resource is known for {first.model.soc_version} (known: {known}); "
                "name it with --npu-resource",
            )
        )
    if problems or chosen is None:
        raise SpecError(problems)
    return NpuRequest(resource=chosen, count=len(used))


def _mixed_chips(specs: Sequence[ModelSpec]) -> list[str]:
    """One problem per spec compiled for another chip than the first: one pod runs on one kind of NPU."""
    first = specs[0]
    return [
        _at(
            spec,
            ("model", "soc_version"),
            f"one pod runs on one kind of NPU: {first.name} ({first.path}) is compiled for "
            f"{first.model.soc_version}, this model for {spec.model.soc_version}; deploy them "
            "separately (ge-plugin deploy k8s --name)",
        )
        for spec in specs[1:]
        if spec.model.soc_version != first.model.soc_version
    ]


def _devices_beyond(specs: Sequence[ModelSpec], used: list[int]) -> list[str]:
    """The device plugin numbers a pod's NPUs 0..count-1: one problem per spec placing a model beyond."""
    count = len(used)
    problems = []
    for spec in specs:
        beyond = [device for device in spec.placement.devices if device >= count]
        if beyond:
            problems.append(
                _at(
                    spec,
                    ("placement", "devices"),
                    f"in a pod the device plugin's {count} NPU{'s' if count != 1 else ''} "
                    f"{'are' if count != 1 else 'is'} devices {_range(count)}: device "
                    f"{', '.join(map(str, beyond))} would not exist (the models of this pod use "
                    f"{', '.join(map(str, used))}); number them from 0",
                )
            )
    return problems


def _range(count: int) -> str:
    return "0" if count == 1 else f"0..{count - 1}"


def _at(spec: ModelSpec, location: tuple[str, ...], message: str) -> str:
    """``file.yaml:LINE: $.path: message``, the form of every spec problem."""
    path = spec.path if spec.path is not None else Path("<spec>")
    try:
        line = load_marked(path.read_text(encoding="utf-8")).line_of(location)
    except OSError:
        line = 1
    return f"{path}:{line}: {show_path(location)}: {message}"
