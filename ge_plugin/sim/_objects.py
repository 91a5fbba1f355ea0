"""The host-side structures pyACL hands out as integer handles: data buffers, datasets, descriptions.

Each kind lives in its own handle table, so a dataset handle passed where a data buffer is expected is an
error that names both, instead of the memory corruption it would be on real hardware.
"""

from __future__ import annotations

from typing import Any

from ge_plugin import acl_constants as C
from ge_plugin.sim._fail import Fail
from ge_plugin.sim._state import SIM


class DataBuffer:
    """``aclDataBuffer``: a pointer and a size; it does not own the memory. ``checked`` is the sanitizer's
    last verdict on it, ``(addr, size, device, allocation)``, so an unchanged buffer over live memory is not
    looked up again at every execute."""

    __slots__ = ("addr", "checked", "handle", "size")

    def __init__(self, handle: int, addr: int, size: int):
        self.handle = handle
        self.addr = addr
        self.size = size
        self.checked: tuple[int, int, int, Any] | None = None


class Dataset:
    """``aclmdlDataset``: data buffers by reference, so update_data_buffer is seen by every dataset; and the
    tensor descriptions set on its entries, which it owns (set_dataset_tensor_desc copies the caller's)."""

    __slots__ = ("buffers", "descs", "handle")

    def __init__(self, handle: int):
        self.handle = handle
        self.buffers: list[DataBuffer] = []
        self.descs: dict[int, TensorDesc] = {}


class TensorDesc:
    __slots__ = ("dims", "dtype", "format", "handle", "name")

    def __init__(self, handle: int, dtype: int, dims: list[int], fmt: int):
        self.handle = handle
        self.dtype = dtype
        self.dims = dims
        self.format = fmt
        self.name = ""


class ModelDesc:
    """``aclmdlDesc``: empty until get_desc fills it from a loaded model (or get_desc_from_file)."""

    __slots__ = ("handle", "info", "model_id")

    def __init__(self, handle: int):
        self.handle = handle
        self.info: Any = None
        self.model_id: int | None = None


_KINDS = {
    "buffers": "data buffer",
    "datasets": "dataset",
    "descs": "model description",
    "tensor_descs": "tensor description",
    "events": "event",
}


def lookup(table: str, handle: int, what: str) -> Any:
    """The live object ``handle`` of ``table``; Fail(ACL_ERROR_INVALID_PARAM) naming what it really is."""
    obj = getattr(SIM, table).get(handle)
    if obj is not None:
        return obj
    if handle == 0:
        raise Fail(C.ACL_ERROR_INVALID_PARAM, f"{what} is a null handle")
    for other, name in _KINDS.items():
        if other != table and handle in getattr(SIM, other):
            raise Fail(
                C.ACL_ERROR_INVALID_PARAM,
                f"{what} 0x{handle:x} is a {name} handle, not {_article(_KINDS[table])}",
            )
    raise Fail(
        C.ACL_ERROR_INVALID_PARAM,
        f"{what} 0x{handle:x} is not a live {_KINDS[table]} (destroyed, or never created)",
    )


def _article(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"
