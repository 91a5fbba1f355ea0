"""What ge-plugin serve's gRPC front costs: perf_analyzer over gRPC against tritonserver with the front and
without it (``--no-grpc-guard``), the two servers side by side, runs alternating.

    .venv/bin/python -m benchmarks.grpc_front [--work build/grpc-front-bench] [--rounds 3] [--measurement-ms 3000]

Cases: a small request (``py_identity``: 16 floats each way, binary) at concurrency 1 and 16, and a 2 MiB
answer (``py_logits``: the tiny LLaMA's [1, 16, 32000] fp32 logits for 16 token ids) at concurrency 1. Both
models are the bench's Python-backend floors (no simulated device), so what differs between the two servers
is the front's hop. Prints, per case, the median over rounds of each server's p50, the difference and the
ratio, and the front's own CPU per request (its process's user + system time from /proc over tritonserver's
count of inferences: unlike a difference of two p50s, it holds on a busy machine), and writes them to
``grpc_front.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from benchmarks.front import p50_ms, requests_done
from benchmarks.proof.repository import FLOOR, PY_IDENTITY, build_repository
from ge_plugin.measure.machine import describe as describe_machine
from ge_plugin.measure.perf import SERVER_APIS, version
from ge_plugin.serve import ServerOptions, TritonServer, free_port

CASES = {
    "small request": (PY_IDENTITY, "identity", [], (1, 16)),
    "2 MiB answer": (FLOOR, "llama", ["--shape=input_ids:16"], (1,)),
}


def cpu_s(pid: int) -> float:
    """CPU seconds a process has used (user + system, from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("build/grpc-front-bench"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--measurement-ms", type=int, default=3000)
    args = parser.parse_args()
    load = os.getloadavg()
    repo = build_repository(args.work)
    servers: dict[str, TritonServer] = {}
    logs = []
    try:
        for name, guard in (("front", True), ("direct", False)):
            log = open(args.work / f"grpc-{name}.log", "wb")  # noqa: SIM115 (closed below)
            logs.append(log)
            options = ServerOptions(
                repository=repo.root, http_port=free_port(), grpc_port=free_port(), metrics_port=free_port(),
                model_control_mode="explicit", load_models=[PY_IDENTITY, FLOOR], work_dir=args.work,
                grpc_guard=guard, open_apis=SERVER_APIS,
            )  # fmt: skip
            servers[name] = TritonServer(options, stdout=log, stderr=log)
        for server in servers.values():
            server.wait_ready(models=[PY_IDENTITY, FLOOR])
        front = servers["front"].grpc_front
        assert front is not None
        results = []
        for case, (model, family, extra, concurrencies) in CASES.items():
            data = repo.work / "inputs" / f"{family}{'-seq16' if family == 'llama' else ''}.json"
            for concurrency in concurrencies:
                runs: dict[str, list[float]] = {"front": [], "direct": []}
                cpu = []
                for _ in range(args.rounds):
                    for name, server in servers.items():  # alternating, so drift hits both
                        before = cpu_s(front.pid), requests_done(server, model)
                        runs[name].append(
                            p50_ms(
                                server.grpc_url,
                                model,
                                extra,
                                data,
                                concurrency,
                                args.work,
                                args.measurement_ms,
                                protocol="grpc",
                            )
                        )
                        if name == "front":
                            count = requests_done(server, model) - before[1]
                            cpu.append((cpu_s(front.pid) - before[0]) / max(count, 1) * 1e6)
                front_p50, direct = statistics.median(runs["front"]), statistics.median(runs["direct"])
                cpu_us = statistics.median(cpu)
                row = {
                    "case": case, "concurrency": concurrency, "front_p50_ms": round(front_p50, 3),
                    "direct_p50_ms": round(direct, 3), "diff_ms": round(front_p50 - direct, 3),
                    "ratio": round(front_p50 / direct, 3), "front_cpu_us_per_request": round(cpu_us, 1),
                    "front_rss_mb": round(rss_mb(front.pid), 1), "runs": runs, "cpu_runs": cpu,
                }  # fmt: skip
                results.append(row)
                print(
                    f"{case:14s} c={concurrency:<3d} front p50 {front_p50:7.3f} ms  direct {direct:7.3f} ms  "
                    f"+{front_p50 - direct:6.3f} ms  x{front_p50 / direct:.3f}  front CPU {cpu_us:6.1f} us/request  "
                    f"(runs {runs}, CPU {[round(c) for c in cpu]})",
                    flush=True,
                )
        machine = describe_machine(tritonserver="2.51.0", perf_analyzer=version(), load_average=load)
        machine["load_average_end"] = os.getloadavg()
        (args.work / "grpc_front.json").write_text(
            json.dumps({"machine": machine, "results": results}, indent=1)
        )
        print(f"machine: {machine}")
    finally:
        for server in servers.values():
            server.stop()
            server.clean_up()
        for log in logs:
            log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
