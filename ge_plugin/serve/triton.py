"""Runs the tritonserver 2.51 that ships inside the ``nvidia-pytriton==0.7.0`` wheel, with backend ``ge``.

The wheel's server is usable by hand once its Python backend finds three things (all verified on our
machines): the stub built for the running Python in ``<backend-dir>/python/``, the wheel's own libraries
on ``LD_LIBRARY_PATH``, and this environment's ``bin`` first on ``PATH`` (the stub's embedded interpreter
finds its site-packages through ``python3`` on PATH). ``prepare_backends`` builds such a backend directory
without touching site-packages; ``TritonServer`` starts the server bound to loopback and stops it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from ge_plugin.backend.install import install_backend
from ge_plugin.errors import ServeError

PYTRITON_PIN = "nvidia-pytriton==0.7.0"


@attrs.frozen
class Distribution:
    """Where the wheel keeps the server, the Python backend and its libraries."""

    root: Path  #: <site-packages>/pytriton/tritonserver
    libs: Path  #: <site-packages>/nvidia_pytriton.libs

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "tritonserver"

    @property
    def python_backend(self) -> Path:
        return self.root / "backends" / "python"

    def stub(self, version: str | None = None) -> Path:
        version = version or f"{sys.version_info.major}.{sys.version_info.minor}"
        return self.root / "python_backend_stubs" / version / "triton_python_backend_stub"


def find_distribution() -> Distribution:
    """The installed nvidia-pytriton's server, or a ServeError saying how to install it."""
    try:
        import pytriton
    except ImportError:
        raise ServeError(
            f"tritonserver comes from the nvidia-pytriton wheel, which is not installed: pip install '{PYTRITON_PIN}'"
        ) from None
    root = Path(pytriton.__file__).resolve().parent / "tritonserver"
    dist = Distribution(root=root, libs=root.parent.parent / "nvidia_pytriton.libs")
    if not dist.binary.is_file():
        raise ServeError(f"{dist.binary} is missing: reinstall '{PYTRITON_PIN}'")
    return dist


def prepare_backends(backend_dir: str | os.PathLike, dist: Distribution | None = None) -> Path:
    """``backend_dir/python`` (the wheel's Python backend + this Python's stub) and ``backend_dir/ge``."""
    dist = dist or find_distribution()
    stub = dist.stub()
    if not stub.is_file():
        have = sorted(p.name for p in (dist.root / "python_backend_stubs").iterdir() if p.is_dir())
        raise ServeError(
            f"nvidia-pytriton has no Python backend stub for Python {sys.version_info.major}.{sys.version_info.minor} "
            f"(it has {', '.join(have)}); run ge-plugin with one of those Python versions"
        )
    target = Path(backend_dir)
    python_dir = target / "python"
    python_dir.mkdir(parents=True, exist_ok=True)
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        _copy_if_changed(dist.python_backend / name, python_dir / name)
    _copy_if_changed(stub, python_dir / "triton_python_backend_stub")
    install_backend(target)
    return target


def _copy_if_changed(src: Path, dst: Path) -> None:
    if (
        dst.exists()
        and dst.stat().st_size == src.stat().st_size
        and dst.stat().st_mtime >= src.stat().st_mtime
    ):
        return
    shutil.copy2(src, dst)


def server_environment(dist: Distribution, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the server and its stubs need (see the module docstring)."""
    env = dict(os.environ if base is None else base)
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    parts = [str(dist.libs), libdir, env.get("LD_LIBRARY_PATH", "")]
    env["LD_LIBRARY_PATH"] = ":".join(p for p in parts if p)
    bin_dir = os.path.dirname(sys.executable)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    return env


@attrs.define
class ServerOptions:
    repository: Path
    host: str = "127.0.0.1"
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    model_control_mode: str = "none"
    load_models: Sequence[str] = ()
    log_verbose: int = 0
    work_dir: Path | None = None
    extra_args: Sequence[str] = ()
    environment: Mapping[str, str] = attrs.Factory(dict)

    def command(self, dist: Distribution, backend_dir: Path) -> list[str]:
        cmd = [
            str(dist.binary),
            f"--model-repository={Path(self.repository).resolve()}",
            f"--backend-directory={backend_dir}",
            f"--cache-directory={dist.root / 'caches'}",
            f"--http-address={self.host}",
            f"--grpc-address={self.host}",
            f"--metrics-address={self.host}",
            f"--http-port={self.http_port}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-port={self.metrics_port}",
            f"--model-control-mode={self.model_control_mode}",
            "--disable-auto-complete-config",
            f"--log-verbose={self.log_verbose}",
        ]
        cmd += [f"--load-model={name}" for name in self.load_models]
        cmd += list(self.extra_args)
        return cmd


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class TritonServer:
    """A running tritonserver; a context manager that stops it (SIGINT, then SIGKILL) on exit."""

    def __init__(self, options: ServerOptions, *, stdout=None, stderr=None):
        self.options = options
        self.dist = find_distribution()
        work = Path(options.work_dir or Path.cwd() / "build" / "triton")
        self.backend_dir = prepare_backends(work / "backends", self.dist)
        env = server_environment(self.dist)
        env.update(options.environment)
        self.command = options.command(self.dist, self.backend_dir.resolve())
        self.process = subprocess.Popen(self.command, env=env, stdout=stdout, stderr=stderr)

    @property
    def http_url(self) -> str:
        return f"{self.options.host}:{self.options.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{self.options.host}:{self.options.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.options.host}:{self.options.metrics_port}/metrics"

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until /v2/health/ready says 200; ServeError if the server exits or the time runs out."""
        deadline = time.monotonic() + timeout
        url = f"http://{self.http_url}/v2/health/ready"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServeError(
                    f"tritonserver exited with status {self.process.returncode} before it was ready"
                )
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.2)
        raise ServeError(f"tritonserver was not ready after {timeout:.0f} s ({url})")

    def stop(self, timeout: float = 60.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self) -> TritonServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
