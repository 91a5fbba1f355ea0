"""Simulated device memory, real pinned host memory, and the rules of copying between them.

Device memory of device ``d`` lives at fake addresses from ``(d + 1) << 48`` up, above every user-space
address of x86-64 and aarch64 Linux, so the simulator knows from a pointer alone where it points: a device
allocation (looked up by bisection, so ``ptr + offset`` inside an allocation is valid), pinned host memory
from ``acl.rt.malloc_host``, an object the program handed over (``acl.util.bytes_to_ptr`` /
``numpy_to_ptr``, see ``_host_objects``), or some other host address (a raw ``ndarray.ctypes.data``), which
sync copies accept as on real hardware. Each device allocation is backed by a numpy buffer whose first
16 MiB are filled with 0xA5: real device memory is not initialised, and a fixed pattern makes reading it
before writing visible and keeps stale data of an earlier allocation (a gear value left in a reused heap
block) out. Beyond 16 MiB the host's fresh pages are left alone, so a big allocation costs host memory only
once written. Pinned memory is real, page-aligned host memory (``_pages``), because host code writes into it
directly; its freed ranges stay reserved for a while so a copy into them is refused, not performed.

Every allocation remembers the call and the line of the program that made it (and freed it), so a refused
copy says which memory it overran or used after free and where that memory came from; with the sanitizer
on (``sanitizer``), bounds are the size the program asked for, not the rounded-up size the device charged.
Addresses are never reused and allocations are separated by a gap, so a use-after-free or an overrun is an
error instead of silently hitting a neighbour.
"""

from __future__ import annotations

import bisect
import collections
import ctypes
import threading
import time
from typing import Any, NamedTuple

import numpy as np

from ge_plugin import acl_constants as C
from ge_plugin.sim import _host_objects, _pages, counters, device_time, sanitizer
from ge_plugin.sim._fail import Fail
from ge_plugin.sim._sites import Origin

DEVICE_SHIFT = 48
#: handles (contexts, streams, datasets, ...) live here, far from memory, so a handle passed as a pointer
#: is caught instead of dereferenced
HANDLE_BASE = 0xA5 << 56
_GAP = 512
POISON = 0xA5
#: bytes of each new device allocation filled with POISON; beyond this, fresh pages (zeros) are left untouched
#: so a big allocation costs host memory only once it is written
_POISON_LIMIT = 16 << 20
#: freed device allocations remembered per device, to say "freed by ... at ..." about a stale pointer
_FREED_KEPT = 65536
_CHECKING = sanitizer.STATE

HOST, DEVICE, PINNED, INVALID = 0, 1, 2, -1
_BAD = C.ACL_ERROR_INVALID_PARAM
_KIND_DIRECTION = {
    C.ACL_MEMCPY_HOST_TO_HOST: "h2h",
    C.ACL_MEMCPY_HOST_TO_DEVICE: "h2d",
    C.ACL_MEMCPY_DEVICE_TO_HOST: "d2h",
    C.ACL_MEMCPY_DEVICE_TO_DEVICE: "d2d",
}
_KIND_NAMES = {
    C.ACL_MEMCPY_HOST_TO_HOST: "ACL_MEMCPY_HOST_TO_HOST",
    C.ACL_MEMCPY_HOST_TO_DEVICE: "ACL_MEMCPY_HOST_TO_DEVICE",
    C.ACL_MEMCPY_DEVICE_TO_HOST: "ACL_MEMCPY_DEVICE_TO_HOST",
    C.ACL_MEMCPY_DEVICE_TO_DEVICE: "ACL_MEMCPY_DEVICE_TO_DEVICE",
    C.ACL_MEMCPY_DEFAULT: "ACL_MEMCPY_DEFAULT",
}


def align_up(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def malloc_size(size: int) -> int:
    """What ``acl.rt.malloc`` really takes: rounded up to 32 bytes, plus 32 (the acl.rt.malloc doc, aclpythondevg_01_0110)."""
    return align_up(size, 32) + 32


class Allocation:
    """One block of device or pinned memory. ``addr`` is where its bytes really are in this process."""

    __slots__ = (
        "_shift",
        "accounted",
        "addr",
        "base",
        "buf",
        "device",
        "freed",
        "freed_at",
        "freed_by",
        "origin",
        "requested",
        "size",
    )

    def __init__(
        self,
        base: int,
        size: int,
        accounted: int,
        buf: np.ndarray[Any, np.dtype[np.uint8]],
        addr: int,
        device: int,
        origin: Origin,
        requested: int | None = None,
    ):
        self.base = base  #: the address the user sees
        self.size = size  #: usable bytes (malloc rounding included)
        self.requested = size if requested is None else requested  #: what the program asked for
        self.accounted = accounted  #: bytes charged to the device (malloc rounding)
        self.buf = buf  #: kept alive for as long as anything (a queued copy) refers to this object
        self.addr = addr
        self.device = device  #: -1 for pinned host memory
        self.origin = origin
        self.freed = False
        self.freed_at = 0.0  #: time.monotonic() when it was freed
        self.freed_by: Origin | None = None
        self._shift = addr - buf.ctypes.data  #: where ``addr`` sits in ``buf``

    def view(self, offset: int, nbytes: int) -> np.ndarray[Any, np.dtype[np.uint8]]:
        """``nbytes`` at ``offset`` from ``addr``, as a uint8 view (no copy)."""
        start = self._shift + offset
        return self.buf[start : start + nbytes]

    def limit(self) -> int:
        """The bytes a copy may touch: what the program asked for when checking, else what the device gave."""
        return self.requested if sanitizer.enabled() else self.size

    def describe(self) -> str:
        return describe(self.base, self.requested, self.device, self.origin, self.freed_by)


def describe(base: int, requested: int, device: int, origin: Origin, freed_by: Origin | None) -> str:
    """ "the 1024-byte device 0 allocation 0x1000000010000 (acl.rt.malloc(1024) at app.py:12, freed by ...)"."""
    where = "pinned host allocation" if device < 0 else f"device {device} allocation"
    freed = f", freed by {freed_by}" if freed_by is not None else ""
    return f"the {requested}-byte {where} 0x{base:x} ({origin}{freed})"


class FreedRecord(NamedTuple):
    """What is left of a freed allocation: enough to name it in a message (its memory is gone)."""

    base: int
    size: int
    requested: int
    device: int
    origin: Origin
    freed_by: Origin

    def describe(self) -> str:
        return describe(self.base, self.requested, self.device, self.origin, self.freed_by)


def _record(alloc: Allocation, freed_by: Origin) -> FreedRecord:
    return FreedRecord(alloc.base, alloc.size, alloc.requested, alloc.device, alloc.origin, freed_by)


class Remembered:
    """What ``Memory`` remembers between calls, true for as long as no allocation is freed: where a pointer
    points (addresses are never reused, and a new allocation cannot overlap a live one, so only a free
    changes the answer), the checked asynchronous copies by their arguments. ``frees`` counts the frees, so
    others can tell whether what they checked still holds."""

    __slots__ = ("copies", "frees", "places")

    def __init__(self) -> None:
        self.places: dict[int, Place] = {}
        self.copies: dict[tuple[int, ...], CopyPlan] = {}
        self.frees = 0

    def forget(self) -> None:
        self.places.clear()
        self.copies.clear()
        self.frees += 1


class _Arena:
    """Sorted allocations with containment lookup; a free makes the memory forget what it remembered."""

    def __init__(self, remembered: Remembered) -> None:
        self.lock = threading.Lock()
        self.bases: list[int] = []
        self.allocs: dict[int, Allocation] = {}
        self.remembered = remembered

    def find(self, ptr: int) -> Allocation | None:
        bases = self.bases
        i = bisect.bisect_right(bases, ptr) - 1
        if i < 0:
            return None
        alloc = self.allocs.get(bases[i])
        if alloc is None or ptr >= alloc.base + max(alloc.size, 1):
            return None
        return alloc

    def below(self, ptr: int) -> Allocation | None:
        """The live allocation with the highest base at or below ``ptr`` (whether or not it holds ``ptr``)."""
        bases = self.bases
        i = bisect.bisect_right(bases, ptr) - 1
        return self.allocs.get(bases[i]) if i >= 0 else None

    def _insert(self, alloc: Allocation) -> None:
        bisect.insort(self.bases, alloc.base)
        self.allocs[alloc.base] = alloc

    def remove(self, base: int, freed_by: Origin) -> Allocation | None:
        with self.lock:
            alloc = self.allocs.pop(base, None)
            if alloc is not None:
                self.remembered.forget()
                del self.bases[bisect.bisect_left(self.bases, base)]
                alloc.freed_by = freed_by
                alloc.freed_at = time.monotonic()
                alloc.freed = True
            return alloc

    def take_all(self, freed_by: Origin) -> list[Allocation]:
        with self.lock:
            allocs = list(self.allocs.values())
            self.allocs.clear()
            self.bases.clear()
            self.remembered.forget()
        now = time.monotonic()
        for alloc in allocs:
            alloc.freed_by = freed_by
            alloc.freed_at = now
            alloc.freed = True
        return allocs


class DeviceArena(_Arena):
    """The memory of one simulated device: fake addresses, numpy backing, accounted against a capacity."""

    def __init__(self, device: int, capacity: int, remembered: Remembered, *, host_memory: bool = False):
        super().__init__(remembered)
        #: RC mode (ACL_DEVICE): the device's memory is this process's own, page-mapped like pinned memory
        self.host_memory = host_memory
        self.device = device
        self.capacity = capacity
        self.used = 0
        self._next = ((device + 1) << DEVICE_SHIFT) + 0x10000
        self._freed_order: collections.deque[int] = collections.deque()
        self._freed_bases: list[int] = []
        self._freed: dict[int, FreedRecord] = {}

    def malloc(self, size: int, accounted: int, origin: Origin) -> Allocation | None:
        """None when the device is full; Fail(207001) when the host cannot back the allocation."""
        with self.lock:
            if self.used + accounted > self.capacity:
                return None
            try:
                if self.host_memory:
                    addr = _pages.map_pages(accounted)
                    buf = np.ctypeslib.as_array((ctypes.c_uint8 * accounted).from_address(addr))
                else:
                    buf = np.empty(accounted, dtype=np.uint8)
            except MemoryError:
                raise Fail(
                    C.ACL_ERROR_RT_MEMORY_ALLOCATION,
                    f"the host running the simulator cannot back {accounted} bytes of device {self.device} memory",
                ) from None
            buf[:_POISON_LIMIT] = POISON
            if self.host_memory:
                base = addr
            else:
                base = self._next
                self._next = align_up(base + accounted + _GAP, _GAP)
            alloc = Allocation(base, accounted, accounted, buf, buf.ctypes.data, self.device, origin, size)
            self._insert(alloc)
            self.used += accounted
        counters.device(self.device).allocated(accounted)
        return alloc

    def free(self, base: int, freed_by: Origin, *, reclaimed: bool = False) -> Allocation | None:
        alloc = self.remove(base, freed_by)
        if alloc is not None:
            with self.lock:
                self.used -= alloc.accounted
                self._remember(_record(alloc, freed_by))
            if self.host_memory:
                _pages.release(alloc.addr, alloc.size, _record(alloc, freed_by))
            counters.device(self.device).freed(alloc.accounted, reclaimed=reclaimed)
        return alloc

    def past_the_end(self, ptr: int) -> Allocation | None:
        """RC mode: the live allocation whose last page holds ``ptr`` beyond the allocation's end."""
        near = self.below(ptr)
        if near is not None and ptr < align_up(near.base + max(near.size, 1), 4096):
            return near
        return None

    def _remember(self, record: FreedRecord) -> None:
        """Keep ``record`` for messages about stale pointers (the latest _FREED_KEPT). Holds the lock."""
        self._freed_order.append(record.base)
        bisect.insort(self._freed_bases, record.base)
        self._freed[record.base] = record
        if len(self._freed_order) > _FREED_KEPT:
            oldest = self._freed_order.popleft()
            del self._freed_bases[bisect.bisect_left(self._freed_bases, oldest)]
            del self._freed[oldest]

    def freed_record(self, ptr: int) -> FreedRecord | None:
        """The freed allocation that held ``ptr`` (device addresses are never reused, so this is certain)."""
        with self.lock:
            i = bisect.bisect_right(self._freed_bases, ptr) - 1
            if i < 0:
                return None
            record = self._freed[self._freed_bases[i]]
        return record if ptr < record.base + max(record.size, 1) else None

    def explain(self, ptr: int) -> tuple[str, str]:
        """Why ``ptr`` (on this device, in no live allocation) is bad, and the sanitizer's kind for it."""
        record = self.freed_record(ptr)
        if record is not None:
            return f"0x{ptr:x} is inside {record.describe()}", sanitizer.USE_AFTER_FREE
        near = self.below(ptr)
        if near is not None and ptr < near.base + near.size + _GAP:
            over = ptr - (near.base + near.requested)
            return f"0x{ptr:x} is {over} bytes past the end of {near.describe()}", sanitizer.OUT_OF_BOUNDS
        return (
            f"0x{ptr:x} is not inside a live allocation of device {self.device} (never allocated)",
            sanitizer.INVALID_POINTER,
        )

    def reserve(self, nbytes: int) -> bool:
        """Charge memory the runtime holds for a loaded model (not a malloc); False when the device is full."""
        with self.lock:
            if self.used + nbytes > self.capacity:
                return False
            self.used += nbytes
        counters.device(self.device).model_memory(nbytes)
        return True

    def unreserve(self, nbytes: int) -> None:
        with self.lock:
            self.used = max(0, self.used - nbytes)
        counters.device(self.device).model_memory(-nbytes)

    def reclaim_all(self, by: Origin) -> list[Allocation]:
        """Release every allocation (reset_device / finalize, ``by``); returns them."""
        allocs = self.take_all(by)
        with self.lock:
            self.used = 0
            for alloc in allocs:
                self._remember(_record(alloc, by))
        for alloc in allocs:
            if self.host_memory:
                _pages.release(alloc.addr, alloc.size, _record(alloc, by))
            counters.device(self.device).freed(alloc.accounted, reclaimed=True)
        return allocs


class PinnedArena(_Arena):
    """Page-locked host memory stand-in: real, page-aligned host memory (``_pages``)."""

    def malloc(self, size: int, origin: Origin) -> Allocation:
        addr = _pages.map_pages(size)
        buf = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(addr))
        alloc = Allocation(addr, size, size, buf, addr, -1, origin)
        with self.lock:
            self._insert(alloc)
        counters.host_pinned.allocated(size)
        return alloc

    def free(self, base: int, freed_by: Origin, *, reclaimed: bool = False) -> Allocation | None:
        alloc = self.remove(base, freed_by)
        if alloc is not None:
            _pages.release(alloc.addr, alloc.size, _record(alloc, freed_by))
            counters.host_pinned.freed(alloc.size, reclaimed=reclaimed)
        return alloc

    def past_the_end(self, ptr: int) -> Allocation | None:
        """The live allocation whose last page holds ``ptr`` beyond the allocation's end."""
        near = self.below(ptr)
        if near is not None and ptr < align_up(near.base + max(near.size, 1), 4096):
            return near
        return None

    def reclaim_all(self, by: Origin) -> list[Allocation]:
        allocs = self.take_all(by)
        for alloc in allocs:
            _pages.release(alloc.addr, alloc.size, _record(alloc, by))
            counters.host_pinned.freed(alloc.size, reclaimed=True)
        return allocs


class CopyPlan:
    """A checked copy, ready to run now (memcpy) or later on a stream worker (memcpy_async)."""

    __slots__ = ("count", "device", "direction", "dst", "dst_alloc", "src", "src_alloc")

    def __init__(
        self,
        dst: int,
        src: int,
        count: int,
        direction: str,
        device: int,
        dst_alloc: Allocation | None,
        src_alloc: Allocation | None,
    ):
        self.dst = dst
        self.src = src
        self.count = count
        self.direction = direction
        self.device = device
        self.dst_alloc = dst_alloc
        self.src_alloc = src_alloc

    def run(self) -> None:
        self.check(None)
        if self.count:
            ctypes.memmove(self.dst, self.src, self.count)
            device_time.hold_copy(self.direction, self.count)
        counters.device(self.device).copied(self.direction, self.count)

    def check(self, at: float | None) -> None:
        """Fail if either end was freed before the copy ran (at ``at``, ``time.monotonic()``; None: now)."""
        for what, alloc in (("destination", self.dst_alloc), ("source", self.src_alloc)):
            if alloc is not None and alloc.freed and (at is None or alloc.freed_at < at):
                raise Fail(
                    C.ACL_ERROR_RT_MEMORY_FREE,
                    f"the copy's {what}, {alloc.describe()}, was freed before it ran",
                    sanitizer.USE_AFTER_FREE,
                )

    def timed(self, at: float | None = None) -> None:
        """The copy in timing-only mode, run at ``at``: checked and counted, no byte moved."""
        dst, src = self.dst_alloc, self.src_alloc
        if (dst is not None and dst.freed) or (src is not None and src.freed):
            self.check(at)
        counters.device(self.device).copied(self.direction, self.count)


class _PaddedPlan(CopyPlan):
    """A copy whose source is the simulator's own copy of what a host pointer really holds (the object's
    bytes, then zeros): see ``check_host``. Keeps that copy alive until it has run."""

    __slots__ = ("padded",)

    def __init__(
        self, padded: bytes, dst: int, count: int, direction: str, device: int, dst_alloc: Allocation | None
    ):
        source = ctypes.cast(ctypes.c_char_p(padded), ctypes.c_void_p).value or 0
        super().__init__(dst, source, count, direction, device, dst_alloc, None)
        self.padded = padded


def _kind_contradicts(call: str, kind: int, direction: str, dst: int, src: int) -> None:
    """``kind`` says another direction than the pointers do. The CANN docs call ``kind`` reserved: the
    runtime copies in the pointers' direction. So does the simulator, with a warning; checking, it fails."""
    where = {"h": "host", "d": "device"}
    message = (
        f"kind {_KIND_NAMES[kind]} does not match the pointers: src 0x{src:x} is {where[direction[0]]} "
        f"memory and dst 0x{dst:x} is {where[direction[2]]} memory (the run mode is ACL_HOST)"
    )
    if _CHECKING.enabled:
        raise Fail(_BAD, message, sanitizer.WRONG_MEMORY_KIND)
    sanitizer.tolerate(
        sanitizer.WRONG_MEMORY_KIND,
        call,
        message,
        f"the copy goes {direction}, the direction of the pointers, as the runtime infers it (kind is reserved)",
    )


def _check_range(name: str, ptr: int, count: int, alloc: Allocation | None) -> None:
    if alloc is None:
        return
    end = alloc.base + (alloc.requested if _CHECKING.enabled else alloc.size)  # alloc.limit(), inlined
    if ptr + count > end:
        raise Fail(
            _BAD,
            f"{name} range 0x{ptr:x}+{count} runs {ptr + count - end} bytes past the end of {alloc.describe()}",
            sanitizer.OUT_OF_BOUNDS,
        )


def _check_async(direction: str, ends: tuple[tuple[str, int, int], ...]) -> None:
    """What memcpy_async needs besides memcpy: device memory at one end, pinned host memory, 64-byte alignment."""
    if direction == "h2h":
        raise Fail(C.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "memcpy_async does not support host-to-host copies")
    for name, ptr, kind in ends:
        if kind == HOST:
            raise Fail(
                _BAD,
                f"{name} 0x{ptr:x} is host memory that did not come from acl.rt.malloc_host; memcpy_async needs "
                "pinned host memory (real hardware accepts the call and then copies garbage or crashes, the "
                "simulator refuses it)",
                sanitizer.WRONG_MEMORY_KIND,
            )
        if ptr % 64:
            raise Fail(
                C.ACL_ERROR_RT_ADDR_UNALIGNED,
                f"memcpy_async needs 64-byte aligned addresses; {name} 0x{ptr:x} is not",
            )


class Place(NamedTuple):
    """Where a pointer points: HOST, DEVICE, PINNED or INVALID (with ``why`` and the sanitizer's ``fault``),
    and the allocation holding it."""

    kind: int
    alloc: Allocation | None
    why: str = ""
    fault: str | None = None

    def real(self, ptr: int) -> int:
        """Where ``ptr``'s bytes really are in this process."""
        return ptr if self.alloc is None else self.alloc.addr + (ptr - self.alloc.base)


def check_host(call: str, name: str, ptr: int, count: int, *, read: bool = False) -> bytes | None:
    """A host pointer that is neither device nor pinned memory, used for ``count`` bytes: checked against the
    object the program got it from (``bytes_to_ptr``, ``numpy_to_ptr``), or reported once as unchecked.

    ``read``: the call only reads the bytes (a copy's source). Reading past the object's end or from an
    object the program dropped is what real pyACL cannot see: it reads whatever the heap holds there and
    goes on. Checking off, so does the simulator (with one warning per line), and the bytes to read instead
    are returned: the object's own, then zeros (never this process's other memory); checking on, it is a
    finding and the call fails. None: read ``ptr`` itself."""
    hit = _host_objects.lookup(ptr, count)
    if hit is None:
        if count:
            sanitizer.warn_once(
                call,
                f"{name} 0x{ptr:x} is host memory the simulator did not hand out (acl.rt.malloc_host) nor was "
                "handed (acl.util.bytes_to_ptr / numpy_to_ptr), e.g. a raw ndarray.ctypes.data: its bounds "
                f"cannot be checked, so its {count} bytes are used unchecked, as on hardware",
            )
        return None
    obj = hit.obj
    end = obj.base + obj.size
    if not hit.alive:
        kind = sanitizer.USE_AFTER_FREE
        message = (
            f"{name} 0x{ptr:x} points into {obj.describe()}, which the program no longer references: on "
            "hardware this is freed memory (keep the object alive while its pointer is in use)"
        )
        if ptr + count > end:
            message += f"; the range 0x{ptr:x}+{count} also runs {ptr + count - end} bytes past its end"
    elif not hit.covered:
        kind = sanitizer.OUT_OF_BOUNDS
        message = (
            f"{name} range 0x{ptr:x}+{count} runs {ptr + count - end} bytes past the end of {obj.describe()}"
        )
    else:
        return None
    if not read or _CHECKING.enabled:
        raise Fail(_BAD, message, kind)
    readable = max(0, min(count, end - ptr))
    how = (
        "the simulator still holds the object, so it reads its bytes"
        if readable == count
        else f"the simulator reads the object's {readable} bytes, then {count - readable} zeros"
    )
    sanitizer.tolerate(kind, call, message, how + " (real hardware reads whatever memory is there)")
    # the object is held by ``hit`` while its bytes are taken, so its memory cannot go meanwhile
    return ctypes.string_at(ptr, readable) + bytes(count - readable)


def explain_pinned_free(ptr: int) -> str | None:
    """Why host pointer ``ptr`` is freed pinned memory, if it is (its range is still reserved)."""
    record = _pages.freed(ptr)
    return None if record is None else f"0x{ptr:x} is inside {record.describe()}"


#: how many pointers and copies ``Memory`` remembers (an engine uses a few dozen, over and over)
_REMEMBERED = 4096


class Memory:
    """All memory of one initialised simulator: one arena per device plus pinned host memory.

    Every copy and execute looks its pointers up; a pointer found in a live device or pinned allocation,
    and an asynchronous copy that passed its checks, are remembered until an allocation is freed
    (:class:`Remembered`), so a program that repeats its calls pays for the checks once."""

    def __init__(self, devices: int, capacity: int, *, device_run_mode: bool = False):
        self.remembered = Remembered()
        self._places = self.remembered.places
        #: RC mode (ACL_DEVICE): device memory is host memory, and every memcpy kind is right
        self.device_run_mode = device_run_mode
        self.devices = [
            DeviceArena(d, capacity, self.remembered, host_memory=device_run_mode) for d in range(devices)
        ]
        self.pinned = PinnedArena(self.remembered)

    @property
    def frees(self) -> int:
        """How many allocations were freed so far: what was checked before still holds while this stays."""
        return self.remembered.frees

    def locate(self, ptr: int) -> Place:
        """Where ``ptr`` points (see :class:`Place`)."""
        place = self._places.get(ptr)
        if place is None:
            place = self._locate(ptr)
            if place.alloc is not None and place.kind != INVALID and len(self._places) < _REMEMBERED:
                self._places[ptr] = place
        return place

    def _locate(self, ptr: int) -> Place:
        if ptr >= 1 << DEVICE_SHIFT:
            d = (ptr >> DEVICE_SHIFT) - 1
            if d < len(self.devices):
                arena = self.devices[d]
                alloc = arena.find(ptr)
                if alloc is None:
                    why, fault = arena.explain(ptr)
                    return Place(INVALID, None, why, fault)
                return Place(DEVICE, alloc)
            if ptr >= HANDLE_BASE:
                return Place(
                    INVALID,
                    None,
                    f"0x{ptr:x} is a simulator handle (context, stream, dataset, ...), not memory",
                    sanitizer.INVALID_POINTER,
                )
            return Place(INVALID, None, f"0x{ptr:x} is not a valid address", sanitizer.INVALID_POINTER)
        if ptr < 4096:
            return Place(INVALID, None, f"0x{ptr:x} is a null pointer", sanitizer.INVALID_POINTER)
        alloc = self.pinned.find(ptr)
        if alloc is not None:
            return Place(PINNED, alloc)
        if self.device_run_mode:
            for arena in self.devices:
                alloc = arena.find(ptr)
                if alloc is not None:
                    return Place(DEVICE, alloc)
        freed = explain_pinned_free(ptr)
        if freed is not None:
            return Place(INVALID, None, freed, sanitizer.USE_AFTER_FREE)
        near = self.pinned.past_the_end(ptr)
        for arena in self.devices if self.device_run_mode and near is None else ():
            near = near or arena.past_the_end(ptr)
        if near is not None:
            return Place(
                INVALID,
                None,
                f"0x{ptr:x} is {ptr - near.base - near.requested} bytes past the end of {near.describe()}",
                sanitizer.OUT_OF_BOUNDS,
            )
        return Place(HOST, None)

    def plan_copy(
        self,
        dst: int,
        dest_max: int,
        src: int,
        count: int,
        kind: int,
        ctx_device: int,
        *,
        asynchronous: bool,
        call: str = "acl.rt.memcpy",
    ) -> CopyPlan:
        """Check a memcpy as the runtime would; raises Fail. An asynchronous copy is checked once for the
        same arguments while no allocation is freed (the host memory it may touch is pinned)."""
        if asynchronous:
            key = (dst, dest_max, src, count, kind, ctx_device, _CHECKING.enabled)
            plan = self.remembered.copies.get(key)
            if plan is None:
                plan = self._plan_copy(dst, dest_max, src, count, kind, ctx_device, True, call)
                copies = self.remembered.copies
                if len(copies) >= _REMEMBERED:
                    copies.clear()
                copies[key] = plan
            return plan
        return self._plan_copy(dst, dest_max, src, count, kind, ctx_device, False, call)

    def _plan_copy(
        self,
        dst: int,
        dest_max: int,
        src: int,
        count: int,
        kind: int,
        ctx_device: int,
        asynchronous: bool,
        call: str,
    ) -> CopyPlan:
        if kind not in _KIND_NAMES:
            raise Fail(_BAD, f"kind {kind} is not an aclrtMemcpyKind (0 host-to-host ... 4 default)")
        if count > dest_max:
            raise Fail(_BAD, f"count {count} is larger than dest_max {dest_max}")
        to, source = self._valid("dst", dst), self._valid("src", src)
        direction = ("d" if source.kind == DEVICE else "h") + "2" + ("d" if to.kind == DEVICE else "h")
        if kind != C.ACL_MEMCPY_DEFAULT and _KIND_DIRECTION[kind] != direction and not self.device_run_mode:
            _kind_contradicts(call, kind, direction, dst, src)
        _check_range("dst", dst, count, to.alloc)
        _check_range("src", src, count, source.alloc)
        padded = None
        if asynchronous:
            _check_async(direction, (("dst", dst, to.kind), ("src", src, source.kind)))
        else:
            if to.kind == HOST:
                check_host(call, "dst", dst, count)
            if source.kind == HOST:
                padded = check_host(call, "src", src, count, read=True)
        if to.alloc is not None and direction in ("h2d", "d2d"):
            device = to.alloc.device
        elif source.alloc is not None and direction == "d2h":
            device = source.alloc.device
        else:
            device = ctx_device
        if padded is not None:
            return _PaddedPlan(padded, to.real(dst), count, direction, device, to.alloc)
        return CopyPlan(to.real(dst), source.real(src), count, direction, device, to.alloc, source.alloc)

    def _valid(self, name: str, ptr: int) -> Place:
        place = self.locate(ptr)
        if place.kind == INVALID:
            raise Fail(_BAD, f"{name} {place.why}", place.fault)
        return place

    def plan_memset(self, ptr: int, max_count: int, count: int, call: str) -> Place:
        """Where ``count`` bytes at ``ptr`` are to be set, checked; raises Fail."""
        if count > max_count:
            raise Fail(_BAD, f"count {count} is larger than max_count {max_count}")
        place = self._valid("dev_ptr", ptr)
        _check_range("dev_ptr", ptr, count, place.alloc)
        if place.kind == HOST:
            check_host(call, "dev_ptr", ptr, count)
        return place

    def live(self) -> list[Allocation]:
        """Every allocation not freed yet, device ones first."""
        allocs = [a for arena in self.devices for a in arena.allocs.values()]
        return allocs + list(self.pinned.allocs.values())
