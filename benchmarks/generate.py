"""Generation side by side, in one run, on the simulator with a per-step device-time model (not NPU time):
(a) the public pyACL programs' loop (one sequence at a time, its whole KV cache through the host every step),
(b) static batching (a batch of c runs until its longest member ends, then the next c start),
(c) ge-plugin (iteration-level batching: sequences join and leave at every step).

    python -m benchmarks.generate [--concurrency 1 8 32] [--requests 32]

The device-time model (the simulator's latency profile, timing-only mode: nothing is computed, every copy
and execute takes its modelled time on its stream): a decode step of batch b reads the weights once and
every row's whole KV cache (the OM's kv_len is the context, whatever the sequence's length), so
``decode(b) = WEIGHTS_MS + b * KV_MS_PER_ROW``; a prefill chunk of s tokens is ``WEIGHTS_MS + s *
PREFILL_MS_PER_TOKEN``. Copies: host<->device at PCIE_GBPS, device<->device at MEMORY_GBPS. The tiny
LLaMA's cache is small (262 KB a sequence at a context of 256), so (a) loses mostly by running one
sequence at a time; a real model's cache (24.5 MB a token for a 1024-token tiny-llama) would make its
copies dominate too.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("GE_PLUGIN_DEVICE", "sim")

from ge_plugin import acl_constants as C
from ge_plugin.atc import flags, simbuild
from ge_plugin.atc.generate import GenerateShapes, atc_flags
from ge_plugin.device import copy_async
from ge_plugin.generate import GenerateConfig, Generator, SamplingParams
from ge_plugin.models import write_model
from ge_plugin.models.llama_kv import tiny_llama_kv
from ge_plugin.sim import device_time

CONTEXT = 256
BATCH_GEARS = (1, 2, 4, 8, 16, 32)
SEQ_GEARS = (1, 16, 64)
WEIGHTS_MS = 4.0
KV_MS_PER_ROW = 0.1
PREFILL_MS_PER_TOKEN = 0.05
PCIE_GBPS = 24.0
MEMORY_GBPS = 800.0


def build_om(directory: Path) -> Path:
    source = directory / "tiny_llama_kv.onnx"
    write_model(source, tiny_llama_kv())
    shapes = GenerateShapes("stacked", 2, 4, 16, CONTEXT, BATCH_GEARS, SEQ_GEARS)
    argv = [
        f"--model={source}",
        "--framework=5",
        f"--output={directory / 'gen'}",
        "--soc_version=Ascend910B3",
    ]
    return simbuild.build(
        flags.parse_args([*argv, *atc_flags(shapes), "--precision_mode=must_keep_origin_dtype"])
    ).path


def profile() -> device_time.LatencyProfile:
    table = {}
    for b in BATCH_GEARS:
        table[",".join(map(str, (b, 1, b, CONTEXT + 1, b, 1, b)))] = WEIGHTS_MS + b * KV_MS_PER_ROW
    for s in SEQ_GEARS:
        if s != 1:
            table[",".join(map(str, (1, s, 1, CONTEXT + s, 1, s, 1)))] = WEIGHTS_MS + s * PREFILL_MS_PER_TOKEN
    return device_time.LatencyProfile(table, pcie_gbps=PCIE_GBPS, memory_gbps=MEMORY_GBPS)


class HostKvGenerator(Generator):
    """(a): every decode step moves the sequence's whole KV cache device -> host and back, as the public
    programs do (their OM takes past_key_values from the host each step)."""

    def _decode(self) -> None:
        stream = self.stream.handle
        rows = len(self.active) * self.cache.slot_bytes
        for block in range(self.cache.blocks):
            src = self.cache.block(block)
            copy_async(self._host_kv.ptr, self._host_kv.size, src, rows, C.ACL_MEMCPY_DEVICE_TO_HOST, stream)
            copy_async(src, rows, self._host_kv.ptr, rows, C.ACL_MEMCPY_HOST_TO_DEVICE, stream)
        super()._decode()


def workload(requests: int, seed: int = 0) -> list[tuple[np.ndarray, int]]:
    rng = np.random.default_rng(seed)
    return [
        (rng.integers(3, 512, int(rng.integers(8, 129))), int(rng.integers(8, 97))) for _ in range(requests)
    ]


def run(om: Path, mode: str, concurrency: int, cases: list[tuple[np.ndarray, int]]) -> dict[str, float]:
    cls = HostKvGenerator if mode == "a" else Generator
    generator = cls(str(om), GenerateConfig(max_queue=len(cases)))
    if mode == "a":
        from ge_plugin.device import PinnedBuffer

        generator._host_kv = PinnedBuffer(generator.cache.slot_bytes)  # type: ignore[attr-defined]
    # c clients in a closed loop: a client's next request arrives when its previous one has ended
    arrivals: dict[int, float] = {}
    stamps: dict[int, list[float]] = {}
    queue = list(enumerate(cases))
    arrived: list[tuple[int, np.ndarray, int]] = []

    def arrive() -> None:
        if queue:
            key, (prompt, count) = queue.pop(0)
            arrivals[key] = time.perf_counter()
            arrived.append((key, prompt, count))

    def listener(sequence, ids, finish):
        if ids:
            stamps.setdefault(sequence.key, []).append(time.perf_counter())
        if finish:
            arrive()

    width = 1 if mode == "a" else concurrency
    tokens = sum(count for _, count in cases)
    start = time.perf_counter()
    for _ in range(concurrency):
        arrive()
    try:
        while arrived or not generator.idle:
            # (a) and (b) start a new group only when the last one has ended; (c) tops up at every step
            if arrived and (generator.idle or mode == "c"):
                room = width - len(generator.active) - len(generator.waiting)
                for key, prompt, count in arrived[: max(room, 0)]:
                    sequence = generator.submit(
                        prompt, SamplingParams(max_tokens=count, ignore_eos=True), listener
                    )
                    sequence.key = key  # type: ignore[attr-defined]
                del arrived[: max(room, 0)]
            generator.step()
        elapsed = time.perf_counter() - start
    finally:
        generator.close()
    ttft = [stamps[k][0] - arrivals[k] for k in stamps]
    itl = [b - a for times in stamps.values() for a, b in itertools.pairwise(times)]
    return {
        "tokens_per_s": tokens / elapsed,
        "ttft_p50_ms": statistics.median(ttft) * 1e3,
        "itl_p50_ms": float(np.percentile(itl, 50)) * 1e3,
        "itl_p99_ms": float(np.percentile(itl, 99)) * 1e3,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--requests", type=int, default=0, help="default: 3 per client, at least 32")
    args = parser.parse_args()
    device_time.set_timing_only(True)
    device_time.set_profile(profile())
    print(
        "simulator, timing-only, per-step device-time model (benchmarks/generate.py); c clients in a closed"
    )
    print(
        "loop, 3 requests each (at least 32 in all), prompts 8-128 tokens, outputs 8-96; context 256. Not NPU time.\n"
    )
    print("| c | loop | tokens/s | TTFT p50 ms | ITL p50 ms | ITL p99 ms |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as directory:
        om = build_om(Path(directory))
        for concurrency in args.concurrency:
            cases = workload(args.requests or max(32, 3 * concurrency))
            results = {mode: run(om, mode, concurrency, cases) for mode in "abc"}
            for mode, name in (
                ("a", "(a) public loop"),
                ("b", "(b) static batching"),
                ("c", "(c) ge-plugin"),
            ):
                r = results[mode]
                print(
                    f"| {concurrency} | {name} | {r['tokens_per_s']:.0f} | {r['ttft_p50_ms']:.1f} | "
                    f"{r['itl_p50_ms']:.2f} | {r['itl_p99_ms']:.2f} |"
                )
            c = results["c"]["tokens_per_s"]
            print(
                f"|   | ratios | c/a {c / results['a']['tokens_per_s']:.2f}x, c/b {c / results['b']['tokens_per_s']:.2f}x"
                " | | | |"
            )
    print(f"\nper-step device time at c=1: decode(1) = {WEIGHTS_MS + KV_MS_PER_ROW:.2f} ms")


if __name__ == "__main__":
    main()
