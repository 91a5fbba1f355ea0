"""The host objects a program handed the simulator as pointers: ``acl.util.bytes_to_ptr`` and the numpy calls.

pyACL returns the address of a ``bytes`` or ndarray buffer and forgets the object; a copy of more bytes than
the object holds then reads past its end (a crash, or someone else's data), and a pointer whose object was
garbage-collected reads freed memory. The simulator keeps each object (its owner: for an ndarray view, the
array or buffer that owns the memory) with its extent and the line that made the pointer, so a copy from or
to such a pointer is checked against the object it came from.

Keeping the object is what makes the checks certain: while the simulator holds it, its memory cannot be
freed or reused, so a pointer inside it really points into it. An object the program no longer references
(only the simulator does) is *dead*: a copy through its pointer is a use after free (on hardware, it would
read freed memory). Dead objects are let go when the next pointer is made, oldest first, once more than
:data:`QUARANTINE_BYTES` of them are held; after that their addresses may be reused and are unknown again.
"""

from __future__ import annotations

import bisect
import sys
import threading
from collections.abc import Sequence
from typing import Any

from ge_plugin.sim._sites import Origin

#: bytes of dead objects kept, so that a pointer used after its object died is caught
QUARANTINE_BYTES = 64 << 20


class HostObject:
    """One pointer the program was given: ``size`` bytes at ``base`` of ``owner``'s memory."""

    __slots__ = ("base", "origin", "owner", "size", "what")

    def __init__(self, base: int, size: int, what: str, owner: Any, origin: Origin):
        self.base = base
        self.size = size
        self.what = what  #: "a 16-byte bytes object", "a float32 ndarray of shape (2, 3) (24 bytes)"
        self.owner = owner
        self.origin = origin

    def describe(self) -> str:
        return f"{self.what} at 0x{self.base:x} (pointer from {self.origin})"


class _Registry:
    """Objects sorted by base (copy-on-write, so lookups take no lock) and how many entries hold each owner."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bases: list[int] = []
        self.objects: list[HostObject] = []
        self.largest = 0
        self.holds: dict[int, int] = {}  # id(owner) -> entries holding it
        self.dead: list[HostObject] = []  # let go oldest first


_R = _Registry()


def _alive(obj: HostObject) -> bool:
    # references: each of our entries holding the owner, plus getrefcount's own argument
    return sys.getrefcount(obj.owner) > _R.holds.get(id(obj.owner), 0) + 1


def register(base: int, size: int, what: str, owner: Any, origin: Origin) -> None:
    """Remember that the program holds a pointer to ``size`` bytes at ``base`` of ``owner``."""
    entry = HostObject(base, size, what, owner, origin)
    with _R.lock:
        _sweep()
        bases, objects = list(_R.bases), list(_R.objects)
        at = bisect.bisect_right(bases, base)
        bases.insert(at, base)
        objects.insert(at, entry)
        _R.holds[id(owner)] = _R.holds.get(id(owner), 0) + 1
        _R.largest = max(_R.largest, size)
        _R.bases, _R.objects = bases, objects


def _sweep() -> None:
    """Note newly dead objects; let the oldest dead ones go beyond QUARANTINE_BYTES. Holds the lock."""
    known = {id(obj) for obj in _R.dead}
    _R.dead.extend(obj for obj in _R.objects if id(obj) not in known and not _alive(obj))
    held = sum(obj.size for obj in _R.dead)
    drop = []
    while _R.dead and held > QUARANTINE_BYTES:
        obj = _R.dead.pop(0)
        held -= obj.size
        drop.append(obj)
    if not drop:
        return
    gone = {id(obj) for obj in drop}
    keep = [(b, o) for b, o in zip(_R.bases, _R.objects) if id(o) not in gone]
    _R.bases = [b for b, _ in keep]
    _R.objects = [o for _, o in keep]
    _R.largest = max((o.size for o in _R.objects), default=0)
    for obj in drop:
        left = _R.holds[id(obj.owner)] - 1
        if left:
            _R.holds[id(obj.owner)] = left
        else:
            del _R.holds[id(obj.owner)]


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
    bases: Sequence[int] = _R.bases
    objects: Sequence[HostObject] = _R.objects
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
        covered = ptr + count <= obj.base + obj.size
        if alive and covered:
            return Hit(obj, True, True)
        if best is None or (alive and not best.alive) or (alive == best.alive and obj.size > best.obj.size):
            best = Hit(obj, alive, False)
    return best


def forget() -> None:
    """Let every object go (``_state.reset_for_tests``)."""
    with _R.lock:
        _R.bases, _R.objects = [], []
        _R.holds.clear()
        _R.dead.clear()
        _R.largest = 0
