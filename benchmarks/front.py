"""What ge-plugin serve's HTTP front costs: perf_analyzer over HTTP against tritonserver with the front and
without it (``--no-http-guard``), the two servers side by side, runs alternating.

    .venv/bin/python benchmarks/front.py [--work build/front-bench] [--rounds 3] [--measurement-ms 3000]

Two cases, each at concurrency 1 and 16: a small JSON request and answer (``py_identity``: 16 floats each
way, ``--input-tensor-format json``), and a 2 MiB binary answer (``py_logits``: the tiny LLaMA's precomputed
logits, [1, 16, 32000] fp32, for 16 token ids). Both models are the bench's Python-backend floors (no
simulated device), so what differs between the two servers is the front's hop. Prints, per case, the median
over rounds of each server's p50, the difference and the ratio, and writes them to ``front.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import urllib.request
from pathlib import Path

from benchmarks.proof.repository import FLOOR, PY_IDENTITY, build_repository
from ge_plugin.measure.machine import describe as describe_machine
from ge_plugin.measure.perf import _run, binary, parse_csv, version
from ge_plugin.measure.records import PerfRow
from ge_plugin.serve import ServerOptions, TritonServer, free_port

CASES = {
    "small JSON": (PY_IDENTITY, "identity", ["--input-tensor-format=json", "--output-tensor-format=json"]),
    "2 MiB binary answer": (FLOOR, "llama", ["--shape=input_ids:16"]),
}
CONCURRENCIES = (1, 16)


def perf_row(
    url: str,
    model: str,
    extra: list[str],
    data: Path,
    concurrency: int,
    work: Path,
    ms: int,
    protocol: str = "http",
) -> PerfRow:
    """perf_analyzer's row for one case (``protocol``: http or grpc); on a busy machine, three windows as they
    come rather than none."""
    csv_path = work / f"{model}-{protocol}-c{concurrency}-{url.rsplit(':', 1)[1]}.csv"
    cmd = [
        str(binary()), "-i", protocol, "-u", url, "-m", model, f"--concurrency-range={concurrency}:{concurrency}",
        f"--input-data={data}", f"--measurement-interval={ms}", "--stability-percentage=20", "--max-trials=6",
        "-f", str(csv_path), *extra,
    ]  # fmt: skip
    out = _run(cmd, timeout=300)
    if out.returncode != 0:  # a shared machine: take three windows as they come rather than none
        csv_path.unlink(missing_ok=True)
        cmd = [c if not c.startswith("--stability-percentage") else "--stability-percentage=999" for c in cmd]
        cmd = [c if not c.startswith("--max-trials") else "--max-trials=3" for c in cmd]
        out = _run(cmd, timeout=300)
    if out.returncode != 0 or not csv_path.is_file():
        raise SystemExit(f"perf_analyzer failed: {' '.join(cmd)}\n{out.stdout}{out.stderr}")
    return parse_csv(csv_path.read_text())[0]


def p50_ms(
    url: str,
    model: str,
    extra: list[str],
    data: Path,
    concurrency: int,
    work: Path,
    ms: int,
    protocol: str = "http",
) -> float:
    """perf_analyzer's p50 in ms for one case (``protocol``: http or grpc)."""
    return perf_row(url, model, extra, data, concurrency, work, ms, protocol).p50_us / 1000


def front_cpu_s(server: TritonServer) -> float:
    """CPU seconds the front's event-loop thread has used (user + system, from /proc)."""
    assert server.guard is not None
    fields = (
        Path(f"/proc/self/task/{server.guard._thread.native_id}/stat").read_text().rsplit(")", 1)[1].split()
    )
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def requests_done(server: TritonServer, model: str) -> int:
    """tritonserver's count of successful inferences of ``model`` (its own metrics port, not the front's)."""
    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    found = re.search(rf'nv_inference_request_success{{model="{model}",version="1"}} (\d+)', text)
    return int(found.group(1)) if found else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("build/front-bench"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--measurement-ms", type=int, default=3000)
    args = parser.parse_args()
    load = os.getloadavg()
    repo = build_repository(args.work)
    servers = {}
    logs = []
    try:
        for name, guard in (("front", True), ("direct", False)):
            log = open(args.work / f"{name}.log", "wb")  # noqa: SIM115 (closed below)
            logs.append(log)
            options = ServerOptions(
                repository=repo.root, http_port=free_port(), grpc_port=free_port(), metrics_port=free_port(),
                model_control_mode="explicit", load_models=[PY_IDENTITY, FLOOR], work_dir=args.work,
                http_guard=guard,
            )  # fmt: skip
            servers[name] = TritonServer(options, stdout=log, stderr=log)
        for server in servers.values():
            server.wait_ready(models=[PY_IDENTITY, FLOOR])
        results = []
        for case, (model, family, extra) in CASES.items():
            for concurrency in CONCURRENCIES:
                runs: dict[str, list[float]] = {"front": [], "direct": []}
                cpu = []
                for _ in range(args.rounds):
                    for name, server in servers.items():  # alternating, so drift hits both
                        if name == "front":
                            before = front_cpu_s(server), requests_done(server, model)
                        runs[name].append(
                            p50_ms(server.http_url, model, extra, repo.work / "inputs" / f"{family}{'-seq16' if family == 'llama' else ''}.json",
                                   concurrency, args.work, args.measurement_ms)
                        )  # fmt: skip
                        if name == "front":
                            count = requests_done(server, model) - before[1]
                            cpu.append((front_cpu_s(server) - before[0]) / max(count, 1) * 1e6)
                front, direct = statistics.median(runs["front"]), statistics.median(runs["direct"])
                cpu_us = statistics.median(cpu)
                row = {
                    "case": case, "concurrency": concurrency, "front_p50_ms": round(front, 3),
                    "direct_p50_ms": round(direct, 3), "diff_ms": round(front - direct, 3),
                    "ratio": round(front / direct, 3), "front_cpu_us_per_request": round(cpu_us, 1), "runs": runs,
                }  # fmt: skip
                results.append(row)
                print(
                    f"{case:22s} c={concurrency:<3d} front p50 {front:7.3f} ms  direct {direct:7.3f} ms  "
                    f"+{front - direct:6.3f} ms  x{front / direct:.3f}  front CPU {cpu_us:6.1f} us/request  (runs {runs})",
                    flush=True,
                )
        machine = describe_machine(tritonserver="2.51.0", perf_analyzer=version(), load_average=load)
        (args.work / "front.json").write_text(json.dumps({"machine": machine, "results": results}, indent=1))
        print(f"machine: {machine}")
    finally:
        for server in servers.values():
            server.stop()
        for log in logs:
            log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
