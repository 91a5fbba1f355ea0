"""Runs the tritonserver 2.51 that ships inside the ``nvidia-pytriton==0.7.0`` wheel, with backend ``ge``.

The wheel's server is usable by hand once its Python backend finds three things (all verified on our
machines): the stub built for the running Python in ``<backend-dir>/python/``, the wheel's own libraries
on ``LD_LIBRARY_PATH``, and this environment's ``bin`` first on ``PATH`` (the stub's embedded interpreter
finds its site-packages through ``python3`` on PATH). ``prepare_backends`` builds such a backend directory
without touching site-packages; ``TritonServer`` starts the server bound to loopback and stops it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import attrs

from ge_plugin import gone_clients
from ge_plugin.backend.install import install_backend
from ge_plugin.errors import ServeError
from ge_plugin.gone_clients import GoneClients
from ge_plugin.serve.access import FLAGS, Access, Restriction, internal_key, parse_restriction
from ge_plugin.serve.clients import keyed_client
from ge_plugin.serve.front import MAX_BODY_BYTES, MAX_INPUT_BYTES, Front, Rules
from ge_plugin.serve.front.openai import TextService
from ge_plugin.serve.front.server import MAX_BUFFERED_BYTES, WRITE_TIMEOUT_S
from ge_plugin.serve.grpc_front.gate import TRITON_MAX_MESSAGE_BYTES, GrpcRules
from ge_plugin.serve.grpc_front.process import FrontProcess, FrontSettings
from ge_plugin.serve.grpc_front.server import read_counter
from ge_plugin.serve.memory import (
    GRPC_BUFFER_BUDGET,
    allocator_environment,
    grpc_pool_size,
    largest_exchange,
    repository_configs,
)
from ge_plugin.serve.orphans import dying_with_this_process
from ge_plugin.serve.supervise import StubWatch, stubs_of

PYTRITON_PIN = "nvidia-pytriton==0.7.0"
#: the glibc the tritonserver in nvidia-pytriton 0.7.0 needs: its wheels are manylinux_2_35
TRITON_MIN_GLIBC = (2, 35)


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


def prepare_backends(backend_dir: str | os.PathLike[str], dist: Distribution | None = None) -> Path:
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


def default_work_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where ``ge-plugin serve`` prepares its backend directory unless told (``--work-dir``): this user's cache,
    ``$XDG_CACHE_HOME/ge-plugin`` (``~/.cache/ge-plugin``), one folder per Python environment, since each
    needs the stub of its own Python and the ``ge`` backend of its own ge-plugin. Never the folder the
    command runs from."""
    environ = os.environ if environ is None else environ
    cache = environ.get("XDG_CACHE_HOME", "")
    root = Path(cache) if cache and os.path.isabs(cache) else Path.home() / ".cache"
    tag = hashlib.sha256(os.fsencode(sys.prefix)).hexdigest()[:12]
    return root / "ge-plugin" / f"triton-py{sys.version_info.major}.{sys.version_info.minor}-{tag}"


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


#: tritonserver's own default; what `ge-plugin serve` passes unless told otherwise (docs/serving.md)
EXIT_TIMEOUT_S = 30
#: once every model is unloaded, how long tritonserver may take to exit by itself before a version that a
#: dead stub leaked is taken for what it waits for
LEAK_GRACE_S = 3.0


def _shm_prefix() -> str:
    return f"ge_plugin_{secrets.token_hex(4)}_"


@attrs.define
class ServerOptions:
    """What ``ge-plugin serve`` and the tests start tritonserver with; the defaults are ge-plugin's choice for an
    Ascend fleet (docs/serving.md, "Failure behaviour")."""

    #: a folder, or an object-store URL tritonserver reads itself (``s3://``, ``gs://``, ``as://``)
    repository: Path | str
    host: str = "127.0.0.1"
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    model_control_mode: str = "none"
    load_models: Sequence[str] = ()
    log_verbose: int = 0
    #: where the backend directory is prepared (None: ``default_work_dir()``, the user's cache)
    work_dir: Path | None = None
    extra_args: Sequence[str] = ()
    environment: Mapping[str, str] = attrs.Factory(dict)
    #: how long a stop may take: tritonserver waits for open HTTP connections and in-flight requests, then
    #: unloads the models, all within this budget
    exit_timeout_s: int = EXIT_TIMEOUT_S
    #: /v2/health/ready says whether the server serves, not whether every model loaded (per-model readiness
    #: is /v2/models/<m>/ready); with strict readiness one broken model takes the whole server out
    strict_readiness: bool = False
    #: names every /dev/shm region of this server's stubs (the Python backend adds a UUID), so that what a
    #: crashed stub leaves behind can be told from other servers' regions and removed
    shm_prefix: str = attrs.Factory(_shm_prefix)
    #: HTTP goes through ge-plugin's front (serve/front): requests tritonserver 2.51 dies of are refused, the
    #: rest re-encoded; tritonserver's own HTTP endpoint then listens on loopback only
    http_guard: bool = True
    #: gRPC goes through ge-plugin's gRPC front (serve/grpc_front), in a process of its own: every request
    #: parsed, checked and re-encoded; tritonserver's own gRPC endpoint then listens on a private Unix socket
    grpc_guard: bool = True
    #: the most one input of a request may declare (the fronts refuse more: HTTP 400, gRPC INVALID_ARGUMENT)
    max_input_bytes: int = MAX_INPUT_BYTES
    #: the largest request the fronts take: an HTTP body as sent and once inflated (413 beyond), a gRPC
    #: message (RESOURCE_EXHAUSTED beyond)
    max_body_bytes: int = MAX_BODY_BYTES
    #: an HTTP client whose answer does not move for this long is closed (the front's write timeout)
    write_timeout_s: float = WRITE_TIMEOUT_S
    #: the most the HTTP front holds for all its clients together; past it the slowest readers are closed
    max_buffered_bytes: int = MAX_BUFFERED_BYTES
    #: the most tritonserver's gRPC endpoint may keep in request and response buffers it holds for reuse: the
    #: pool size (``--grpc-infer-allocation-pool-size``) is chosen from it and the largest exchange the
    #: served models allow (serve/memory.py); None: tritonserver's own pool size (8)
    grpc_buffer_budget: int | None = GRPC_BUFFER_BUDGET
    #: tritonserver's allocator: "auto" preloads jemalloc when the system has it, "off" keeps glibc's, or a
    #: path to the library (serve/memory.py)
    jemalloc: str = "auto"
    #: tritonserver's own HTTP port when the guard is in front (0: a free loopback port)
    internal_http_port: int = 0
    #: tritonserver's own metrics port when the front is on the metrics port too (0: a free loopback port)
    internal_metrics_port: int = 0
    #: with the gRPC front: the Unix socket tritonserver's gRPC endpoint listens on, in a folder only this
    #: user reaches (empty: ``TritonServer`` makes one)
    internal_grpc_socket: str = ""
    #: the front serves text for models with a tokenizer: OpenAI's /v1 endpoints and text_input on Triton's
    #: generate endpoints (serve/front/openai.py); needs the front (http_guard)
    text_endpoints: bool = True
    #: the OpenAI endpoints on a port of their own too, which serves nothing else (0: the HTTP port only)
    openai_port: int = 0
    #: reload a model whose stub died and end its old stubs (serve/supervise.py); ``ge-plugin serve`` turns
    #: it on, tests that kill stubs on purpose leave it off
    supervise_stubs: bool = False
    #: the operator's admin key (serve/access.py): the restricted API groups open to clients that send it;
    #: None: ``internal_key``, which no client learns, so those groups are closed to every client
    admin_key: str | None = attrs.field(default=None, repr=False)
    #: the key ge-plugin's own control calls use when the operator gave none, and the one that closes the
    #: repository API on a protocol whose loads no front checks
    internal_key: str = attrs.field(factory=internal_key, repr=False)
    #: load requests may upload model files (``file:`` parameters): code the server then runs
    allow_model_files: bool = False
    #: folders besides each model's own that a load's config override may take its OM from
    model_roots: Sequence[Path] = ()
    #: restricted API groups opened to every client (``ge-plugin serve --open-api``)
    open_apis: frozenset[str] = frozenset()

    def access(self) -> Access:
        """The access policy of this server: the key per API group on each protocol, what a load may do.
        tritonserver's own restriction flags passed through are read here, in its form, and nowhere else."""
        passed: dict[str, tuple[Restriction, ...]] = {}
        for protocol, flag in FLAGS.items():
            passed[protocol] = tuple(
                parse_restriction(value, protocol)
                for name, value in _flag_values(self.extra_args)
                if name == flag
            )
        return Access(
            admin_key=self.admin_key or self.internal_key,
            operator_key=self.admin_key is not None,
            allow_model_files=self.allow_model_files,
            model_roots=tuple(Path(root) for root in self.model_roots),
            repository=None if remote_repository(self.repository) else Path(self.repository),
            passed=passed,
            opened=frozenset(self.open_apis),
            load_checked=frozenset(
                name for name, guarded in (("http", self.http_guard), ("grpc", self.grpc_guard)) if guarded
            ),
            internal=self.internal_key,
        )

    def rules(self, access: Access | None = None) -> Rules:
        """What the front forwards: besides its own, the key headers of ``access`` (the front checks them and
        writes them itself) and the headers ``--http-header-forward-pattern`` passes through to the model."""
        pattern = None
        for name, value in _flag_values(self.extra_args):
            if name == "--http-header-forward-pattern":
                pattern = re.compile(value, re.IGNORECASE)
        return Rules(
            upstream_host=f"127.0.0.1:{self.internal_http_port}".encode(),
            max_input_bytes=self.max_input_bytes,
            max_body_bytes=self.max_body_bytes,
            access=access or self.access(),
            forward_pattern=pattern,
        )

    def grpc_rules(self, access: Access | None = None) -> GrpcRules:
        """What the gRPC front forwards: ``access``'s keys (checked, then written by the front) and the
        metadata ``--grpc-header-forward-pattern`` passes through to the model."""
        pattern = None
        for name, value in _flag_values(self.extra_args):
            if name == "--grpc-header-forward-pattern":
                pattern = re.compile(value, re.IGNORECASE)
        return GrpcRules(
            access=access or self.access(), max_input_bytes=self.max_input_bytes, forward_pattern=pattern
        )

    @property
    def internal_grpc_target(self) -> str:
        """tritonserver's own gRPC endpoint behind the front, as a gRPC target. tritonserver 2.51 listens on
        ``--grpc-address`` + ":" + ``--grpc-port``, which for ``unix:PATH`` and port 0 is the socket ``PATH:0``."""
        return f"unix:{self.internal_grpc_socket}:0"

    def grpc_pool_size(self) -> int | None:
        """tritonserver's ``--grpc-infer-allocation-pool-size`` for ``grpc_buffer_budget``: the largest exchange
        the repository's models allow (a message tritonserver takes, each way, where no config bounds it),
        kept that many times within the budget; None when the budget is None or the pool is passed through."""
        if self.grpc_buffer_budget is None or any(
            name == "--grpc-infer-allocation-pool-size" for name, _ in _flag_values(self.extra_args)
        ):
            return None
        unknown = (
            min(self.max_body_bytes, TRITON_MAX_MESSAGE_BYTES)
            if self.grpc_guard
            else TRITON_MAX_MESSAGE_BYTES
        )
        if remote_repository(self.repository):
            exchange = 2 * unknown  # its configs are tritonserver's to read
        else:
            exchange = largest_exchange(repository_configs(Path(self.repository)), unknown)
        return grpc_pool_size(self.grpc_buffer_budget, exchange)

    def command(self, dist: Distribution, backend_dir: Path) -> list[str]:
        if self.grpc_guard:
            grpc_address, grpc_port = f"unix:{self.internal_grpc_socket}", 0
        else:
            grpc_address, grpc_port = self.host, self.grpc_port
        cmd = [
            str(dist.binary),
            f"--model-repository={self.repository if remote_repository(self.repository) else Path(self.repository).resolve()}",
            f"--backend-directory={backend_dir}",
            f"--cache-directory={dist.root / 'caches'}",
            f"--http-address={'127.0.0.1' if self.http_guard else self.host}",
            f"--grpc-address={grpc_address}",
            f"--metrics-address={'127.0.0.1' if self.http_guard else self.host}",
            f"--http-port={self.internal_http_port if self.http_guard else self.http_port}",
            f"--grpc-port={grpc_port}",
            f"--metrics-port={self.internal_metrics_port if self.http_guard else self.metrics_port}",
            f"--model-control-mode={self.model_control_mode}",
            "--disable-auto-complete-config",
            f"--log-verbose={self.log_verbose}",
            f"--exit-timeout-secs={self.exit_timeout_s}",
            f"--strict-readiness={str(self.strict_readiness).lower()}",
            f"--backend-config=python,shm-region-prefix-name={self.shm_prefix}",
        ]
        cmd += [f"--load-model={name}" for name in self.load_models]
        pool = self.grpc_pool_size()
        if pool is not None:
            cmd.append(f"--grpc-infer-allocation-pool-size={pool}")
        cmd += self.access().tritonserver_args()
        cmd += list(self.extra_args)
        return cmd


#: URL schemes of the object stores tritonserver 2.51 reads a model repository from (it copies each model to a
#: local folder before the backend sees it, so the ge backend's relative om_model_path works unchanged)
REMOTE_SCHEMES = ("s3://", "gs://", "as://")


def remote_repository(repository: Path | str) -> bool:
    """Whether the repository is an object-store URL (kept as written: a Path would fold its ``//``)."""
    return isinstance(repository, str) and repository.startswith(REMOTE_SCHEMES)


def _flag_values(args: Sequence[str]) -> list[tuple[str, str]]:
    """(name, value) of every ``--name=value`` or ``--name value`` among tritonserver arguments."""
    found = []
    for i, arg in enumerate(args):
        name, sep, value = arg.partition("=")
        if sep:
            found.append((name, value))
        elif arg.startswith("--") and i + 1 < len(args) and not args[i + 1].startswith("--"):
            found.append((arg, args[i + 1]))
    return found


def _mapped(region: Path) -> bool:
    """Whether any process still maps a /dev/shm region."""
    needle = str(region).encode()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                if needle in (proc / "maps").read_bytes():
                    return True
    return False


#: the folders of tritonserver's gRPC socket behind the gRPC front: ``<tmp>/ge-plugin-grpc-<pid>-<random>``
SOCKET_DIR_PREFIX = "ge-plugin-grpc-"


def _remove_stale_socket_dirs() -> None:
    """The socket folders of this user's ``ge-plugin`` processes that are gone (``kill -9`` leaves them)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{SOCKET_DIR_PREFIX}*-*"):
        pid = folder.name[len(SOCKET_DIR_PREFIX) :].split("-", 1)[0]
        try:
            if not pid.isdigit() or folder.stat().st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue  # not ours to look at, or being removed by its own process


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


#: what ends a command from outside: Ctrl-C, a CI timeout or ``kill``, a closed terminal
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class SignalStop(KeyboardInterrupt):
    """SIGTERM or SIGHUP (or SIGINT) raised in the main thread as an exception, as Python raises SIGINT, so that
    the ``with TritonServer(...)`` it unwinds through stops tritonserver and removes its stubs and /dev/shm
    regions: killed by the signal's default action, the command would leave them behind."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_on_stop_signals() -> dict[int, Any]:
    """Stop signals raise SignalStop from now on, where nothing else handles them (a command's own handlers,
    such as ``ge-plugin serve``'s, are kept); the handlers replaced. Only the main thread can set them."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def stop(signum: int, _frame: object) -> None:
        raise SignalStop(signum)

    replaced: dict[int, Any] = {}
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) in (signal.SIG_DFL, signal.default_int_handler):
            replaced[signum] = signal.signal(signum, stop)
    return replaced


@contextlib.contextmanager
def _while_stopping(process: subprocess.Popen[bytes]) -> Iterator[None]:
    """While a stop runs, a stop signal ends tritonserver at once instead of cutting the clean-up short; the
    handlers are as they were afterwards, and the signal is then raised again for them: a Ctrl-C that lands
    while a command stops its server (the end of demo, tune's last candidate) still ends the command, where
    it used to be spent on the stop and the command went on to exit 0."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def hurry(signum: int, _frame: object) -> None:
        received.append(signum)
        if process.poll() is None:
            process.kill()

    saved = {signum: signal.signal(signum, hurry) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
        if received:
            signal.raise_signal(received[0])


class TritonServer:
    """A running tritonserver; a context manager that stops it (SIGINT, then SIGKILL) on exit and cleans up
    after it, also when SIGINT, SIGTERM or SIGHUP ends the command (``SignalStop``)."""

    def __init__(
        self, options: ServerOptions, *, stdout: IO[bytes] | None = None, stderr: IO[bytes] | None = None
    ):
        self.options = options
        #: the access policy (serve/access.py); ``admin_headers`` and ``control_client`` carry its keys
        self.access = options.access()
        self.dist = find_distribution()
        work = Path(options.work_dir) if options.work_dir is not None else default_work_dir()
        self.backend_dir = prepare_backends(work / "backends", self.dist)
        env = server_environment(self.dist)
        env.update(allocator_environment(options.jemalloc, env))
        env.update(options.environment)
        self._replaced_handlers: dict[int, Any] = {}
        self.guard: Front | None = None
        self.metrics_front: Front | None = None
        self.openai_front: Front | None = None
        #: the gRPC front's process, and the private folder of tritonserver's gRPC socket
        self.grpc_front: FrontProcess | None = None
        self._grpc_dir: Path | None = None
        if options.openai_port and not (options.http_guard and options.text_endpoints):
            raise ServeError(
                "--openai-port: the OpenAI endpoints are served by the HTTP front (--http-guard, --text)"
            )
        #: tickets of HTTP requests whose client left before their answer (the front writes, the stubs read)
        self.gone_clients: GoneClients | None = None
        self.watch: StubWatch | None = None
        #: the stop ended tritonserver because only a dead stub's leaked model version was left
        self.ended_a_leak = False
        if options.http_guard and (not options.internal_http_port or not options.internal_metrics_port):
            options = self.options = attrs.evolve(
                options,
                internal_http_port=options.internal_http_port or free_port(),
                internal_metrics_port=options.internal_metrics_port or free_port(),
            )
        try:
            if options.grpc_guard and not options.internal_grpc_socket:
                _remove_stale_socket_dirs()
                # 0700: this user's only; named after this process, so that a later start can tell it is stale
                self._grpc_dir = Path(tempfile.mkdtemp(prefix=f"{SOCKET_DIR_PREFIX}{os.getpid()}-"))
                options = self.options = attrs.evolve(
                    options, internal_grpc_socket=str(self._grpc_dir / "tritonserver")
                )
            if options.grpc_guard:
                counter = ""
                if self._grpc_dir is not None:
                    counter = str(self._grpc_dir / "refused")
                    Path(counter).write_bytes(bytes(8))
                self.grpc_front = FrontProcess(
                    FrontSettings(
                        (options.host, options.grpc_port),
                        options.internal_grpc_target,
                        options.grpc_rules(self.access),
                        max_message_bytes=min(options.max_body_bytes, TRITON_MAX_MESSAGE_BYTES),
                        grace_s=options.exit_timeout_s,
                        counter=counter,
                    ),
                    stderr=stderr,
                    # the allocator tritonserver gets: a 2 MiB answer cost the front 3.8 ms of CPU with glibc's
                    # malloc (fresh pages faulted in for every buffer), 2.3 ms with jemalloc (measured)
                    env={**os.environ, **allocator_environment(options.jemalloc, os.environ)},
                )
            if options.http_guard:
                self._open_fronts(options, env)
            self.command = options.command(self.dist, self.backend_dir.resolve())
            # dies with this process, however it dies: whatever ends ge-plugin serve ends tritonserver
            self.process = subprocess.Popen(
                dying_with_this_process(self.command), env=env, stdout=stdout, stderr=stderr
            )
        except BaseException:
            self._close_fronts()
            raise
        if options.supervise_stubs:
            self.watch = StubWatch(self.process.pid, self._grpc_client)

    def _open_fronts(self, options: ServerOptions, env: dict[str, str]) -> None:
        self.gone_clients = GoneClients.create()
        env[gone_clients.ENV] = str(self.gone_clients.path)
        self.guard = Front(
            (options.host, options.http_port),
            ("127.0.0.1", options.internal_http_port),
            rules=options.rules(self.access),
            write_timeout_s=options.write_timeout_s,
            max_buffered_bytes=options.max_buffered_bytes,
            gone_clients=self.gone_clients,
            text=self._text_service(),
        )
        if options.text_endpoints and options.openai_port:
            self.openai_front = Front(
                (options.host, options.openai_port),
                ("127.0.0.1", options.internal_http_port),
                rules=options.rules(self.access),
                write_timeout_s=options.write_timeout_s,
                max_buffered_bytes=options.max_buffered_bytes,
                gone_clients=self.gone_clients,
                text=self._text_service(only_openai=True),
            )
        self.metrics_front = Front(
            (options.host, options.metrics_port),
            ("127.0.0.1", options.internal_metrics_port),
            rules=Rules(
                upstream_host=f"127.0.0.1:{options.internal_metrics_port}".encode(), accept_encoding=False
            ),
            metrics_tail=self.metrics_text,
        )

    def admin_headers(self, protocol: str = "http") -> dict[str, str]:
        """The headers (HTTP) or gRPC metadata that open every restricted API group of this server: what
        ge-plugin's own control calls send (never shown to a client)."""
        return self.access.client_headers(protocol)

    def _text_service(self, **kwargs: bool) -> TextService | None:
        """The text endpoints read each model's tokenizer from the repository's folders (not from an object
        store, which only tritonserver reads)."""
        if not self.options.text_endpoints or remote_repository(self.options.repository):
            return None
        return TextService(Path(self.options.repository), **kwargs)

    def control_client(self, protocol: str = "grpc", *, internal: bool = False, **kwargs: Any) -> Any:
        """A tritonclient (``tritonclient.http`` or ``.grpc``) for this server whose every call carries the
        keys of ``admin_headers``; ``kwargs`` go to its constructor. ``internal`` (gRPC): to tritonserver's
        own endpoint, past the gRPC front (ge-plugin's own calls while the front stops, the stub watch)."""
        grpc_url = self.internal_grpc_url if internal else self.grpc_url
        return keyed_client(
            protocol,
            self.http_url if protocol == "http" else grpc_url,
            self.admin_headers(protocol),
            **kwargs,
        )

    def _grpc_client(self) -> Any:
        return self.control_client("grpc", internal=True)

    def metrics_text(self) -> bytes:
        """ge-plugin serve's own Prometheus families, after tritonserver's on the metrics port."""
        refused = self.guard.refused if self.guard is not None else 0
        text = (
            "# HELP ge_serve_http_refused_total HTTP requests the front answered itself (refused)\n"
            "# TYPE ge_serve_http_refused_total counter\n"
            f"ge_serve_http_refused_total {refused}\n"
        ).encode()
        if self.grpc_front is not None and self.grpc_front.settings.counter:
            text += (
                "# HELP ge_serve_grpc_refused_total gRPC requests the gRPC front answered itself (refused)\n"
                "# TYPE ge_serve_grpc_refused_total counter\n"
                f"ge_serve_grpc_refused_total {read_counter(self.grpc_front.settings.counter)}\n"
            ).encode()
        if self.watch is not None:
            text += self.watch.metrics_text()
        return text

    def _close_fronts(self) -> None:
        for front in (self.guard, self.metrics_front, self.openai_front):
            if front is not None:
                front.close()
        if self.grpc_front is not None:
            self.grpc_front.stop()
        if self._grpc_dir is not None:
            shutil.rmtree(self._grpc_dir, ignore_errors=True)
            self._grpc_dir = None
        if self.gone_clients is not None:
            self.gone_clients.close(unlink=True)
            self.gone_clients = None

    @property
    def http_url(self) -> str:
        return f"{self.options.host}:{self.options.http_port}"

    @property
    def openai_url(self) -> str:
        """The OpenAI base URL (``openai.OpenAI(base_url=...)``)."""
        port = self.options.openai_port or self.options.http_port
        return f"http://{self.options.host}:{port}/v1"

    @property
    def grpc_url(self) -> str:
        return f"{self.options.host}:{self.options.grpc_port}"

    @property
    def internal_grpc_url(self) -> str:
        """tritonserver's own gRPC endpoint: behind the gRPC front, its private socket."""
        return self.options.internal_grpc_target if self.options.grpc_guard else self.grpc_url

    @property
    def metrics_url(self) -> str:
        return f"http://{self.options.host}:{self.options.metrics_port}/metrics"

    def wait_ready(self, timeout: float = 120.0, models: Sequence[str] = ()) -> None:
        """Until the server, and each of ``models``, says it is ready (tritonclient's ``is_server_ready`` /
        ``is_model_ready``) and its metrics endpoint listens; ServeError if the server exits or the time runs
        out."""
        import tritonclient.http as httpclient
        from tritonclient.utils import InferenceServerException

        deadline = time.monotonic() + timeout
        self.wait_grpc_front(timeout)
        client = httpclient.InferenceServerClient(self.http_url, connection_timeout=2.0, network_timeout=2.0)
        try:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise ServeError(
                        f"tritonserver exited with status {self.process.returncode} before it was ready"
                    )
                try:
                    if (
                        client.is_server_ready()
                        and all(client.is_model_ready(m) for m in models)
                        and self._metrics_listen()
                    ):
                        return
                except (InferenceServerException, OSError):
                    pass  # not listening yet
                time.sleep(0.2)
        finally:
            client.close()
        waiting = f"{self.http_url}" + (f", models {', '.join(models)}" if models else "")
        raise ServeError(f"tritonserver was not ready after {timeout:.0f} s ({waiting})")

    def _metrics_listen(self) -> bool:
        """Whether tritonserver's own metrics endpoint, behind the metrics front, takes connections: it starts
        after the HTTP one, and a scrape in between was answered 503 (not reachable) by the front."""
        if self.metrics_front is None:
            return True
        try:
            with socket.create_connection(("127.0.0.1", self.options.internal_metrics_port), timeout=2.0):
                return True
        except OSError:
            return False

    def wait_grpc_front(self, timeout: float = 60.0) -> None:
        """Until the gRPC front listens (it starts beside tritonserver, in a process of its own); ServeError
        if it cannot (the port is taken, say). Nothing to wait for without it."""
        if self.grpc_front is not None and not self.grpc_front.port:
            self.grpc_front.wait_ready(timeout)

    def begin_stop(self, signum: int = signal.SIGTERM) -> None:
        """Stop the way a fleet wants it: no new connection, every request in flight served, models unloaded,
        exit status 0 even while a client keeps an idle HTTP connection open.

        tritonserver 2.51 alone waits for every open HTTP connection (an idle keep-alive one too) for up to
        its exit timeout and then leaves itself no time to unload the models: exit status 1, stubs killed
        mid-finalize. So the signal goes to tritonserver at once (HTTP takes no new connection, requests on
        open ones are still served) and, in explicit model control, every model is unloaded over gRPC
        (still up during that wait): each unload waits for the model's requests in flight, after which the
        server has nothing left to unload when it stops, within the same exit timeout. Returns at once."""
        if self.process.poll() is not None:
            return
        if self.watch is not None:
            self.watch.stop(wait=False)  # no recovery while the models are being unloaded
        self.process.send_signal(signum)
        for front in (self.guard, self.openai_front):
            if front is not None:
                front.begin_stop()  # no new connection; idle keep-alive ones closed, busy ones finish
        if self.grpc_front is not None:
            self.grpc_front.begin_stop()  # no new call; calls in flight go on for the exit timeout
        if self.options.model_control_mode == "explicit":
            threading.Thread(target=self._unload_all, name="ge-plugin-drain", daemon=True).start()

    def _unload_all(self) -> None:
        from tritonclient.utils import InferenceServerException

        deadline = time.monotonic() + self.options.exit_timeout_s
        client = self.control_client("grpc", internal=True)
        try:
            for model in client.get_model_repository_index().models:
                if model.state in ("READY", "LOADING"):
                    client.unload_model(model.name)
            while time.monotonic() < deadline and self.process.poll() is None:
                states = {m.state for m in client.get_model_repository_index().models}
                if not states & {"READY", "LOADING", "UNLOADING"}:
                    break
                time.sleep(0.1)
        except InferenceServerException:
            pass  # the server stopped answering the repository API: it is shutting down
        finally:
            client.close()
        self._end_if_only_a_leak_is_left(deadline)

    def _end_if_only_a_leak_is_left(self, deadline: float) -> None:
        """Every model is unloaded and every stub gone, yet tritonserver 2.51 would wait out its exit timeout
        and exit 1: the old version of a model whose stub died is never released (it counts as a live
        model for good). When a recovery is known to have left such a version, nothing else is waited for:
        tritonserver is ended, and the stop counts as the clean one it was (``ended_a_leak``)."""
        if self.watch is None or not self.watch.recoveries:
            return
        while stubs_of(self.process.pid):  # the models' instances finishing their unload
            if time.monotonic() > deadline or self.process.poll() is not None:
                return
            time.sleep(0.1)
        grace = min(deadline, time.monotonic() + LEAK_GRACE_S)
        while time.monotonic() < grace:
            if self.process.poll() is not None:
                return  # it exited by itself
            time.sleep(0.1)
        if self.process.poll() is not None:
            return
        leaked = ", ".join(sorted(self.watch.recoveries))
        print(
            f"ge-plugin serve: no model instance is left; tritonserver 2.51 still holds the old version of {leaked} "
            "(whose stub died) and would wait out its exit timeout for it: ending tritonserver",
            file=sys.stderr,
            flush=True,
        )
        self.ended_a_leak = True
        self.process.kill()

    def stop(self, timeout: float = 60.0) -> int:
        """begin_stop(SIGINT) and wait for the exit (SIGKILL after ``timeout``); its exit status."""
        if self.process.poll() is None:
            self.begin_stop(signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.watch is not None:
            self.watch.stop()
        self._close_fronts()
        return self.process.returncode

    def leftovers(self) -> tuple[list[int], list[Path]]:
        """Processes (stubs) and /dev/shm regions that carry this server's shm prefix: after the server has
        exited, whatever a crashed or abandoned stub left behind. Other servers' are never included."""
        marker = self.options.shm_prefix.encode()
        pids = []
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                try:
                    cmdline = (proc / "cmdline").read_bytes()
                    state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
                except OSError:
                    continue
                if marker in cmdline and state != "Z":
                    pids.append(int(proc.name))
        regions = sorted(Path("/dev/shm").glob(f"{self.options.shm_prefix}*"))
        return sorted(pids), regions

    def clean_up(self, grace: float = 5.0) -> tuple[list[int], list[Path]]:
        """Once the server has exited: end its leftover stubs (SIGTERM, then SIGKILL after ``grace``) and
        remove its regions that no process maps any more. Returns what there was to clean."""
        if self.process.poll() is None:
            raise ServeError("tritonserver is still running; stop it before cleaning up after it")
        self._close_fronts()  # and the front's ring of gone clients (it is in /dev/shm too)
        pids, regions = self.leftovers()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and self.leftovers()[0]:
            time.sleep(0.1)
        for pid in self.leftovers()[0]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for region in self.leftovers()[1]:
            if not _mapped(region):
                region.unlink(missing_ok=True)
        return pids, regions

    def __enter__(self) -> TritonServer:
        self._replaced_handlers = _raise_on_stop_signals()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            with _while_stopping(self.process):
                self.stop()
                self.clean_up()
        finally:
            for signum, handler in self._replaced_handlers.items():
                signal.signal(signum, handler)
