"""What the OpenAI path costs a streamed generation: time to first token (TTFT) and inter-token latency (ITL)
of the same generations through four lanes of one tritonserver, in one run, lanes alternating:

- ``openai``: ``POST /v1/completions`` with ``stream: true`` on ge-plugin serve's front (tokenized, relayed,
  decoded there);
- ``generate``: Triton's ``generate_stream`` with ``input_ids`` through the front (forwarded as it is);
- ``direct``: the same on tritonserver's own HTTP endpoint, behind the front (no front at all);
- ``grpc``: tritonclient's ``ModelStreamInfer`` (``start_stream`` / ``async_stream_infer``).

    .venv/bin/python benchmarks/openai_path.py [--model standin|llama_generate] [--requests 48] [--tokens 32]
    .venv/bin/python benchmarks/openai_path.py --repo REPO --model NAME     # a generating model you serve

The generating model is the Contract B stand-in of tests/e2e/standin (``--delay-ms`` between tokens, no
device), or, with ``--model llama_generate``, the demo LLaMA itself: the packaged spec
(ge_plugin/demo/specs/llama_generate.yaml, stacked KV cache, iteration-level batching, its tokenizer),
built here into a sim OM whose executes hold the simulated device ``--step-ms`` each (the tiny model's
computation runs inside that window), or a generating model of ``--repo``. The three HTTP lanes read the
stream with the same small client (http.client, one event per token), so their differences are the
server side's; gRPC's client is tritonclient's. Prints, per lane and concurrency, TTFT and ITL p50 with
the interval of the median (order statistics, 95 %) and p99, then the OpenAI lane's p50 minus gRPC's with
a 95 % bootstrap interval (requests resampled whole, their ITLs together) against the issue's targets, and
the machine's load average before and after: the lanes alternate, but a loaded machine widens everything.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import math
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
PROMPT = "The quick brown fox jumps over the lazy dog and runs on into the forest to find a friend there"


def sse_lane(host: str, port: int, path: str, body: dict) -> Callable[[], list[float]]:
    """One streamed request on a new connection; the arrival time of each event that carries tokens."""
    data = json.dumps(body).encode()

    def run() -> list[float]:
        connection = http.client.HTTPConnection(host, port, timeout=60)
        start = time.perf_counter()
        connection.request("POST", path, data, {"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200, response.read()
        times, pending = [start], b""
        while True:
            chunk = response.read1(65536)
            if not chunk:
                break
            pending += chunk
            *events, pending = pending.split(b"\n\n")
            now = time.perf_counter()
            for event in events:
                if event.startswith(b"data: {") and _carries_tokens(json.loads(event[6:])):
                    times.append(now)
        connection.close()
        return times

    return run


def _status(host: str, port: int, path: str) -> int:
    connection = http.client.HTTPConnection(host, port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def _carries_tokens(event: dict) -> bool:
    if "choices" in event:
        return bool(event["choices"] and event["choices"][0].get("text"))
    ids = event.get("output_ids")
    return ids not in (None, [])


def grpc_lane(url: str, model: str, ids: list[int], tokens: int) -> Callable[[], list[float]]:
    import numpy as np
    import tritonclient.grpc as grpcclient

    def tensor(name: str, array: np.ndarray, kind: str) -> grpcclient.InferInput:
        item = grpcclient.InferInput(name, list(array.shape), kind)
        item.set_data_from_numpy(array)
        return item

    def run() -> list[float]:
        client = grpcclient.InferenceServerClient(url)
        arrivals: queue.Queue = queue.Queue()

        def callback(result, error):
            now = time.perf_counter()
            if error is not None:
                arrivals.put(("error", now))
                return
            final = result.get_response().parameters.get("triton_final_response")
            ids_ = result.as_numpy("output_ids")
            arrivals.put(
                (
                    "final" if final is not None and final.bool_param else "token",
                    now,
                    len(ids_) if ids_ is not None else 0,
                )
            )

        client.start_stream(callback=callback)
        inputs = [
            tensor("input_ids", np.array(ids, np.int64), "INT64"),
            tensor("max_tokens", np.array([tokens], np.int32), "INT32"),
            tensor("stream", np.array([True]), "BOOL"),
        ]
        start = time.perf_counter()
        client.async_stream_infer(model, inputs, enable_empty_final_response=True)
        times = [start]
        while True:
            kind, now, *count = arrivals.get(timeout=60)
            if kind == "error":
                raise RuntimeError("gRPC stream failed")
            if count and count[0]:
                times.append(now)
            if kind == "final":
                break
        client.stop_stream()
        client.close()
        return times

    return run


#: one request as measured: its TTFT and its inter-token latencies (seconds)
Record = tuple[float, list[float]]


def measure(lane: Callable[[], list[float]], requests: int, concurrency: int) -> list[Record]:
    records: list[Record] = []
    lock = threading.Lock()
    left = [requests]

    def worker() -> None:
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            times = lane()
            with lock:
                records.append((times[1] - times[0], [b - a for a, b in itertools.pairwise(times[1:])]))

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return records


def ttfts(records: list[Record]) -> list[float]:
    return [ttft for ttft, _ in records]


def itls(records: list[Record]) -> list[float]:
    return [gap for _, gaps in records for gap in gaps]


def difference_interval(
    lane: list[Record], base: list[Record], pick: Callable[[list[Record]], list[float]], rounds: int = 2000
) -> tuple[float, float, float]:
    """p50(lane) - p50(base) and a 95 % bootstrap interval, resampling each lane's requests whole (a
    request's ITLs move together: resampling them one by one would claim a precision the run does not have)."""
    import numpy as np

    rng = np.random.default_rng(0)
    point = statistics.median(pick(lane)) - statistics.median(pick(base))
    diffs = []
    for _ in range(rounds):
        a = [lane[i] for i in rng.integers(0, len(lane), len(lane))]
        b = [base[i] for i in rng.integers(0, len(base), len(base))]
        diffs.append(float(np.median(pick(a))) - float(np.median(pick(b))))
    low, high = np.percentile(diffs, [2.5, 97.5])
    return point, float(low), float(high)


def verdict(low: float, high: float, target: float) -> str:
    if high <= target:
        return "met"
    if low > target:
        return "NOT met"
    return "undecided (the interval holds the target)"


def build_demo_llama(work: Path, step_ms: float) -> Path:
    """The demo LLaMA served as ``make demo`` serves it (its packaged spec, sim OM, tokenizer), each
    execute holding the simulated device ``step_ms``; returns the repository."""
    import attrs

    from ge_plugin.atc.command import atc_args
    from ge_plugin.atc.flags import parse_args
    from ge_plugin.atc.simbuild import build
    from ge_plugin.demo import demo_specs
    from ge_plugin.models import write_demo_models
    from ge_plugin.render import write_repository
    from ge_plugin.text.demo import write_demo_tokenizer

    write_demo_models(work / "build" / "models")
    write_demo_tokenizer(work / "build" / "models")
    (spec,) = [s for s in demo_specs(work, say=lambda _: None) if s.name == "llama_generate"]
    spec = attrs.evolve(spec, acl_json={"ge_plugin_sim": {"execute_latency_ms": step_ms}})
    repo = work / "repo"
    om = repo / spec.name / "1" / Path(spec.om_filename).stem
    om.parent.mkdir(parents=True, exist_ok=True)
    build(parse_args(atc_args(spec, output=om)))
    write_repository([spec], repo)
    return repo


def median_interval(values: list[float]) -> tuple[float, float, float]:
    """The median and a 95 % interval for it from order statistics (binomial, normal approximation)."""
    ordered = sorted(values)
    n = len(ordered)
    half = 1.96 * math.sqrt(n) / 2
    low = max(0, math.floor(n / 2 - half))
    high = min(n - 1, math.ceil(n / 2 + half))
    return statistics.median(ordered), ordered[low], ordered[high]


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repo", type=Path, help="a repository with a generating model and its tokenizer")
    parser.add_argument(
        "--model", default="standin", help="standin, llama_generate (the demo LLaMA), or a model of --repo"
    )
    parser.add_argument("--requests", type=int, default=48, help="per lane and concurrency")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--delay-ms", type=float, default=2.0, help="the stand-in's time per token")
    parser.add_argument(
        "--step-ms", type=float, default=4.0, help="the demo LLaMA's simulated device time per execute"
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()

    from ge_plugin.serve import free_port
    from ge_plugin.text.files import config_parameters, tokenizer_paths
    from ge_plugin.text.tokenizer import Tokenizer

    work = Path(tempfile.mkdtemp(prefix="openai-bench-"))
    repo = args.repo
    if repo is None and args.model == "standin":
        from conftest import write_standin

        repo = work / "repo"
        write_standin(repo, args.model, delay_ms=args.delay_ms, slots=256)
        conditions = f"the Contract B stand-in, {args.delay_ms:g} ms a token, no device"
    elif repo is None and args.model == "llama_generate":
        repo = build_demo_llama(work, args.step_ms)
        conditions = (
            f"the demo LLaMA (stacked KV cache, 32 slots), computed by the simulator, {args.step_ms:g} ms of "
            "simulated device time per execute"
        )
    elif repo is None:
        parser.error("--model is standin or llama_generate unless --repo names a repository")
    else:
        conditions = f"{args.model} of {repo}"
    load_before = os.getloadavg()
    model_dir = repo / args.model
    tokenizer = Tokenizer.from_files(
        *tokenizer_paths(config_parameters(model_dir / "config.pbtxt"), model_dir)
    )
    ids = tokenizer.encode_prompt(PROMPT)
    ports = [free_port() for _ in range(4)]
    # the server in a process of its own, as `ge-plugin serve` runs: the front's thread must not share this
    # process's GIL with the clients
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(repo), str(work / "triton"), *map(str, ports)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None and server.stdin is not None
    if server.stdout.readline().strip() != "ready":
        raise SystemExit(f"the server did not start: see {work / 'triton' / 'tritonserver.log'}")
    try:
        host, port, internal = "127.0.0.1", ports[0], ports[3]
        deadline = time.monotonic() + 60
        while _status(host, port, f"/v2/models/{args.model}/ready") != 200:
            if time.monotonic() > deadline:
                raise SystemExit(f"model {args.model} did not become ready")
            time.sleep(0.2)
        grpc_url = f"127.0.0.1:{ports[1]}"
        generate = {"input_ids": ids, "max_tokens": args.tokens, "stream": True}
        completion = {"model": args.model, "prompt": PROMPT, "max_tokens": args.tokens, "stream": True}
        path = f"/v2/models/{args.model}/generate_stream"
        lanes = {
            "openai": sse_lane(host, port, "/v1/completions", completion),
            "generate": sse_lane(host, port, path, generate),
            "direct": sse_lane("127.0.0.1", internal, path, generate),
            "grpc": grpc_lane(grpc_url, args.model, ids, args.tokens),
        }
        for lane in lanes.values():
            lane()  # warm: connections, the tokenizer's first load
        results: dict[tuple[str, int], list[Record]] = {}
        for concurrency in args.concurrency:
            for half in range(2):  # lanes alternate: two passes each, in opposite orders
                names = list(lanes) if half == 0 else list(reversed(lanes))
                for name in names:
                    records = measure(lanes[name], args.requests // 2, concurrency)
                    results.setdefault((name, concurrency), []).extend(records)
    finally:
        server.stdin.close()
        server.wait(timeout=120)
    shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()
    print(f"# {args.model}: {conditions}; {args.tokens} tokens per request, {args.requests} requests per lane "
          f"and concurrency; {os.cpu_count()} CPUs, client and server on one machine; load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after")  # fmt: skip
    print("| lane | c | TTFT p50 ms [95% CI] | TTFT p99 | ITL p50 ms [95% CI] | ITL p99 |")
    print("|---|---|---|---|---|---|")
    for concurrency in args.concurrency:
        for name in lanes:
            records = results[(name, concurrency)]
            ttft, itl = ttfts(records), itls(records)
            t, tl, th = (v * 1000 for v in median_interval(ttft))
            i, il, ih = (v * 1000 for v in median_interval(itl))
            print(
                f"| {name} | {concurrency} | {t:.2f} [{tl:.2f}, {th:.2f}] | {p99(ttft) * 1000:.2f} | "
                f"{i:.3f} [{il:.3f}, {ih:.3f}] | {p99(itl) * 1000:.3f} |"
            )
    print()
    print("| c | openai - grpc | p50 difference ms [95% bootstrap CI] | target | verdict |")
    print("|---|---|---|---|---|")
    for concurrency in args.concurrency:
        openai_, grpc = results[("openai", concurrency)], results[("grpc", concurrency)]
        for what, pick, target in (("TTFT", ttfts, 1.0), ("ITL", itls, 0.2)):
            d, low, high = (v * 1000 for v in difference_interval(openai_, grpc, pick))
            print(
                f"| {concurrency} | {what} | {d:+.3f} [{low:+.3f}, {high:+.3f}] | <= {target:g} ms | "
                f"{verdict(low, high, target)} |"
            )
    return 0


def serve(repo: str, work: str, http: str, grpc: str, metrics: str, internal: str) -> int:
    """The server side, until stdin closes."""
    from ge_plugin.serve import ServerOptions, TritonServer

    options = ServerOptions(
        repository=Path(repo), http_port=int(http), grpc_port=int(grpc), metrics_port=int(metrics),
        internal_http_port=int(internal), work_dir=Path(work),
    )  # fmt: skip
    Path(work).mkdir(parents=True, exist_ok=True)
    with (
        open(Path(work) / "tritonserver.log", "wb") as log,
        TritonServer(options, stdout=log, stderr=log) as server,
    ):
        server.wait_ready(timeout=120)
        print("ready", flush=True)
        sys.stdin.read()
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        raise SystemExit(serve(*sys.argv[2:]))
    raise SystemExit(main())
