"""The KV cache: one device allocation per instance, ``slots`` sequences x the context, never seen by the host.

It is kept as ``2 x layers`` blocks, each ``[slots, heads, context, head_dim]``: the stacked form's
``[layers, 2, slots, heads, context, head_dim]`` in one buffer, the per-layer form's one buffer per
``past_key_values.N.key/.value``. Active sequences hold slots ``0..n-1`` (a leaving sequence's place is
taken by the last one, one slot's keys and values moved device to device), so the first ``b`` slots of
every block are what a batch of ``b`` reads:

- per-layer form: each past input points at the first ``b`` slots of its block, in place, no copy;
- stacked form: the OM wants ``[layers, 2, b, ...]``, which is the cache itself only when ``b`` is every
  slot; for a smaller gear the ``2 x layers`` prefixes are copied device to device into a staging buffer
  of that shape first (the price of the stacked layout; the per-layer form does not pay it).

New key/values (``present``) are copied device to device into the cache on the instance's stream: one copy
per layer, key or value, row and head (the cache's context axis sits between heads and head_dim).
"""

from __future__ import annotations

from ge_plugin import acl_constants as C
from ge_plugin.device import DeviceBuffer, copy_async, zero
from ge_plugin.generate.config import Layout

FLOAT = 4
D2D = C.ACL_MEMCPY_DEVICE_TO_DEVICE


class KvCache:
    """The cache's device memory and the device-to-device moves into and inside it."""

    def __init__(self, layout: Layout, stacked: bool):
        self.layout = layout
        self.stacked = stacked
        self.blocks = 2 * layout.layers
        self.block_bytes = layout.slots * layout.block * FLOAT
        self.slot_bytes = layout.block * FLOAT
        self.buffers: list[DeviceBuffer] = []
        self.staging: DeviceBuffer | None = None
        try:
            count = 1 if stacked else self.blocks
            size = self.block_bytes * (self.blocks if stacked else 1)
            for _ in range(count):
                self.buffers.append(DeviceBuffer(size))
                zero(self.buffers[-1])  # masked positions are multiplied by 0: they must be finite
            if stacked:
                self.staging = DeviceBuffer(size)
                zero(self.staging)
        except BaseException:
            self.close()
            raise

    @property
    def nbytes(self) -> int:
        return self.block_bytes * self.blocks

    def block(self, index: int) -> int:
        """Device address of block ``index`` (layer * 2 + kind)."""
        if self.stacked:
            return int(self.buffers[0].ptr) + index * self.block_bytes
        return int(self.buffers[index].ptr)

    def past(self, batch: int, first_slot: int, stream: int, *, fill: bool = True) -> list[tuple[int, int]]:
        """``(ptr, size)`` of each past input for ``batch`` rows starting at ``first_slot``, staging them
        (stacked form, fewer rows than slots) on ``stream``; ``fill=False`` when the mask hides every cached
        position (a prompt's first chunk), so the staging's stale but finite contents may stay."""
        rows = batch * self.slot_bytes
        if not self.stacked:
            return [(self.block(i) + first_slot * self.slot_bytes, rows) for i in range(self.blocks)]
        if batch == self.layout.slots:
            return [(self.buffers[0].ptr, self.nbytes)]
        assert self.staging is not None
        for i in range(self.blocks if fill else 0):
            src = self.block(i) + first_slot * self.slot_bytes
            copy_async(self.staging.ptr + i * rows, self.staging.size - i * rows, src, rows, D2D, stream)
        return [(self.staging.ptr, rows * self.blocks)]

    def write(
        self, present: list[int], batch: int, seq: int, row: int, slot: int, at: int, count: int, stream: int
    ) -> None:
        """Copy ``count`` new positions of ``row`` of a ``(batch, seq)`` present output into ``slot`` from
        position ``at``. ``present`` holds the present outputs' addresses (one, or one per block)."""
        layout = self.layout
        head_src = seq * layout.head_dim * FLOAT
        head_dst = layout.context * layout.head_dim * FLOAT
        nbytes = count * layout.head_dim * FLOAT
        per_block = batch * layout.heads * head_src
        for i in range(self.blocks):
            src = (present[0] + i * per_block if self.stacked else present[i]) + row * layout.heads * head_src
            dst = self.block(i) + slot * self.slot_bytes + at * layout.head_dim * FLOAT
            for _ in range(layout.heads):
                copy_async(dst, nbytes, src, nbytes, D2D, stream)
                src += head_src
                dst += head_dst

    def move(self, src_slot: int, dst_slot: int, stream: int) -> None:
        """Copy one slot's keys and values into another (a leaving sequence's place)."""
        for i in range(self.blocks):
            base = self.block(i)
            copy_async(
                base + dst_slot * self.slot_bytes,
                self.slot_bytes,
                base + src_slot * self.slot_bytes,
                self.slot_bytes,
                D2D,
                stream,
            )

    def close(self) -> None:
        buffers, self.buffers = self.buffers, []
        for buffer in buffers:
            buffer.close()
        if self.staging is not None:
            self.staging.close()
            self.staging = None
