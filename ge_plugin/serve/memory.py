"""tritonserver's allocator: jemalloc, preloaded, when the system has it.

tritonserver 2.51's RSS grows with large requests and stays up (issue reports: 103 to 518 MB after 8 rounds
of 64 MiB requests per protocol), the usual sign of an allocator keeping freed memory; jemalloc gives freed
pages back to the kernel after a decay time. It is loaded with ``LD_PRELOAD``, which tritonserver's Python
stubs inherit too. What it changes, measured by ``benchmarks/jemalloc_rss.py``, is in docs/serving.md
("Memory"): for 64 MiB requests that tritonserver reads and refuses, HTTP gives everything back with either
allocator and gRPC keeps about 260 MB with either, so what gRPC keeps there is not the allocator's.

``ge-plugin serve --jemalloc`` (or ``GE_PLUGIN_JEMALLOC``) says which: ``auto`` (the default) looks for
Debian's ``libjemalloc2`` (``scripts/system-deps.sh`` installs it) at the paths in ``CANDIDATES``; ``off``
keeps glibc's malloc; any other value is the library's path, which must exist.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ge_plugin.errors import ServeError

#: where Debian and Ubuntu (libjemalloc2), and RPM distributions, put the library
CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
    "/usr/lib64/libjemalloc.so.2",
    "/usr/lib/libjemalloc.so.2",
)
#: return freed pages after a second (jemalloc's default is 10 s) from a background thread, so an idle
#: server shrinks too, not only one that allocates again; purged at once rather than MADV_FREE'd, which
#: would leave them counted in RSS until the kernel wants them
MALLOC_CONF = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0"
ENV = "GE_PLUGIN_JEMALLOC"


def find_jemalloc(choice: str) -> Path | None:
    """The library ``choice`` names ("auto", "off" or a path); ServeError for a path that is not there."""
    if choice == "off":
        return None
    if choice == "auto":
        return next((Path(p) for p in CANDIDATES if os.path.isfile(p)), None)
    path = Path(choice)
    if not path.is_file():
        raise ServeError(
            f"--jemalloc {choice}: no such file (use auto, off, or the path of libjemalloc.so.2)"
        )
    return path


def allocator_environment(choice: str, base: Mapping[str, str]) -> dict[str, str]:
    """The variables to add to tritonserver's environment ``base`` for the allocator ``choice``."""
    library = find_jemalloc(choice)
    if library is None:
        return {}
    preload = " ".join(p for p in (str(library), base.get("LD_PRELOAD", "")) if p)
    return {"LD_PRELOAD": preload, "MALLOC_CONF": base.get("MALLOC_CONF", MALLOC_CONF)}
