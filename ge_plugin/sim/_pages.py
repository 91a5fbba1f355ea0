"""Page-granular host memory for ``acl.rt.malloc_host``, whose freed ranges stay reserved for a while.

A program that frees pinned memory and then copies into it must be told, not allowed to write into memory
the process has given to something else. Memory from numpy or malloc cannot promise that: freed, it is
reused at once. So pinned memory here is its own anonymous mapping: freeing it hands the pages back to the
kernel (``madvise(MADV_DONTNEED)``, so a freed buffer costs no memory) but keeps the address range mapped,
so nothing else can be placed there and the simulator can say "this was freed" with certainty. Only the
latest :data:`QUARANTINE` freed ranges are kept; older ones are unmapped (after that, their addresses may
be reused, and the simulator no longer claims to know them). A stale numpy view of a freed buffer reads
zeros instead of crashing the process, for as long as its range is kept.
"""

from __future__ import annotations

import bisect
import collections
import ctypes
import mmap
import threading
from typing import Any

#: freed mappings kept reserved (each one is a kernel VMA; vm.max_map_count is usually 65530)
QUARANTINE = 4096

_libc = ctypes.CDLL(None, use_errno=True)
_mmap = _libc.mmap
_mmap.restype = ctypes.c_void_p
_mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_munmap = _libc.munmap
_munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_madvise = _libc.madvise
_madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_MAP_FAILED = ctypes.c_void_p(-1).value
_MADV_DONTNEED = 4


def _length(size: int) -> int:
    return max(size, 1) + (-max(size, 1)) % mmap.PAGESIZE


def map_pages(size: int) -> int:
    """The address of ``size`` bytes of fresh zeroed pages (page aligned); MemoryError when there are none."""
    addr = _mmap(
        None, _length(size), mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0
    )
    if addr is None or addr == _MAP_FAILED:
        raise MemoryError(f"mmap of {size} bytes failed (errno {ctypes.get_errno()})")
    return int(addr)


class _Freed:
    """Freed mappings still reserved, oldest first, each with what the caller wants to say about it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.order: collections.deque[int] = collections.deque()
        self.starts: list[int] = []  # sorted
        self.ranges: dict[int, tuple[int, Any]] = {}  # start -> (length, record)


_FREED = _Freed()


def release(addr: int, size: int, record: Any) -> None:
    """Free the pages at ``addr`` (from :func:`map_pages`): their memory goes back to the kernel now, the
    range stays reserved, remembered with ``record``, until :data:`QUARANTINE` later releases."""
    length = _length(size)
    _madvise(addr, length, _MADV_DONTNEED)
    evict = []
    with _FREED.lock:
        _FREED.order.append(addr)
        bisect.insort(_FREED.starts, addr)
        _FREED.ranges[addr] = (length, record)
        while len(_FREED.order) > QUARANTINE:
            oldest = _FREED.order.popleft()
            del _FREED.starts[bisect.bisect_left(_FREED.starts, oldest)]
            evict.append((oldest, _FREED.ranges.pop(oldest)[0]))
    for start, span in evict:
        _munmap(start, span)


def freed(ptr: int) -> Any:
    """The record of the freed (still reserved) range holding ``ptr``; None if ``ptr`` is in none."""
    with _FREED.lock:
        i = bisect.bisect_right(_FREED.starts, ptr) - 1
        if i < 0:
            return None
        start = _FREED.starts[i]
        length, record = _FREED.ranges[start]
        return record if ptr < start + length else None
