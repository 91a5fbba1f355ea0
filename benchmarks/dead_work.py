"""Dead work: what clients that leave right after sending cost the clients that stay (issue 27 item 4).

    .venv/bin/python benchmarks/dead_work.py [--work build/dead-work] [--dead 50] [--seconds 6]

One ``ge-plugin serve``-style server (the HTTP front in place) serves an identity model whose every execute
keeps its simulated device 20 ms (batch gears 1 and 2, one instance), once with
the front and once without it (``--no-http-guard``: tritonserver's own HTTP, where a request whose client
left is computed all the same, as it was behind the front before issue 27). Four well-behaved clients send one-row
requests in a loop over HTTP; in the second window, ``--dead`` clients each send one request and close their
socket at once, all within the window's first 100 ms. Prints the well-behaved clients' p50 / p90 / max in
each window, the ratio, and the rows the backend executed against the requests answered (a dead request that
ran shows as a row nobody received). Every figure is the CPU simulator's, not NPU time.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import threading
import time
from pathlib import Path

from ge_plugin.atc.command import atc_args
from ge_plugin.atc.flags import parse_args
from ge_plugin.atc.simbuild import build
from ge_plugin.models import write_demo_models
from ge_plugin.promtext import scrape
from ge_plugin.render import write_repository
from ge_plugin.serve import ServerOptions, TritonServer, free_port
from ge_plugin.spec import load_specs

SPEC = """name: slow_identity
model: {om: identity.om, source: models/identity.onnx, soc_version: Ascend910B3}
inputs: [{name: INPUT0, dtype: fp32, dims: [16]}]
outputs: [{name: OUTPUT0, dtype: fp32, dims: [16]}]
batching: {gears: [1, 2]}
placement: {devices: [6], instances_per_device: 1}
acl_json: {ge_plugin_sim: {execute_latency_ms: 20}}
metrics_interval_ms: 100
"""
BODY = json.dumps(
    {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [1.0] * 16}]}
).encode()
REQUEST = b"POST /v2/models/slow_identity/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (
    len(BODY),
    BODY,
)


def repository(work: Path) -> Path:
    write_demo_models(work / "models")
    (work / "slow_identity.yaml").write_text(SPEC)
    specs = load_specs([work / "slow_identity.yaml"])
    repo = work / "repository"
    for spec in specs:
        output = repo / spec.name / "1" / Path(spec.om_filename).stem
        output.parent.mkdir(parents=True, exist_ok=True)
        build(parse_args(atc_args(spec, output=output)))
    write_repository(specs, repo)
    return repo


def well_behaved(port: int, stop: threading.Event, latencies: list[tuple[float, float]]) -> None:
    """One keep-alive connection, one request at a time: (sent at, seconds) of each answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        while not stop.is_set():
            started = time.monotonic()
            sock.sendall(REQUEST)
            received = b""
            while b"}]}" not in received:
                data = sock.recv(65536)
                if not data:
                    raise SystemExit("the server closed a well-behaved client's connection")
                received += data
            latencies.append((started, time.monotonic() - started))


def leave(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(REQUEST)


def summary(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p90 = ms[int(0.9 * (len(ms) - 1))]
    return f"p50 {statistics.median(ms):.1f} ms, p90 {p90:.1f} ms, max {ms[-1]:.1f} ms ({len(ms)} requests)"


def measure(args: argparse.Namespace, repo: Path, guard: bool) -> float:
    options = ServerOptions(
        repository=repo,
        http_port=free_port(),
        grpc_port=free_port(),
        metrics_port=free_port(),
        work_dir=args.work / "triton",
        http_guard=guard,
        environment={"GE_PLUGIN_SIM_DEVICE_LOCK_DIR": str(args.work / "device-locks")},
    )
    log_path = args.work / "tritonserver.log"
    with open(log_path, "wb") as log, TritonServer(options, stdout=log, stderr=log) as server:
        server.wait_ready(models=["slow_identity"])
        rows = lambda: scrape(server.metrics_url).total("ge_rows_total", model="slow_identity")  # noqa: E731
        windows = {}
        for window in ("no client leaves", f"{args.dead} clients leave"):
            before = rows()
            latencies: list[tuple[float, float]] = []
            stop = threading.Event()
            clients = [
                threading.Thread(target=well_behaved, args=(options.http_port, stop, latencies))
                for _ in range(4)
            ]
            started = time.monotonic()
            for client in clients:
                client.start()
            if window != "no client leaves":
                time.sleep(0.05)
                for _ in range(args.dead):
                    leave(options.http_port)
            time.sleep(args.seconds)
            stop.set()
            for client in clients:
                client.join()
            time.sleep(0.5)  # the backend's metrics flush
            executed = rows() - before
            windows[window] = [seconds for sent, seconds in latencies if sent >= started]
            print(f"{window}: well-behaved {summary(windows[window])}; rows executed {executed:.0f} for "
                  f"{len(latencies)} answered")  # fmt: skip
        if server.guard is not None:
            print(f"the front found {server.guard.gone} connections gone")
        quiet, loaded = (statistics.median(v) for v in windows.values())
        return loaded / quiet


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", type=Path, default=Path("build/dead-work"))
    parser.add_argument("--dead", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    repo = repository(args.work)
    ratios = {}
    for guard in (True, False):
        name = "front" if guard else "no front"
        print(f"-- {name}")
        ratios[name] = measure(args, repo, guard)
        print(f"p50 ratio (with the clients that leave / without): {ratios[name]:.2f}")
    print("CPU simulator figures (20 ms of simulated device time per execute), not NPU time")


if __name__ == "__main__":
    main()
