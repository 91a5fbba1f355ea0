"""The device layer: the only code in ge-plugin's serving path that calls pyACL (real or simulated).

One exception, on purpose: the bench's naive baseline (``benchmarks/proof/models/naive_llama.py``) calls pyACL
directly, per request, because it stands for the hand-written code people put in a Python backend.
"""

from ge_plugin.device import dvpp
from ge_plugin.device.aclapi import acl, kind
from ge_plugin.device.buffers import (
    DeviceBuffer,
    PinnedBuffer,
    copy_async,
    copy_to_device_async,
    copy_to_host_async,
    memory_info,
    zero,
)
from ge_plugin.device.context import Context, Stream
from ge_plugin.device.om import Dataset, OmModel, TensorInfo
from ge_plugin.device.runtime import acquire, check, finalize, physical_id, release

__all__ = [
    "Context",
    "Dataset",
    "DeviceBuffer",
    "OmModel",
    "PinnedBuffer",
    "Stream",
    "TensorInfo",
    "acl",
    "acquire",
    "check",
    "copy_async",
    "copy_to_device_async",
    "copy_to_host_async",
    "dvpp",
    "finalize",
    "kind",
    "memory_info",
    "physical_id",
    "release",
    "zero",
]
