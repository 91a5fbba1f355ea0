"""Installs the ``ge`` backend into a Triton backend directory: ``<backend-dir>/ge/model.py``.

Triton's Python-based backends serve every model whose config says ``backend: "ge"`` with the shared
``model.py`` in ``<backend-dir>/ge/``. That file is this package's ``ge_plugin/backend/model.py``, copied
through importlib.resources so it works from a wheel as well as from a source tree.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

BACKEND_NAME = "ge"


def model_source() -> str:
    return resources.files("ge_plugin.backend").joinpath("model.py").read_text(encoding="utf-8")


def install_backend(backend_dir: str | os.PathLike[str]) -> Path:
    """Write (or refresh) ``backend_dir/ge/model.py``; returns its path. Unchanged files are not touched,
    so Triton does not see a new mtime and reload models for nothing."""
    target = Path(backend_dir) / BACKEND_NAME / "model.py"
    target.parent.mkdir(parents=True, exist_ok=True)
    source = model_source()
    if not target.exists() or target.read_text(encoding="utf-8") != source:
        target.write_text(source, encoding="utf-8")
    return target
