"""``ge-plugin install-backend DIR``: put the ``ge`` backend into an existing Triton installation."""

from __future__ import annotations

import argparse
from pathlib import Path

from ge_plugin.cli._common import add_command

EXAMPLES = """
  ge-plugin install-backend /opt/tritonserver/backends
  tritonserver --model-repository=/models --backend-directory=/opt/tritonserver/backends
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers,
        "install-backend",
        help="write DIR/ge/model.py, the ge backend, into a Triton backend directory",
        description=(
            'Triton serves every model whose config says backend: "ge" with DIR/ge/model.py (a Python-based '
            "backend). The Python backend itself (DIR/python) must already be there, as it is in NVIDIA's "
            "containers; ge-plugin must be installed in the Python environment the stub runs."
        ),
        examples=EXAMPLES,
    )
    parser.add_argument("backend_dir", type=Path, metavar="DIR", help="Triton's --backend-directory")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ge_plugin.backend.install import install_backend

    path = install_backend(args.backend_dir)
    print(f"installed {path}")
    if not (args.backend_dir / "python" / "libtriton_python.so").exists():
        print(f"note: {args.backend_dir / 'python'} has no Python backend yet; the ge backend needs it")
    return 0
