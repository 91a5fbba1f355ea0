"""Where in the user's program a simulated call came from, and what made a piece of memory.

A sanitizer message is only useful if it points at the program's own code: the allocation that was overrun
was made *there*, the freed pointer was freed *there*. :func:`user_site` walks up from the simulator to the
first frame outside ``ge_plugin.sim`` (about half a microsecond), so allocations can afford it every time.
An :class:`Origin` keeps the frame's file and line, and formats them only when a message needs them.
"""

from __future__ import annotations

import os
import sys
from types import FrameType
from typing import NamedTuple

_SIM_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class Site(NamedTuple):
    """A line of the user's program; ``file`` is empty when no frame outside the simulator was found."""

    file: str
    line: int

    def __str__(self) -> str:
        if not self.file:
            return "an unknown place"
        return f"{_short(self.file)}:{self.line}"


UNKNOWN = Site("", 0)


def _short(path: str) -> str:
    """``path`` relative to the working directory when it lies below it (as tracebacks read best)."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if relative.startswith("..") else relative


def user_site() -> Site:
    """The first frame outside ``ge_plugin.sim`` on this thread's stack (the user's call)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_SIM_DIR):
        frame = frame.f_back
    if frame is None:
        return UNKNOWN
    return Site(frame.f_code.co_filename, frame.f_lineno)


class Origin(NamedTuple):
    """The call that made (or freed) something, e.g. ``acl.rt.malloc(1024)``, and where the program made it."""

    call: str
    site: Site

    def __str__(self) -> str:
        return f"{self.call} at {self.site}" if self.site.file else self.call


def origin(call: str) -> Origin:
    """``call`` made at the user's current line."""
    return Origin(call, user_site())
