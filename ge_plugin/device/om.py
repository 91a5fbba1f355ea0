"""An offline (.om) model loaded with pyACL: its I/O description, its gears, and its datasets.

Gear models (ATC ``--dynamic_batch_size`` / ``--dynamic_image_size`` / ``--dynamic_dims``) carry the extra
input ``ascend_mbatch_shape_data``; it is kept apart from the data inputs here, so that callers see the
model's real inputs and a gear is chosen through :meth:`OmModel.set_gear`. A model with -1 dims and no such
input is a shape-range (dynamic-shape) model, built from ``--input_shape`` ranges: ``mode`` says "range".
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import attrs

from ge_plugin import acl_constants as C
from ge_plugin.atc.simom import read_header
from ge_plugin.device.aclapi import acl
from ge_plugin.device.context import Context
from ge_plugin.device.runtime import check
from ge_plugin.errors import ModelFileError
from ge_plugin.gears import GearSet


@attrs.frozen
class TensorInfo:
    """One model input or output as the OM describes it; ``size`` is for the largest gear."""

    index: int
    name: str
    dims: tuple[int, ...]
    acl_dtype: int
    format: int
    size: int
    #: an input with a static AIPP in front of it (ATC --insert_op_conf): it takes images, not the graph's tensor
    aipp: bool = False

    @property
    def dynamic(self) -> tuple[int, ...]:
        """Positions of the -1 dims."""
        return tuple(i for i, d in enumerate(self.dims) if d < 0)


class OmModel:
    """``acl.mdl.load_from_file`` in ``context``; ``close()`` unloads and destroys the description."""

    def __init__(self, path: str | os.PathLike[str], context: Context):
        self.path = os.fspath(path)
        if not os.path.isfile(self.path):
            raise ModelFileError(f"OM file not found: {self.path}")
        context.make_current()
        self.context = context
        model_id, ret = acl().mdl.load_from_file(self.path)
        check(ret, f"acl.mdl.load_from_file({self.path!r})")
        self.model_id = model_id
        self.desc = 0
        try:
            self.desc = acl().mdl.create_desc()
            if not self.desc:
                check(C.ACL_ERROR_BAD_ALLOC, "acl.mdl.create_desc")
            check(acl().mdl.get_desc(self.desc, model_id), "acl.mdl.get_desc")
            self._describe()
        except BaseException:
            self.close()
            raise

    def _describe(self) -> None:
        mdl = acl().mdl
        index, ret = mdl.get_input_index_by_name(self.desc, C.ACL_DYNAMIC_TENSOR_NAME)
        self.mbatch_index: int | None = index if ret == C.ACL_SUCCESS else None
        self.mbatch_size = (
            mdl.get_input_size_by_index(self.desc, index) if self.mbatch_index is not None else 0
        )
        n_in = mdl.get_num_inputs(self.desc)
        n_out = mdl.get_num_outputs(self.desc)
        self.num_inputs = n_in  # including ascend_mbatch_shape_data
        self.inputs = tuple(self._info(i, output=False) for i in range(n_in) if i != self.mbatch_index)
        self.outputs = tuple(self._info(i, output=True) for i in range(n_out))
        batch, ret = mdl.get_dynamic_batch(self.desc)
        check(ret, "acl.mdl.get_dynamic_batch")
        hw: dict[str, Any] | None = None
        dims: list[dict[str, Any]] | None = None
        if self.mbatch_index is not None and not batch.get("batchCount", 0):
            hw, ret = mdl.get_dynamic_hw(self.desc, -1)
            check(ret, "acl.mdl.get_dynamic_hw")
            if not hw.get("hwCount", 0):
                count, ret = mdl.get_input_dynamic_gear_count(self.desc, -1)
                check(ret, "acl.mdl.get_input_dynamic_gear_count")
                if count:
                    dims, ret = mdl.get_input_dynamic_dims(self.desc, -1, count)
                    check(ret, "acl.mdl.get_input_dynamic_dims")
        try:
            #: the gears the OM was compiled with, as pyACL reports them
            self.gear_set = GearSet.from_acl(
                batch, hw, dims, [(info.name, info.dims) for info in self.inputs]
            )
        except ValueError as exc:
            raise ModelFileError(f"{self.path}: {exc}") from None
        #: ``"batch"``, ``"hw"``, ``"dims"``, ``"static"`` or ``"range"``: how ATC compiled the OM's shapes
        self.mode = self._mode()
        #: selects a gear in a dataset: what ``Gear.setting`` holds is this mode's argument
        setters: dict[str, Callable[[Dataset, Any], None]] = {
            "batch": self.set_batch,
            "hw": self.set_hw,
            "dims": self.set_dims,
        }
        self.set_gear: Callable[[Dataset, Any], None] = setters.get(self.mode, self._no_gears)

    def _mode(self) -> str:
        if self.gear_set.kind == "static" and any(d < 0 for info in self.inputs for d in info.dims):
            return "range"  # --input_shape ranges: a dynamic-shape model, no gears
        return self.gear_set.kind  # batch, hw, dims (the gear flag ATC was given) or static

    def _info(self, i: int, *, output: bool) -> TensorInfo:
        mdl = acl().mdl
        kind = "output" if output else "input"
        dims, ret = (mdl.get_output_dims if output else mdl.get_input_dims)(self.desc, i)
        check(ret, f"acl.mdl.get_{kind}_dims({i})")
        name = (mdl.get_output_name_by_index if output else mdl.get_input_name_by_index)(self.desc, i)
        return TensorInfo(
            index=i,
            name=name,
            dims=tuple(int(d) for d in dims["dims"][: dims["dimCount"]]),
            acl_dtype=(mdl.get_output_data_type if output else mdl.get_input_data_type)(self.desc, i),
            format=(mdl.get_output_format if output else mdl.get_input_format)(self.desc, i),
            size=(mdl.get_output_size_by_index if output else mdl.get_input_size_by_index)(self.desc, i),
            aipp=not output and self._static_aipp(i),
        )

    def _static_aipp(self, i: int) -> bool:
        kind, _, ret = acl().mdl.get_aipp_type(self.model_id, i)
        check(ret, f"acl.mdl.get_aipp_type({i})")
        return bool(kind == C.ACL_DATA_WITH_STATIC_AIPP)

    @property
    def precision(self) -> str | None:
        """How the OM computes floats ("fp32", "fp16", "bf16"), or None where the file does not say.

        pyACL has no call for it; a sim OM records it in its header (ATC's --precision_mode). A real OM
        keeps its build options in a binary model definition that ge-plugin does not parse, so there the
        config's ``precision`` cannot be checked."""
        header = read_header(self.path)
        return None if header is None else header.get("precision")

    @property
    def graph_dtypes(self) -> tuple[int, ...] | None:
        """The aclDataTypes of the source graph's inputs and outputs (what a precision mode could have
        narrowed), or None where the file does not say: a sim OM records them, a real OM does not."""
        header = read_header(self.path)
        if header is None:
            return None
        tensors = [*header.get("inputs", ()), *header.get("outputs", ())]
        return tuple(int(t.get("graph_dtype", t["dtype"])) for t in tensors)

    def set_batch(self, dataset: Dataset, batch: int) -> None:
        ret = acl().mdl.set_dynamic_batch_size(self.model_id, dataset.handle, self.mbatch_index, batch)
        if ret:
            check(ret, f"acl.mdl.set_dynamic_batch_size({batch})")

    def set_hw(self, dataset: Dataset, hw: tuple[int, int]) -> None:
        height, width = hw
        ret = acl().mdl.set_dynamic_hw_size(self.model_id, dataset.handle, self.mbatch_index, height, width)
        if ret:
            check(ret, f"acl.mdl.set_dynamic_hw_size({height}, {width})")

    def set_dims(self, dataset: Dataset, dims: tuple[int, ...]) -> None:
        gear = {"dimCount": len(dims), "name": "", "dims": list(dims)}
        ret = acl().mdl.set_input_dynamic_dims(self.model_id, dataset.handle, self.mbatch_index, gear)
        if ret:
            check(ret, f"acl.mdl.set_input_dynamic_dims({list(dims)})")

    def _no_gears(self, dataset: Dataset, setting: object) -> None:
        raise ModelFileError(f"{self.path}: a {self.mode} OM has no gear to select (asked for {setting!r})")

    def cur_output_dims(self, index: int) -> tuple[int, ...]:
        dims, ret = acl().mdl.get_cur_output_dims(self.desc, index)
        check(ret, f"acl.mdl.get_cur_output_dims({index})")
        return tuple(int(d) for d in dims["dims"][: dims["dimCount"]])

    def execute_async(self, inputs: Dataset, outputs: Dataset, stream_handle: int) -> None:
        ret = acl().mdl.execute_async(self.model_id, inputs.handle, outputs.handle, stream_handle)
        check(ret, "acl.mdl.execute_async")

    def close(self) -> None:
        """unload, then destroy_desc (after the caller freed its datasets and buffers). Idempotent."""
        if self.model_id is None:
            return
        self.context.make_current()
        model_id, self.model_id = self.model_id, None
        desc, self.desc = self.desc, 0
        try:
            check(acl().mdl.unload(model_id), "acl.mdl.unload")
        finally:
            if desc:
                check(acl().mdl.destroy_desc(desc), "acl.mdl.destroy_desc")


class Dataset:
    """``acl.mdl.create_dataset`` holding one data buffer per (ptr, size), in model index order."""

    def __init__(self, buffers: list[tuple[int, int]]):
        mdl = acl().mdl
        self.handle = mdl.create_dataset()
        if not self.handle:
            check(C.ACL_ERROR_BAD_ALLOC, "acl.mdl.create_dataset")
        self.data_buffers: list[int] = []
        try:
            for ptr, size in buffers:
                buf = acl().create_data_buffer(ptr, size)
                if not buf:
                    check(C.ACL_ERROR_BAD_ALLOC, "acl.create_data_buffer")
                self.data_buffers.append(buf)
                _, ret = mdl.add_dataset_buffer(self.handle, buf)
                check(ret, "acl.mdl.add_dataset_buffer")
        except BaseException:
            self.close()
            raise

    def point(self, index: int, ptr: int, size: int) -> None:
        """Make buffer ``index`` describe ``size`` bytes at ``ptr`` (``acl.update_data_buffer``): a view into
        memory that stays where it is, such as the part of a KV cache one execute reads."""
        check(acl().update_data_buffer(self.data_buffers[index], ptr, size), "acl.update_data_buffer")

    def close(self) -> None:
        """destroy every data buffer, then the dataset (destroy_dataset does not free them). Idempotent."""
        buffers, self.data_buffers = self.data_buffers, []
        for buf in buffers:
            check(acl().destroy_data_buffer(buf), "acl.destroy_data_buffer")
        if self.handle:
            handle, self.handle = self.handle, 0
            check(acl().mdl.destroy_dataset(handle), "acl.mdl.destroy_dataset")
