"""Iteration-level batching over one OM on one stream: every step, one decode execute for every active
sequence, then up to ``prefill_tokens_per_step`` prompt tokens prefilled in chunks (at least one chunk): a
long prompt is prefilled over several steps while the others go on decoding, so no step stalls them for a
whole prompt; a sequence joins the decode batch at the step after its last chunk.

Per step the host sends ids, positions and masks and receives the logits rows it samples from; the keys
and values stay on the device (cache.py). Everything the loop touches is allocated when the Generator is
built: pinned and device buffers for each phase at its largest gear, datasets whose past entries are
pointed at the cache (``acl.update_data_buffer``) rather than rebuilt, so a step allocates nothing on the
device or in pinned memory.

The decode mask lives in pinned memory row by row (row = slot), ``[slots, context + 1]``: a step sets one
element per row (the position just cached) instead of writing whole rows. Prompt ids reach the pinned
staging through the fast path's ``gather`` (padding to the seq gear on the way), like every request tensor
of the forward-pass engine.

A Generator is driven by one thread at a time (loop.py runs it on its own thread); ``submit`` and ``cancel``
may be called from any thread.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ge_plugin import acl_constants as C
from ge_plugin.device import (
    Context,
    Dataset,
    DeviceBuffer,
    OmModel,
    PinnedBuffer,
    Stream,
    acquire,
    copy_async,
    release,
)
from ge_plugin.errors import RequestError, UnavailableError
from ge_plugin.generate.cache import FLOAT, KvCache
from ge_plugin.generate.config import GenerateConfig, Layout, describe, gear_dims
from ge_plugin.generate.sampling import SamplingParams, generator, sample
from ge_plugin.generate.stats import Stats

INT64 = 8
H2D = C.ACL_MEMCPY_HOST_TO_DEVICE
D2H = C.ACL_MEMCPY_DEVICE_TO_HOST

#: called from the loop with the ids new since the last call and the finish reason ("" while it runs)
Listener = Callable[["Sequence", list[int], str], None]


class Sequence:
    """One request's generation: its prompt, parameters, slot and what it produced so far."""

    def __init__(self, prompt: NDArray[np.int64], params: SamplingParams, listener: Listener, record: bool):
        self.prompt = prompt
        self.params = params
        self.listener = listener
        self.rng = generator(params)
        self.slot = -1
        self.cached = 0  # tokens whose keys/values are in the cache
        self.pending = -1  # the last sampled token, fed at the next decode step
        self.generated: list[int] = []
        self.finish = ""
        #: what failed, when ``finish`` is "error"
        self.error = ""
        self.cancelled = False
        self.submitted = time.monotonic()
        self.last_token_at = 0.0
        #: the logits row each generated token was chosen from (only when asked, for exactness tests)
        self.logits: list[NDArray[np.float32]] | None = [] if record else None


class _Phase:
    """Buffers and datasets of one kind of execute: decode (batch gears, s = 1) or prefill (b = 1, seq gears)."""

    def __init__(
        self, om: OmModel, config: GenerateConfig, layout: Layout, cache: KvCache, batch: int, seq: int
    ):
        self.batch, self.seq = batch, seq
        context = layout.context
        self.owned: list[Any] = []
        self.ids_host = self._pinned(batch * seq * INT64)
        self.mask_host = self._pinned(batch * (context + seq) * INT64)
        self.pos_host = self._pinned(batch * seq * INT64)
        self.logits_host = self._pinned(batch * layout.vocab * FLOAT)
        self.ids_dev = self._device(self.ids_host.size)
        self.mask_dev = self._device(self.mask_host.size)
        self.pos_dev = self._device(self.pos_host.size)
        self.logits_dev = self._device(batch * seq * layout.vocab * FLOAT)
        new = layout.heads * seq * layout.head_dim * FLOAT * batch
        if cache.stacked:
            self.present = [self._device(new * cache.blocks)]
        else:
            self.present = [self._device(new) for _ in range(cache.blocks)]
        self.ids = self.ids_host.array.view(np.int64)
        self.mask = self.mask_host.array.view(np.int64)
        self.pos = self.pos_host.array.view(np.int64)
        self.logits = self.logits_host.array.view(np.float32).reshape(batch, layout.vocab)
        self.mask[:] = 0
        self.pos[:] = 0
        self.ids[:] = 0
        by_name = {
            config.input_ids: self.ids_dev,
            config.attention_mask: self.mask_dev,
            config.position_ids: self.pos_dev,
        }
        entries: list[tuple[int, int]] = [(0, 0)] * om.num_inputs
        for info in om.inputs:
            buffer = by_name.get(info.name)
            if buffer is not None:
                entries[info.index] = (buffer.ptr, buffer.size)
            else:  # a past input: pointed at the cache before each execute
                entries[info.index] = (cache.block(0), cache.slot_bytes)
        index = {info.name: info.index for info in om.inputs}
        #: the past inputs' dataset indices, in the cache's block order
        self.past_index = [index[name] for name in config.past_names(layout.layers)]
        assert om.mbatch_index is not None
        self.mbatch = self._device(om.mbatch_size)
        entries[om.mbatch_index] = (self.mbatch.ptr, self.mbatch.size)
        present_names = config.present_names(layout.layers)
        out_entries: list[tuple[int, int]] = []
        for info in om.outputs:
            if info.name == config.logits:
                out_entries.append((self.logits_dev.ptr, self.logits_dev.size))
            else:
                buffer = self.present[0] if cache.stacked else self.present[present_names.index(info.name)]
                out_entries.append((buffer.ptr, buffer.size))
        self.inputs = Dataset(entries)
        self.owned.append(self.inputs)
        self.outputs = Dataset(out_entries)
        self.owned.append(self.outputs)

    def _pinned(self, size: int) -> PinnedBuffer:
        buffer = PinnedBuffer(size)
        self.owned.append(buffer)
        return buffer

    def _device(self, size: int) -> DeviceBuffer:
        buffer = DeviceBuffer(size)
        self.owned.append(buffer)
        return buffer

    def close(self) -> None:
        owned, self.owned = self.owned, []
        for thing in reversed(owned):
            thing.close()


class _Released:
    """Closing it gives back this Generator's share of pyACL (``device.acquire``)."""

    def close(self) -> None:
        release()


class Generator:
    """One OM, its KV cache and the sequences in it; ``step()`` runs one iteration."""

    def __init__(
        self,
        om_path: str,
        config: GenerateConfig,
        *,
        device_id: int = 0,
        fastpath: ModuleType | None = None,
        acl_json: str = "",
    ):
        if fastpath is None:
            from ge_plugin import fastpath as default

            fastpath = default
        self.fastpath = fastpath
        self.config = config
        self._lock = threading.Lock()
        self.waiting: collections.deque[Sequence] = collections.deque()
        #: decoding sequences, in slot order (slots 0..n-1)
        self.active: list[Sequence] = []
        #: the sequence whose prompt is being prefilled, chunk by chunk over steps; it holds slot n
        self.prefilling: Sequence | None = None
        self.stats = Stats()
        self._closing: list[Any] = [_Released()]
        acquire(acl_json)  # the model's acl.json, as the forward-pass engine passes it
        self.context = Context(device_id)
        self._closing.append(self.context)
        try:
            self.stream = Stream(self.context)
            self._closing.append(self.stream)
            self.om = OmModel(om_path, self.context)
            self._closing.append(self.om)
            self.layout = describe(self.om, config)
            self.cache = KvCache(self.layout, config.form == "stacked")
            self._closing.append(self.cache)
            layout = self.layout
            self.decode = _Phase(self.om, config, layout, self.cache, layout.slots, 1)
            self._closing.append(self.decode)
            self.prefill = _Phase(self.om, config, layout, self.cache, 1, layout.seq_gears[-1])
            self._closing.append(self.prefill)
            self.stream.synchronize()
        except BaseException:
            self.close()
            raise
        self._dims = {
            (b, s): gear_dims(self.om, config, layout.context, b, s) for b in layout.batch_gears for s in (1,)
        }
        self._dims.update(
            {(1, s): gear_dims(self.om, config, layout.context, 1, s) for s in layout.seq_gears}
        )
        self._eos = frozenset(config.eos_ids)

    # ---- requests (any thread) ----

    def submit(
        self, prompt: Any, params: SamplingParams, listener: Listener, *, record: bool = False
    ) -> Sequence:
        """Queue a prompt; RequestError for one the context cannot hold, UnavailableError when the queue is full."""
        ids = np.ascontiguousarray(prompt, dtype=np.int64).reshape(-1)
        context = self.layout.context
        if ids.size == 0:
            raise RequestError("input_ids is empty: a prompt needs at least one token")
        if ids.size > context:
            raise RequestError(
                f"input_ids holds {ids.size} tokens, longer than the model's context of {context} tokens"
            )
        vocab = self.layout.vocab
        if int(ids.min()) < 0 or int(ids.max()) >= vocab:
            raise RequestError(f"input_ids must be token ids in [0, {vocab - 1}]")
        sequence = Sequence(ids, params, listener, record)
        with self._lock:
            if len(self.waiting) >= self.config.max_queue:
                raise UnavailableError(
                    f"every one of the {self.layout.slots} slots is busy and {len(self.waiting)} requests wait"
                )
            self.waiting.append(sequence)
        return sequence

    def cancel(self, sequence: Sequence) -> None:
        """Ask for ``sequence`` to stop; it leaves (finish reason "cancelled") at the next step."""
        sequence.cancelled = True

    @property
    def idle(self) -> bool:
        return not self.active and not self.waiting and self.prefilling is None

    @property
    def sequences(self) -> list[Sequence]:
        """Every sequence held: decoding, being prefilled, waiting."""
        held = [*self.active, *([self.prefilling] if self.prefilling is not None else [])]
        with self._lock:
            return [*held, *self.waiting]

    # ---- the loop (one thread) ----

    def step(self) -> None:
        """Cancellations, one decode execute for the active sequences, then prefill chunks."""
        self.context.make_current()
        for sequence in [s for s in self.active if s.cancelled]:
            self._finish(sequence, "cancelled")
        prefilling = self.prefilling
        if prefilling is not None and prefilling.cancelled:
            self.prefilling = None
            prefilling.slot = -1
            self._finish(prefilling, "cancelled")
        self._leave_finished()
        if self.active:
            self._decode()
            self._leave_finished()
        self._prefill_step()
        self.stats.active = len(self.active)
        self.stats.cached_tokens = sum(s.cached for s in self.active) + (
            self.prefilling.cached if self.prefilling is not None else 0
        )

    def _decode_gear(self, count: int) -> int:
        """The batch gear a decode step of ``count`` sequences runs on: the smallest that holds them."""
        return next(b for b in self.layout.batch_gears if b >= count)

    def _decode(self) -> None:
        phase, layout, stream = self.decode, self.layout, self.stream.handle
        count = len(self.active)
        batch = self._decode_gear(count)
        width = layout.context + 1
        for row, sequence in enumerate(self.active):
            phase.ids[row] = sequence.pending
            phase.pos[row] = sequence.cached
        self._run(phase, batch, 1, batch * width, 0)
        for row, sequence in enumerate(self.active):
            self.cache.write(
                [b.ptr for b in phase.present], batch, 1, row, sequence.slot, sequence.cached, 1, stream
            )
        copy_async(
            phase.logits_host.ptr,
            phase.logits_host.size,
            phase.logits_dev.ptr,
            count * layout.vocab * FLOAT,
            D2H,
            stream,
        )
        self.stream.synchronize()
        self.stats.decode_executes += 1
        for row, sequence in enumerate(self.active):
            phase.mask[row * width + sequence.cached] = 1
            sequence.cached += 1
            self._emit(sequence, phase.logits[row])

    def _prefill_step(self) -> None:
        """Prefill chunks until this step's ``prefill_tokens_per_step`` are spent (the first chunk always
        runs); a sequence whose last chunk ran samples its first token and decodes from the next step."""
        budget = self.config.prefill_tokens_per_step
        while budget > 0:
            sequence = self.prefilling or self._next_waiting()
            if sequence is None:
                return
            budget -= self._prefill_chunk(sequence)
            if sequence.cached < sequence.prompt.size:
                continue
            self.prefilling = None
            self.active.append(sequence)
            self._init_decode_row(sequence)
            self._emit(sequence, self.prefill.logits[0])
            self._leave_finished()  # a first token that ends the sequence (EOS, max_tokens 1)

    def _next_waiting(self) -> Sequence | None:
        """The next waiting sequence, given the slot after the active ones; None without a free slot or a
        waiting sequence. Cancelled ones are answered and dropped on the way."""
        if len(self.active) >= self.layout.slots:
            return None
        while True:
            with self._lock:
                if not self.waiting:
                    return None
                sequence = self.waiting.popleft()
            if not sequence.cancelled:
                break
            sequence.finish = "cancelled"
            sequence.listener(sequence, [], "cancelled")
        sequence.slot = len(self.active)
        self.prefilling = sequence
        return sequence

    def _prefill_chunk(self, sequence: Sequence) -> int:
        """Run the next chunk of ``sequence``'s prompt (the smallest seq gear holding what is left, else the
        largest); the logits row comes back only with the last chunk. Returns the tokens prefilled."""
        phase, layout, stream = self.prefill, self.layout, self.stream.handle
        context = layout.context
        prompt = sequence.prompt
        remaining = prompt.size - sequence.cached
        seq = next((s for s in layout.seq_gears if s >= remaining), layout.seq_gears[-1])
        count = min(remaining, seq)
        start = sequence.cached
        self.fastpath.gather(
            phase.ids_host.array, [1, seq], "int64", [prompt[None, start : start + count]], "int64", 0
        )
        width = context + seq
        mask = phase.mask[:width]
        mask[:start] = 1
        mask[start:context] = 0
        mask[context:] = 1
        phase.pos[:seq] = np.arange(start, start + seq)  # padding rows get positions too; no one reads them
        self._run(phase, 1, seq, width, sequence.slot, fill=start > 0)
        self.cache.write([b.ptr for b in phase.present], 1, seq, 0, sequence.slot, start, count, stream)
        if count == remaining:
            last = (count - 1) * layout.vocab * FLOAT
            copy_async(
                phase.logits_host.ptr,
                phase.logits_host.size,
                phase.logits_dev.ptr + last,
                layout.vocab * FLOAT,
                D2H,
                stream,
            )
        self.stream.synchronize()  # the next chunk reuses the pinned staging
        self.stats.prefill_executes += 1
        sequence.cached += count
        return count

    def _init_decode_row(self, sequence: Sequence) -> None:
        width = self.layout.context + 1
        row = self.decode.mask[sequence.slot * width : (sequence.slot + 1) * width]
        row[: sequence.cached] = 1
        row[sequence.cached :] = 0
        row[-1] = 1

    def _run(
        self, phase: _Phase, batch: int, seq: int, mask_elements: int, first_slot: int, *, fill: bool = True
    ) -> None:
        stream = self.stream.handle
        pasts = self.cache.past(batch, first_slot, stream, fill=fill)
        for index, (ptr, size) in zip(phase.past_index, pasts):
            phase.inputs.point(index, ptr, size)
        self.om.set_dims(phase.inputs, self._dims[(batch, seq)])
        tokens = batch * seq * INT64
        copy_async(phase.ids_dev.ptr, phase.ids_dev.size, phase.ids_host.ptr, tokens, H2D, stream)
        copy_async(phase.pos_dev.ptr, phase.pos_dev.size, phase.pos_host.ptr, tokens, H2D, stream)
        copy_async(
            phase.mask_dev.ptr, phase.mask_dev.size, phase.mask_host.ptr, mask_elements * INT64, H2D, stream
        )
        self.om.execute_async(phase.inputs, phase.outputs, stream)

    def _emit(self, sequence: Sequence, logits: NDArray[np.float32]) -> None:
        """Choose the next token from ``logits``, tell the listener, and see whether the sequence is done."""
        params = sequence.params
        token = sample(logits, params, sequence.rng)
        if sequence.logits is not None:
            sequence.logits.append(logits.copy())
        now = time.monotonic()
        if not sequence.generated:
            self.stats.first_token(now - sequence.submitted)
        else:
            self.stats.inter_token(now - sequence.last_token_at)
        sequence.last_token_at = now
        sequence.generated.append(token)
        sequence.pending = token
        self.stats.tokens += 1
        finish = ""
        if token in params.stop_ids or (token in self._eos and not params.ignore_eos):
            finish = "stop"
        elif len(sequence.generated) >= params.max_tokens or sequence.cached >= self.layout.context:
            finish = "length"
        sequence.finish = finish
        sequence.listener(sequence, [token], finish)

    def _finish(self, sequence: Sequence, reason: str) -> None:
        sequence.finish = reason
        sequence.listener(sequence, [], reason)

    def _leave_finished(self) -> None:
        """Finished sequences leave now; the last active sequence takes each freed slot, and the one being
        prefilled moves down to the slot after the active ones."""
        index = 0
        while index < len(self.active):
            sequence = self.active[index]
            if not sequence.finish:
                index += 1
                continue
            last = self.active.pop()
            if last is not sequence:
                self._move(last, sequence.slot)
                self.active[index] = last
            sequence.slot = -1
        prefilling = self.prefilling
        if prefilling is not None and prefilling.slot != len(self.active):
            self._move(prefilling, len(self.active))

    def _move(self, sequence: Sequence, slot: int) -> None:
        self.cache.move(sequence.slot, slot, self.stream.handle)
        width = self.layout.context + 1
        mask = self.decode.mask
        mask[slot * width : (slot + 1) * width] = mask[sequence.slot * width : (sequence.slot + 1) * width]
        sequence.slot = slot

    def fail_all(self, message: str) -> None:
        """End every active and waiting sequence with the finish reason "error" (after a failed step)."""
        with self._lock:
            waiting = list(self.waiting)
            self.waiting.clear()
        prefilling = [self.prefilling] if self.prefilling is not None else []
        self.prefilling = None
        for sequence in [*self.active, *prefilling, *waiting]:
            sequence.error = message
            self._finish(sequence, "error")
            sequence.slot = -1
        self.active.clear()

    def run_until_idle(self) -> None:
        while not self.idle:
            self.step()

    def close(self) -> None:
        """Free everything in the reverse order of creation; a second close is harmless."""
        closing, self._closing = self._closing, []
        for thing in reversed(closing):
            thing.close()
