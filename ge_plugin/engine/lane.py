"""A lane: one loaded copy of the model with its own stream, device buffers, pinned staging and datasets.

pyACL lets one model id run on one stream at a time, so each stream of an instance gets its own load of the
model. Everything a request needs is allocated here, once, for the largest gear: per request the engine only
fills pinned staging, queues copies and the execute, and reads the results back.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Union

import attrs
import numpy as np
import numpy.typing as npt

from ge_plugin import device
from ge_plugin import fastpath as fp
from ge_plugin.engine import shape_range
from ge_plugin.engine.gear_table import Gear
from ge_plugin.engine.modes import Lifetime
from ge_plugin.engine.preprocess import Images, LaneImages
from ge_plugin.engine.stats import BusyClock
from ge_plugin.errors import AclError, ConfigError, GePluginError

#: what a request gets back (its answer): its outputs by name, or the error that failed it (alone or with
#: its batch)
Answer = Union[dict[str, npt.NDArray[Any]], GePluginError]
#: where a request's outputs go: ``put(index, outcome)``
Put = Callable[[int, Answer], None]


@attrs.define
class InFlight:
    """What a lane is running: one chunk of requests (``fp.Chunk``: which requests, on which gear, what the
    launch copies) and how to answer them when it completes."""

    chunk: fp.Chunk
    #: ``put(index, outcome)`` for the chunk's requests (``chunk.indices``)
    put: Put
    #: how long its outputs stay valid (views of the lane's staging, or copies)
    lifetime: Lifetime
    #: submitted: finished by the completion thread rather than by the call that started it
    queued: bool = False
    #: per request of the chunk, its (put, index), once requests of later submits joined it (``absorb``)
    targets: list[tuple[Put, int]] | None = None
    #: perf_counter() at launch
    started: float = 0.0

    def deliver(self, member: int, outcome: Answer) -> None:
        """The outcome of the chunk's request at place ``member``."""
        if self.targets is None:
            self.put(self.chunk.indices[member], outcome)
        else:
            put, index = self.targets[member]
            put(index, outcome)

    def absorb(self, merged: fp.Chunk, other: InFlight) -> None:
        """Run ``merged`` (this job's chunk with ``other``'s requests after its own) and answer both."""
        if self.targets is None:
            self.targets = [(self.put, index) for index in self.chunk.indices]
        self.targets += [(other.put, index) for index in other.chunk.indices]
        self.chunk = merged


class Lane:
    """One stream and one load of the model. After a device failure the engine rebuilds it in place
    (``close()`` then ``open()``), so whoever holds the lane still holds a valid one."""

    def __init__(
        self,
        context: device.Context,
        om_path: str | os.PathLike[str],
        busy: BusyClock,
        images: Images | None = None,
    ):
        self.context = context
        self.om_path = om_path
        #: the engine's image input, when the model has one (its stage is made per open: ``self.dvpp``)
        self.images = images
        #: counts the time this lane has work on the device (launch until wait returns or the lane closes)
        self.busy = busy
        self._on_device = False
        #: what is in flight on this lane: the engine's business, kept across a rebuild (close + open)
        self.pending: InFlight | None = None
        #: requests' outputs holding views of out_host that the caller keeps: copied before reuse
        self.lent: list[dict[str, npt.NDArray[Any]]] = []
        self._reset_fields()
        try:
            self._open(om_path)
        except BaseException:
            self.close()
            raise
        self.usable = True

    def _reset_fields(self) -> None:
        self.stream: device.Stream | None = None
        self.model: device.OmModel | None = None
        self.in_dev: list[device.DeviceBuffer] = []
        self.in_host: list[device.PinnedBuffer] = []
        self.out_dev: list[device.DeviceBuffer] = []
        self.out_host: list[device.PinnedBuffer] = []
        #: the staging as the fast path reads and writes it: each pinned buffer's bytes, in OM order
        self.in_arrays: list[npt.NDArray[np.uint8]] = []
        self.out_arrays: list[npt.NDArray[np.uint8]] = []
        self.mbatch: device.DeviceBuffer | None = None
        #: the DVPP stage that writes the image input, and that input's position in the OM's inputs
        self.dvpp: LaneImages | None = None
        self.dvpp_at = -1
        self.inputs: device.Dataset | None = None
        self.outputs: device.Dataset | None = None
        #: False while closed: from close() until open() succeeds nothing may run on the lane
        self.usable = False

    def _open(self, om_path: str | os.PathLike[str]) -> None:
        self.stream = device.Stream(self.context)
        model = self.model = device.OmModel(om_path, self.context)
        if model.mode == "range":  # sizes of 0: refused before anything is allocated for it
            raise ConfigError(shape_range.refusal(model, os.fspath(om_path)))
        image_input = self.images.bind(model, os.fspath(om_path)) if self.images is not None else None
        for position, info in enumerate(model.inputs):
            if image_input is not None and info.index == image_input.om_index:
                images = device.dvpp.DvppBuffer(info.size)  # VPC writes it, the model reads it
                self.in_dev.append(images)
                device.zero(images)  # warm-up runs on what it holds
                self.in_host.append(device.PinnedBuffer(image_input.max_rows * 4))  # the tickets
                self.dvpp_at = position
            else:
                self.in_dev.append(device.DeviceBuffer(info.size))
                self.in_host.append(device.PinnedBuffer(info.size))
            self.in_host[-1].array[:] = 0  # fresh memory is not initialised; warm-up runs on zeros
        for info in model.outputs:
            self.out_dev.append(device.DeviceBuffer(info.size))
            self.out_host.append(device.PinnedBuffer(info.size))
        self.in_arrays = [host.array for host in self.in_host]
        self.out_arrays = [host.array for host in self.out_host]
        slots: list[tuple[int, int]] = [(0, 0)] * model.num_inputs
        for info, buf in zip(model.inputs, self.in_dev):
            slots[info.index] = (buf.ptr, buf.size)
        if model.mbatch_index is not None:
            self.mbatch = device.DeviceBuffer(model.mbatch_size)
            slots[model.mbatch_index] = (self.mbatch.ptr, self.mbatch.size)
        self.inputs = device.Dataset(slots)
        self.outputs = device.Dataset([(buf.ptr, buf.size) for buf in self.out_dev])
        if image_input is not None and self.images is not None:
            target = self.in_dev[self.dvpp_at]
            assert isinstance(target, device.dvpp.DvppBuffer)
            self.dvpp = LaneImages(self.images, image_input, target)

    def open(self) -> None:
        """Load again after ``close()``, keeping this object, so whoever holds the lane holds a valid one.
        On failure everything is freed again, ``usable`` stays False, and the failure is raised."""
        self._reset_fields()
        try:
            self._open(self.om_path)
        except BaseException:
            self.close()
            raise
        self.usable = True

    def _loaded(self) -> tuple[device.Stream, device.OmModel, device.Dataset, device.Dataset]:
        """The stream, model and datasets of an open lane; a closed lane runs nothing."""
        if self.stream is None or self.model is None or self.inputs is None or self.outputs is None:
            raise GePluginError("the lane is closed: it runs nothing until it is opened again")
        return self.stream, self.model, self.inputs, self.outputs

    @property
    def loaded_model(self) -> device.OmModel:
        return self._loaded()[1]

    @property
    def device_bytes(self) -> int:
        dvpp = self.dvpp.device_bytes if self.dvpp is not None else 0
        return (
            sum(b.size for b in (*self.in_dev, *self.out_dev))
            + (self.mbatch.size if self.mbatch else 0)
            + dvpp
        )

    @property
    def pinned_bytes(self) -> int:
        dvpp = self.dvpp.pinned_bytes if self.dvpp is not None else 0
        return sum(b.size for b in (*self.in_host, *self.out_host)) + dvpp

    def select(self, gear: Gear) -> None:
        """Tell the model which gear the next execute runs (writes ascend_mbatch_shape_data)."""
        if gear.setting is not None:
            _, model, inputs, _ = self._loaded()
            model.set_gear(inputs, gear.setting)

    def launch(self, gear: Gear, in_bytes: list[int], out_indices: list[int], out_bytes: list[int]) -> None:
        """Queue H2D of the staged inputs, the execute on ``gear``, and D2H of the wanted outputs."""
        stream, model, inputs, outputs = self._loaded()
        handle = stream.handle
        if not self._on_device:
            self._on_device = True
            self.busy.enter()
        dvpp = self.dvpp
        for position, (dev, host, nbytes) in enumerate(zip(self.in_dev, self.in_host, in_bytes)):
            if dvpp is not None and position == self.dvpp_at:  # images: written on the device, not copied
                dvpp.launch(host.array, nbytes, handle)
            else:
                device.copy_to_device_async(dev, host, nbytes, handle)
        if gear.setting is not None:
            model.set_gear(inputs, gear.setting)
        model.execute_async(inputs, outputs, handle)
        for j, nbytes in zip(out_indices, out_bytes):
            device.copy_to_host_async(self.out_host[j], self.out_dev[j], nbytes, handle)

    def wait(self) -> None:
        """Until the lane's work is done; with a DVPP stage, its images DVPP failed on are then in
        ``dvpp.failed`` (the stream error that reported them is not raised: only their requests fail)."""
        try:
            if self.dvpp is None:
                self._loaded()[0].synchronize()
                return
            try:
                self._loaded()[0].synchronize()
            except AclError as exc:
                self.dvpp.collect(exc)
            else:
                self.dvpp.collect(None)
        finally:
            self._off_device()

    def _off_device(self) -> None:
        if self._on_device:
            self._on_device = False
            self.busy.leave()

    def reclaim(self) -> None:
        """Turn every output still lent out as a view of this lane's staging into a copy of its own, before
        the staging is written again or freed."""
        for outputs in self.lent:
            for name, array in outputs.items():
                if not array.flags.owndata:  # a view of the staging (a copy made by scatter owns its data)
                    outputs[name] = array.copy()
        self.lent.clear()

    def close(self) -> None:
        """Free in the reference's order: data buffers and datasets, device memory, unload, pinned memory,
        then the stream. Runs every step even if one fails, and raises the first failure."""
        errors: list[BaseException] = []

        def step(fn: Callable[[], object]) -> None:
            try:
                fn()
            except BaseException as exc:  # keep tearing down; report the first failure
                errors.append(exc)

        if self.stream is not None and self.stream.handle:
            step(self.stream.synchronize)
        self._off_device()
        if self.lent:
            step(self.reclaim)
        self.in_arrays, self.out_arrays = [], []  # no view may outlive the pinned memory it shows
        if self.dvpp is not None:
            step(self.dvpp.close)
            self.dvpp = None
        for ds in (self.inputs, self.outputs):
            if ds is not None:
                step(ds.close)
        for device_buffer in (*self.in_dev, *self.out_dev, *([self.mbatch] if self.mbatch else [])):
            step(device_buffer.close)
        if self.model is not None:
            step(self.model.close)
        for pinned in (*self.in_host, *self.out_host):
            step(pinned.close)
        if self.stream is not None:
            step(self.stream.close)
        self.usable = False
        if errors:
            raise errors[0]
