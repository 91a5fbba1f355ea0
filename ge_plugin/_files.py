"""Writing generated files (configs, ONNX models, sim OMs) the way a running Triton can read them."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def write_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write through a temporary file and a rename, so that a reader (Triton polling a repository, a
    simulator loading a model) never sees half a file.

    The file keeps the mode of the one it replaces, or gets the usual 0666 & ~umask: mkstemp's 0600 would
    hide it from a tritonserver running as another user.
    """
    path = Path(path)
    if path.exists():
        mode = stat.S_IMODE(path.stat().st_mode)
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
