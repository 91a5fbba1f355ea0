"""A hand-written pyACL lane for the simulator's benchmarks: what an engine's lane holds (one model, a device
buffer per input and output, pinned staging, a stream) and the five calls it makes per batch, written as a
pyACL program would, so that a benchmark times the simulator and nothing of ge-plugin."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ge_plugin.acl_constants import (
    ACL_DYNAMIC_TENSOR_NAME,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
)

H2D, D2H = ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST


def open_device(acl: Any) -> None:
    assert acl.init() == 0 and acl.rt.set_device(0) == 0


def close_device(acl: Any) -> None:
    assert acl.rt.reset_device(0) == 0 and acl.finalize() == 0


class PyAclLane:
    """The model at ``path`` loaded on device 0 (opened by the caller), with ``nbytes`` of pinned staging
    each way for its first input and last output, and a batch gear of ``batch`` rows."""

    def __init__(self, acl: Any, path: Path, nbytes: int, batch: int = 1):
        self.acl = acl
        self.stream, _ = acl.rt.create_stream()
        self.id, ret = acl.mdl.load_from_file(str(path))
        assert ret == 0, acl.get_recent_err_msg()
        self.desc = acl.mdl.create_desc()
        assert acl.mdl.get_desc(self.desc, self.id) == 0
        self.mbatch, _ = acl.mdl.get_input_index_by_name(self.desc, ACL_DYNAMIC_TENSOR_NAME)
        self.device: list[int] = []
        self.buffers: list[int] = []
        self.inputs = self._dataset(acl.mdl.get_num_inputs(self.desc), acl.mdl.get_input_size_by_index)
        self.outputs = self._dataset(acl.mdl.get_num_outputs(self.desc), acl.mdl.get_output_size_by_index)
        self.nbytes = nbytes
        self.batch = batch
        self.host_in, _ = acl.rt.malloc_host(nbytes)
        self.host_out, _ = acl.rt.malloc_host(nbytes)

    @property
    def dev_in(self) -> int:
        """The device buffer of the first input (the data; the gear's input comes after it)."""
        return self.device[0]

    @property
    def dev_out(self) -> int:
        """The device buffer of the last output."""
        return self.device[-1]

    def _dataset(self, count: int, size_of: Callable[[int, int], int]) -> int:
        acl = self.acl
        ds = acl.mdl.create_dataset()
        for i in range(count):
            size = size_of(self.desc, i)
            ptr, _ = acl.rt.malloc(size, 0)
            buf = acl.create_data_buffer(ptr, size)
            acl.mdl.add_dataset_buffer(ds, buf)
            self.device.append(ptr)
            self.buffers.append(buf)
        return ds

    def step(self) -> Callable[[], None]:
        """One batch as an engine runs it: H2D from pinned memory, the gear, execute, D2H, synchronize."""
        rt, mdl, stream, model, nbytes = self.acl.rt, self.acl.mdl, self.stream, self.id, self.nbytes
        inputs, outputs, mbatch, batch = self.inputs, self.outputs, self.mbatch, self.batch
        dev_in, dev_out = self.dev_in, self.dev_out
        host_in, host_out = self.host_in, self.host_out

        def step() -> None:
            rt.memcpy_async(dev_in, nbytes, host_in, nbytes, H2D, stream)
            mdl.set_dynamic_batch_size(model, inputs, mbatch, batch)
            mdl.execute_async(model, inputs, outputs, stream)
            rt.memcpy_async(host_out, nbytes, dev_out, nbytes, D2H, stream)
            rt.synchronize_stream(stream)

        return step

    def release(self) -> None:
        """Everything freed: a benchmark is a correct program too (no leak reported)."""
        acl = self.acl
        for buf in self.buffers:
            assert acl.destroy_data_buffer(buf) == 0
        for ptr in self.device:
            assert acl.rt.free(ptr) == 0
        assert acl.mdl.destroy_dataset(self.inputs) == 0 and acl.mdl.destroy_dataset(self.outputs) == 0
        assert acl.rt.free_host(self.host_in) == 0 and acl.rt.free_host(self.host_out) == 0
        assert acl.mdl.unload(self.id) == 0 and acl.mdl.destroy_desc(self.desc) == 0
        assert acl.rt.destroy_stream(self.stream) == 0
