"""The host objects a program handed the simulator as pointers: ``acl.util.bytes_to_ptr`` and the numpy calls.

pyACL returns the address of a ``bytes`` or ndarray buffer and forgets the object; a copy of more bytes than
the object holds then reads past its end (a crash, or someone else's data), and a pointer whose object was
garbage-collected reads freed memory. The simulator keeps each object (its owner: for an ndarray view, the
array or buffer that owns the memory) with its extent and the line that made the pointer, so a copy from or
to such a pointer is checked against the object it came from (what a read past it or through a dead one
does is ``memory.check_host``'s: as on hardware by default, an error when checking).

Keeping the object is what makes the checks certain: while the simulator holds it, its memory cannot be
freed or reused, so a pointer inside it really points into it. An object the program no longer references
(only the simulator does) is *dead*: a copy through its pointer is a use after free (on hardware, it would
read freed memory). Dead objects are let go, oldest first, once more than :data:`QUARANTINE_BYTES` or
:data:`QUARANTINE_COUNT` of them are held; after that their addresses may be reused and are unknown again.
The same object handed over again (a buffer reused every request) is one entry, not one per call.
"""

from __future__ import annotations

import bisect
import collections
import sys
import threading
from typing import Any

from ge_plugin.sim._sites import Origin

#: dead objects kept, so that a pointer used after its object died is caught: at most this many bytes ...
QUARANTINE_BYTES = 64 << 20
#: ... and this many objects
QUARANTINE_COUNT = 256


class HostObject:
    """One pointer the program was given: ``size`` bytes at ``base`` of ``owner``'s memory; ``array`` is the
    (dtype, shape) of an ndarray's pointer, None for a ``bytes`` object."""

    __slots__ = ("array", "base", "origin", "owner", "size")

    def __init__(
        self, base: int, size: int, owner: Any, origin: Origin, array: tuple[Any, tuple[int, ...]] | None
    ):
        self.base = base
        self.size = size
        self.owner = owner
        self.origin = origin
        self.array = array

    def describe(self) -> str:
        if self.array is None:
            what = f"a {self.size}-byte bytes object"
        else:
            dtype, shape = self.array
            what = f"a {dtype} ndarray of shape {shape} ({self.size} bytes)"
        return f"{what} at 0x{self.base:x} (pointer from {self.origin})"


class _Registry:
    """Objects sorted by base, one entry per (owner, base, size), how many entries hold each owner, the
    entries that may still be alive and the dead ones (oldest first); all under ``lock``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bases: list[int] = []
        self.objects: list[HostObject] = []
        self.keys: dict[tuple[int, int, int], HostObject] = {}
        self.largest = 0  # no object is bigger (a bound on how far back a lookup looks; never lowered)
        self.holds: dict[int, int] = {}  # id(owner) -> entries holding it
        self.live: list[HostObject] = []
        self.dead: collections.deque[HostObject] = collections.deque()
        self.dead_bytes = 0
        self.since_sweep = 0


_R = _Registry()


def _alive(obj: HostObject) -> bool:
    # references: each of our entries holding the owner, plus getrefcount's own argument
    return sys.getrefcount(obj.owner) > _R.holds.get(id(obj.owner), 0) + 1


def register(
    base: int, size: int, owner: Any, origin: Origin, array: tuple[Any, tuple[int, ...]] | None = None
) -> None:
    """Remember that the program holds a pointer to ``size`` bytes at ``base`` of ``owner``."""
    key = (id(owner), base, size)
    with _R.lock:
        known = _R.keys.get(key)
        if known is not None and known.owner is owner:
            return  # handed over again: the first pointer's line stays the one named
        _R.since_sweep += 1
        if _R.since_sweep >= max(8, len(_R.live) // 2):  # amortised: a sweep looks at every live entry
            _R.since_sweep = 0
            for gone in _sweep():
                at = bisect.bisect_left(_R.bases, gone.base)
                while _R.objects[at] is not gone:
                    at += 1
                del _R.bases[at], _R.objects[at]
                del _R.keys[(id(gone.owner), gone.base, gone.size)]
        entry = HostObject(base, size, owner, origin, array)
        at = bisect.bisect_right(_R.bases, base)
        _R.bases.insert(at, base)
        _R.objects.insert(at, entry)
        _R.keys[key] = entry
        _R.holds[id(owner)] = _R.holds.get(id(owner), 0) + 1
        _R.live.append(entry)
        _R.largest = max(_R.largest, size)


def _sweep() -> list[HostObject]:
    """Move newly dead objects to the quarantine and let its oldest go beyond the limits; those let go.
    Holds the lock."""
    still = []
    for obj in _R.live:
        if _alive(obj):
            still.append(obj)
        else:
            _R.dead.append(obj)
            _R.dead_bytes += obj.size
    _R.live = still
    drop = []
    while _R.dead and (_R.dead_bytes > QUARANTINE_BYTES or len(_R.dead) > QUARANTINE_COUNT):
        obj = _R.dead.popleft()
        _R.dead_bytes -= obj.size
        drop.append(obj)
        left = _R.holds[id(obj.owner)] - 1
        if left:
            _R.holds[id(obj.owner)] = left
        else:
            del _R.holds[id(obj.owner)]
    return drop


class Hit:
    """What a pointer and byte count found among the objects: ``obj`` covers the range, or is the one that
    it overruns (``alive``) or outlived (not ``alive``)."""

    __slots__ = ("alive", "covered", "obj")

    def __init__(self, obj: HostObject, alive: bool, covered: bool):
        self.obj = obj
        self.alive = alive
        self.covered = covered


def lookup(ptr: int, count: int) -> Hit | None:
    """The object ``ptr`` points into, judged for ``count`` bytes from there; None when it is in none."""
    with _R.lock:
        bases, objects = _R.bases, _R.objects
        i = bisect.bisect_right(bases, ptr)
        low = ptr - _R.largest
        best: Hit | None = None
        while i > 0:
            i -= 1
            obj = objects[i]
            if obj.base < low:
                break
            if ptr >= obj.base + max(obj.size, 1):
                continue
            alive = _alive(obj)
            if alive and ptr + count <= obj.base + obj.size:
                return Hit(obj, True, True)
            if (
                best is None
                or (alive and not best.alive)
                or (alive == best.alive and obj.size > best.obj.size)
            ):
                best = Hit(obj, alive, False)
        return best


def forget() -> None:
    """Let every object go (``_state.reset_for_tests``)."""
    with _R.lock:
        _R.bases.clear()
        _R.objects.clear()
        _R.keys.clear()
        _R.holds.clear()
        _R.live.clear()
        _R.dead.clear()
        _R.dead_bytes = 0
        _R.largest = 0
        _R.since_sweep = 0
