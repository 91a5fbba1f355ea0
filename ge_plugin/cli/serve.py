"""``ge-plugin serve REPO``: tritonserver with the ``ge`` backend, bound to loopback by default."""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import signal
import sys
from pathlib import Path
from typing import Any

from ge_plugin.cli._common import add_command
from ge_plugin.errors import ServeError
from ge_plugin.serve.access import ADMIN_KEY_ENV, MIN_KEY_CHARS, RESTRICTED, read_key
from ge_plugin.serve.front import MAX_BODY_BYTES, MAX_INPUT_BYTES
from ge_plugin.serve.front.server import MAX_BUFFERED_BYTES, WRITE_TIMEOUT_S
from ge_plugin.serve.memory import ENV as JEMALLOC_ENV
from ge_plugin.serve.memory import GRPC_BUFFER_BUDGET
from ge_plugin.serve.triton import EXIT_TIMEOUT_S

EXAMPLES = """
  ge-plugin serve model_repository
  ge-plugin serve model_repository --http-port 9000 --grpc-port 9001 --metrics-port 9002
  ge-plugin serve model_repository --load-model llama_model
  ge-plugin serve model_repository --openai-port 9000
  ge-plugin serve model_repository --exit-timeout-secs 60
  ge-plugin serve model_repository --admin-key-file /etc/ge-plugin/admin-key/admin-key
  GE_PLUGIN_ADMIN_KEY=$(cat key) ge-plugin serve model_repository --open-api statistics
  ge-plugin serve model_repository --grpc-buffer-budget 536870912   # tritonserver keeps less for gRPC reuse
  ge-plugin serve model_repository -- --log-info=true
"""


def _repository(text: str) -> Path | str:
    """A folder as a Path; an object-store URL as written (``remote_repository``)."""
    from ge_plugin.serve.triton import remote_repository

    return text if remote_repository(text) else Path(text)


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "serve",
        help="run tritonserver with the ge backend on a model repository",
        description=(
            "Prepare a backend directory (the Python backend of the nvidia-pytriton wheel with the stub for this "
            "Python, plus the ge backend), set LD_LIBRARY_PATH and PATH as the stub needs, and run the bundled "
            "tritonserver 2.51 on REPO. Extra tritonserver arguments go after '--', at the end."
        ),
        examples=EXAMPLES,
    )
    parser.add_argument(
        "repository",
        type=_repository,
        metavar="REPO",
        help="Triton model repository: a folder, or an object store tritonserver reads (s3://[http://HOST:PORT/]BUCKET/PATH, "
        "credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_DEFAULT_REGION)",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address for HTTP, gRPC and metrics (default: %(default)s)"
    )
    parser.add_argument("--http-port", type=int, default=8000)
    parser.add_argument("--grpc-port", type=int, default=8001)
    parser.add_argument("--metrics-port", type=int, default=8002)
    parser.add_argument(
        "--model-control-mode",
        choices=("none", "poll", "explicit"),
        default=None,
        help=(
            "as tritonserver's: explicit loads only the --load-model models at start (none without one) and "
            "keeps the repository API open; without this flag, explicit with the --load-model models loaded at "
            "start, or every model of REPO when none is named (a stop unloads them all before exiting)"
        ),
    )
    parser.add_argument(
        "--load-model",
        action="append",
        default=[],
        metavar="NAME",
        help="with explicit mode: load these at start ('*' for all)",
    )
    parser.add_argument(
        "--exit-timeout-secs",
        type=int,
        default=EXIT_TIMEOUT_S,
        metavar="S",
        help=(
            "how long a stop (SIGTERM, SIGINT) may take: requests in flight are served, then the models are "
            "unloaded; an idle HTTP keep-alive client holds the stop this long (default: %(default)s)"
        ),
    )
    parser.add_argument(
        "--http-guard",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=(
            "put ge-plugin's HTTP front on the HTTP port, tritonserver's HTTP endpoint on loopback behind it: "
            "every request is parsed once (llhttp, strict JSON, gzip/deflate inflated), requests that abort "
            "tritonserver 2.51 are answered with 400, the rest re-encoded and forwarded; idle keep-alive "
            "connections close at a stop (default: on)"
        ),
    )
    parser.add_argument(
        "--grpc-guard",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=(
            "put ge-plugin's gRPC front (a process of its own) on the gRPC port, tritonserver's gRPC endpoint on "
            "a private Unix socket behind it: every message is parsed once with protobuf, inference requests "
            "whose shapes would crash a model's stub are answered INVALID_ARGUMENT, loads are checked as over "
            "HTTP, metadata over 16 KiB is refused; the rest re-encoded and forwarded. It costs about 0.5 to 0.7 "
            "ms of CPU per small request (docs/serving.md). --no-grpc-guard: tritonserver serves gRPC itself, "
            "for trusted networks only (any client can then crash a model, and loads over gRPC are closed) "
            "(default: on)"
        ),
    )
    parser.add_argument(
        "--text",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=(
            "with the front: for models whose config names a tokenizer (a spec's tokenizer: section), serve "
            "OpenAI's GET /v1/models, POST /v1/completions and /v1/chat/completions, and take text_input / "
            "answer text_output on Triton's generate endpoints (default: on)"
        ),
    )
    parser.add_argument(
        "--openai-port",
        type=int,
        default=0,
        metavar="PORT",
        help=(
            "serve the OpenAI endpoints on a port of their own as well, which serves nothing else (one to "
            "expose where Triton's own API should not be) (default: the HTTP port only)"
        ),
    )
    parser.add_argument(
        "--max-input-bytes",
        type=int,
        default=MAX_INPUT_BYTES,
        metavar="N",
        help="with the fronts: the most one input of a request may declare (default: %(default)s)",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=MAX_BODY_BYTES,
        metavar="N",
        help=(
            "with the fronts: the largest request, an HTTP body as sent and inflated or a gRPC message "
            "(default: %(default)s)"
        ),
    )
    parser.add_argument(
        "--write-timeout",
        type=float,
        default=WRITE_TIMEOUT_S,
        metavar="S",
        help="with the front: close an HTTP client whose answer has not moved for S seconds (default: %(default)s)",
    )
    parser.add_argument(
        "--max-buffered-bytes",
        type=int,
        default=MAX_BUFFERED_BYTES,
        metavar="N",
        help=(
            "with the front: the most it holds for all HTTP clients together (request bodies, answers not yet "
            "read); past it the slowest readers are closed first. At least --max-body-bytes (default: %(default)s)"
        ),
    )
    parser.add_argument(
        "--jemalloc",
        default=os.environ.get(JEMALLOC_ENV, "auto"),
        metavar="auto|off|PATH",
        help=(
            "tritonserver's allocator: auto preloads the system's libjemalloc.so.2 when there is one "
            f"(it gives freed memory back, glibc's malloc keeps it), off keeps glibc's (default: ${JEMALLOC_ENV} "
            "or auto)"
        ),
    )
    parser.add_argument(
        "--grpc-buffer-budget",
        type=int,
        default=GRPC_BUFFER_BUDGET,
        metavar="N",
        help=(
            "the most tritonserver's gRPC endpoint may keep in request and response buffers for reuse: its "
            "--grpc-infer-allocation-pool-size (at most its default, 8) is chosen so that twice the largest "
            "request plus response the served models allow (their config.pbtxt dims and gears; where no dim "
            "is bounded, --max-body-bytes each way) fits that many times; 0 keeps none, at some cost in "
            "latency for small requests. A pool size passed after -- wins (default: %(default)s)"
        ),
    )
    parser.add_argument(
        "--restart-dead-stubs",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=(
            "when a model's stub process dies (tritonserver 2.51 neither restarts it nor marks the model "
            "unready), unload and load that model, then end its old instances' surviving stubs; logged, and "
            "counted in ge_serve_stub_recoveries_total on the metrics port (default: on)"
        ),
    )
    add_control_flags(parser)
    parser.add_argument("--log-verbose", type=int, default=0, metavar="N")
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help=(
            "where the backend directory is prepared (default: $XDG_CACHE_HOME/ge-plugin, else "
            "~/.cache/ge-plugin, a folder per Python environment)"
        ),
    )
    parser.set_defaults(func=run, passthrough_ok=True)


def add_control_flags(parser: argparse.ArgumentParser) -> None:
    """The control-plane flags (serve/access.py), shared by ``serve`` and ``doctor``."""
    control = parser.add_argument_group(
        "control plane",
        "Inference, health and metadata are open to every client. The model-repository, shared-memory, "
        "logging, trace, model-config and statistics APIs need the admin key (HTTP header ge-admin-key, gRPC "
        "metadata triton-grpc-protocol-ge-admin-key); without a key they are closed to every client. "
        "docs/serving.md, 'Security', says what each switch risks.",
    )
    control.add_argument(
        "--admin-key-file",
        type=Path,
        metavar="PATH",
        help=(
            f"the admin key: this file's content, at least {MIN_KEY_CHARS} characters (default: "
            f"${ADMIN_KEY_ENV}; never a command-line value)"
        ),
    )
    control.add_argument(
        "--allow-model-files",
        action="store_true",
        help=(
            "let a load request upload model files (its file: parameters) and serve them with any backend: "
            "whoever holds the admin key can then run code inside the server (default: refused, whatever the key)"
        ),
    )
    control.add_argument(
        "--model-root",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help=(
            "a folder a load's config override may take its OM from (om_model_path), besides the model's own "
            "folder in REPO; repeatable (default: only the model's own folder)"
        ),
    )
    control.add_argument(
        "--open-api",
        action="append",
        default=[],
        choices=sorted(RESTRICTED),
        metavar="GROUP",
        help=(
            "open a restricted API group to every client (perf_analyzer over gRPC reads model-config and "
            f"statistics and cannot send a key); repeatable; one of {', '.join(sorted(RESTRICTED))}"
        ),
    )


def control_options(args: argparse.Namespace) -> dict[str, Any]:
    """ServerOptions fields from the control-plane flags (the key read from its file or the environment)."""
    return {
        "admin_key": read_key(args.admin_key_file),
        "allow_model_files": args.allow_model_files,
        "model_roots": args.model_root,
        "open_apis": frozenset(args.open_api),
    }


def run(args: argparse.Namespace) -> int:
    from ge_plugin.serve import ServerOptions, TritonServer

    if isinstance(args.repository, Path) and (
        not (args.repository / "").exists() or not args.repository.is_dir()
    ):
        raise ServeError(f"model repository {args.repository} is not a directory")
    if args.grpc_buffer_budget < 0:
        raise ServeError(f"--grpc-buffer-budget {args.grpc_buffer_budget}: a number of bytes, 0 or more")
    if args.write_timeout <= 0:
        raise ServeError(f"--write-timeout {args.write_timeout}: a timeout is a number of seconds above 0")
    mode = args.model_control_mode
    load_models = args.load_model
    if mode is None:  # ge-plugin's default: explicit control, every model loaded at start
        mode = "explicit"
        load_models = load_models or ["*"]
    _raise_open_files_limit()
    options = ServerOptions(
        repository=args.repository,
        host=args.host,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        metrics_port=args.metrics_port,
        model_control_mode=mode,
        load_models=load_models,
        log_verbose=args.log_verbose,
        work_dir=args.work_dir,
        extra_args=args.passthrough,
        exit_timeout_s=args.exit_timeout_secs,
        http_guard=args.http_guard,
        grpc_guard=args.grpc_guard,
        text_endpoints=args.text,
        openai_port=args.openai_port,
        max_input_bytes=args.max_input_bytes,
        max_body_bytes=args.max_body_bytes,
        write_timeout_s=args.write_timeout,
        max_buffered_bytes=args.max_buffered_bytes,
        jemalloc=args.jemalloc,
        grpc_buffer_budget=args.grpc_buffer_budget,
        supervise_stubs=args.restart_dead_stubs,
        **control_options(args),
    )
    server = TritonServer(options)
    stopping = False

    def stop(signum: int, _frame: object) -> None:
        """The first signal stops gracefully (TritonServer.begin_stop); any later one goes to tritonserver."""
        nonlocal stopping
        if not stopping:
            stopping = True
            server.begin_stop(signum)
        elif server.process.poll() is None:
            server.process.send_signal(signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
    try:
        server.wait_grpc_front()
    except ServeError:
        server.stop()
        server.clean_up()
        raise
    status = server.process.wait()
    if status < 0:  # killed by the signal: tritonserver 2.51 handles signals only once its models are loaded
        status = 128 - status
    if server.ended_a_leak:
        status = 0  # every model was unloaded; tritonserver only waited for a version 2.51 never releases
    pids, regions = server.clean_up()
    if pids or regions:
        print(
            f"ge-plugin serve: tritonserver exited with status {status} and left {len(pids)} stub process(es) "
            f"and {len(regions)} /dev/shm region(s) named {options.shm_prefix}*; removed them",
            file=sys.stderr,
        )
    return status


def _raise_open_files_limit() -> None:
    """The soft open-files limit up to the hard one, as servers do: each HTTP client connection costs the
    front a file descriptor (and tritonserver inherits the limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
