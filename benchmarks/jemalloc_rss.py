"""tritonserver's RSS after rounds of 64 MiB requests: with glibc's malloc and with jemalloc preloaded
(``ge-plugin serve --jemalloc off|auto``), and over gRPC with the pool of request objects tritonserver keeps
(``--grpc-infer-allocation-pool-size``, which ``ge-plugin serve`` sizes from ``--grpc-buffer-budget``).

    .venv/bin/python -m benchmarks.jemalloc_rss [--work build/front-bench] [--rounds 16]
        [--protocols http,grpc] [--allocators off,auto] [--pool N | --budget BYTES] [--grpc-front]

For each allocator and each protocol, a fresh tritonserver serves ``--rounds`` requests of 64 MiB (binary
tensors, [1048576, 16] fp32) to ``big_identity``, a Python-backend identity (the bench's ``py_identity.py``)
without a batch limit, so each request is read, handed to the stub and answered with 64 MiB: the case where
buffers are allocated and freed on different threads. Its VmRSS is read after each, and again 5 s after the
last. tritonserver listens on HTTP and gRPC itself (no fronts) so the RSS is its own alone; with
``--grpc-front`` gRPC goes through ge-plugin's gRPC front, whose own RSS is read too. ``--pool`` passes
tritonserver's pool size (default: tritonserver's own, 8, without ``--budget``); ``--budget`` lets
``ge-plugin serve``'s sizing choose it. ``--refused`` sends the same bytes to ``py_identity`` instead, whose
largest batch is 8: tritonserver reads them, then refuses.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.proof.models import __file__ as _models_init
from benchmarks.proof.repository import PY_IDENTITY, build_repository
from ge_plugin.serve import ServerOptions, TritonServer, free_port
from ge_plugin.serve.memory import find_jemalloc

ROWS = 1 << 20  #: x 16 fp32 = 64 MiB
BIG_IDENTITY = "big_identity"
BIG_IDENTITY_CONFIG = """\
name: "big_identity"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""


def add_big_identity(repo: Path) -> None:
    """``big_identity`` beside the bench's models: py_identity's model.py with no batch limit."""
    folder = repo / BIG_IDENTITY
    (folder / "1").mkdir(parents=True, exist_ok=True)
    (folder / "config.pbtxt").write_text(BIG_IDENTITY_CONFIG)
    source = Path(_models_init).parent / "py_identity.py"
    (folder / "1" / "model.py").write_text(source.read_text())


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def one_request(module, url: str, data: np.ndarray, model: str) -> None:
    from tritonclient.utils import InferenceServerException

    client = module.InferenceServerClient(url)
    try:
        tensor = module.InferInput("INPUT0", list(data.shape), "FP32")
        tensor.set_data_from_numpy(data)
        if model == PY_IDENTITY:
            # refused after reading it all: what is measured is what reading it left behind
            with contextlib.suppress(InferenceServerException):
                client.infer(model, [tensor])
        else:
            answer = client.infer(model, [tensor])
            assert answer.as_numpy("OUTPUT0").shape == data.shape
    finally:
        client.close()


def measure(
    repo: Path,
    work: Path,
    jemalloc: str,
    protocol: str,
    rounds: int,
    model: str,
    *,
    pool: int | None = None,
    budget: int | None = None,
    grpc_front: bool = False,
) -> dict:
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    data = np.ones((ROWS, 16), dtype=np.float32)
    extra = [f"--grpc-infer-allocation-pool-size={pool}"] if pool is not None else []
    sizing = {"grpc_buffer_budget": budget} if budget is not None else {"grpc_buffer_budget": None}
    options = ServerOptions(
        repository=repo, http_port=free_port(), grpc_port=free_port(), metrics_port=free_port(),
        model_control_mode="explicit", load_models=[model], work_dir=work, http_guard=False,
        grpc_guard=grpc_front, jemalloc=jemalloc, extra_args=extra, **sizing,
    )  # fmt: skip
    log_path = work / f"rss-{jemalloc}-{protocol}.log"
    with open(log_path, "wb") as log, TritonServer(options, stdout=log, stderr=log) as server:
        server.wait_ready(models=[model])
        pid = server.process.pid
        front = server.grpc_front.pid if server.grpc_front is not None else None
        preloaded = "libjemalloc" in Path(f"/proc/{pid}/maps").read_text()
        chosen = [
            a.split("=", 1)[1] for a in server.command if a.startswith("--grpc-infer-allocation-pool-size=")
        ]
        module, url = (httpclient, server.http_url) if protocol == "http" else (grpcclient, server.grpc_url)
        series, front_series = [rss_mb(pid)], [rss_mb(front) if front else 0.0]
        for _ in range(rounds):
            one_request(module, url, data, model)
            series.append(rss_mb(pid))
            front_series.append(rss_mb(front) if front else 0.0)
        time.sleep(5)
        settled = rss_mb(pid)
        front_settled = rss_mb(front) if front else 0.0
    return {
        "model": model,
        "jemalloc": jemalloc,
        "protocol": protocol,
        "preloaded": preloaded,
        "pool": chosen[-1] if chosen else "tritonserver's default (8)",
        "start_mb": round(series[0]),
        "after_each_mb": [round(x) for x in series[1:]],
        "settled_mb": round(settled),
        **(
            {
                "front_start_mb": round(front_series[0]),
                "front_after_each_mb": [round(x) for x in front_series[1:]],
                "front_settled_mb": round(front_settled),
            }
            if front
            else {}
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("build/front-bench"))
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--refused", action="store_true", help="requests tritonserver reads, then refuses")
    parser.add_argument("--protocols", default="http,grpc")
    parser.add_argument("--allocators", default="off,auto", help="--jemalloc values, comma-separated")
    parser.add_argument("--pool", type=int, help="tritonserver's --grpc-infer-allocation-pool-size")
    parser.add_argument("--budget", type=int, help="ge-plugin serve's --grpc-buffer-budget (sizes the pool)")
    parser.add_argument("--grpc-front", action="store_true", help="gRPC through ge-plugin's gRPC front")
    args = parser.parse_args()
    if find_jemalloc("auto") is None:
        raise SystemExit("no libjemalloc.so.2 found: run scripts/system-deps.sh (make setup)")
    repo = build_repository(args.work)
    add_big_identity(repo.root)
    model = PY_IDENTITY if args.refused else BIG_IDENTITY
    results = [
        measure(
            repo.root,
            args.work,
            choice,
            protocol,
            args.rounds,
            model,
            pool=args.pool,
            budget=args.budget,
            grpc_front=args.grpc_front,
        )
        for protocol in args.protocols.split(",")
        for choice in args.allocators.split(",")
    ]
    for r in results:
        front = (
            f"; the front: start {r['front_start_mb']} MB, after each {r['front_after_each_mb']}, "
            f"5 s later {r['front_settled_mb']} MB"
            if "front_start_mb" in r
            else ""
        )
        print(
            f"{r['protocol']:4s} jemalloc {r['jemalloc']:4s} (preloaded: {r['preloaded']}) pool {r['pool']}: "
            f"start {r['start_mb']} MB, after each {r['after_each_mb']}, 5 s later {r['settled_mb']} MB{front}"
        )
    (args.work / "jemalloc_rss.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
