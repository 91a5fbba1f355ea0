"""``ge-plugin serve REPO``: tritonserver with the ``ge`` backend, bound to loopback by default."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from ge_plugin.cli._common import add_command
from ge_plugin.errors import ServeError
from ge_plugin.serve.http_guard import MAX_INPUT_BYTES
from ge_plugin.serve.triton import EXIT_TIMEOUT_S

EXAMPLES = """
  ge-plugin serve model_repository
  ge-plugin serve model_repository --http-port 9000 --grpc-port 9001 --metrics-port 9002
  ge-plugin serve model_repository --load-model llama_model
  ge-plugin serve model_repository --exit-timeout-secs 60
  ge-plugin serve model_repository -- --log-info=true
"""


def register(subparsers) -> None:
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
    parser.add_argument("repository", type=Path, metavar="REPO", help="Triton model repository")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address for HTTP, gRPC and metrics (default: %(default)s)"
    )
    parser.add_argument("--http-port", type=int, default=8000)
    parser.add_argument("--grpc-port", type=int, default=8001)
    parser.add_argument("--metrics-port", type=int, default=8002)
    parser.add_argument(
        "--model-control-mode",
        choices=("none", "poll", "explicit"),
        default="explicit",
        help=(
            "explicit (default) loads the --load-model models, every model when none is named, and keeps the "
            "repository API open: a model whose stub crashed can be unloaded and loaded again, and a stop "
            "unloads every model before exiting (default: %(default)s)"
        ),
    )
    parser.add_argument(
        "--load-model",
        action="append",
        default=[],
        metavar="NAME",
        help="with explicit mode: load only these at start (default: every model of REPO)",
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
            "put ge-plugin's HTTP guard on the HTTP port, tritonserver's HTTP endpoint on loopback behind it: "
            "it answers with 400 the JSON requests whose declared shape aborts tritonserver 2.51 "
            "(std::bad_alloc), and closes idle keep-alive connections at a stop; costs one local hop per "
            "HTTP request (gRPC does not go through it) (default: on)"
        ),
    )
    parser.add_argument(
        "--max-input-bytes",
        type=int,
        default=MAX_INPUT_BYTES,
        metavar="N",
        help="with the guard: the most one input of an HTTP request may declare (default: %(default)s)",
    )
    parser.add_argument("--log-verbose", type=int, default=0, metavar="N")
    parser.add_argument(
        "--work-dir", type=Path, default=Path("build/triton"), help="where the backend directory is prepared"
    )
    parser.set_defaults(func=run, passthrough_ok=True)


def run(args: argparse.Namespace) -> int:
    from ge_plugin.serve import ServerOptions, TritonServer

    if not (args.repository / "").exists() or not args.repository.is_dir():
        raise ServeError(f"model repository {args.repository} is not a directory")
    load_models = args.load_model
    if args.model_control_mode == "explicit" and not load_models:
        load_models = ["*"]
    options = ServerOptions(
        repository=args.repository,
        host=args.host,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        metrics_port=args.metrics_port,
        model_control_mode=args.model_control_mode,
        load_models=load_models,
        log_verbose=args.log_verbose,
        work_dir=args.work_dir,
        extra_args=args.passthrough,
        exit_timeout_s=args.exit_timeout_secs,
        http_guard=args.http_guard,
        max_input_bytes=args.max_input_bytes,
    )
    server = TritonServer(options)
    stopping = False

    def stop(signum, _frame):
        """The first signal stops gracefully (TritonServer.begin_stop); any later one goes to tritonserver."""
        nonlocal stopping
        if not stopping:
            stopping = True
            server.begin_stop(signum)
        elif server.process.poll() is None:
            server.process.send_signal(signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
    status = server.process.wait()
    pids, regions = server.clean_up()
    if pids or regions:
        print(
            f"ge-plugin serve: tritonserver exited with status {status} and left {len(pids)} stub process(es) "
            f"and {len(regions)} /dev/shm region(s) named {options.shm_prefix}*; removed them",
            file=sys.stderr,
        )
    return status
