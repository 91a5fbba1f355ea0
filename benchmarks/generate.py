"""Generation side by side, in one run, on the simulator with a per-step device-time model (not NPU time):

- (a) the public pyACL programs' loop: one sequence at a time, its whole KV cache through the host every
  step (given ge-plugin's chunked prefill: their OM takes one token, so they would prefill slower still);
- (b) static batching: a batch of up to c requests is prefilled, then decodes on the batch gear that holds
  all of it until its longest member ends (a member that ended keeps its row, as padding); requests that
  arrive meanwhile wait for the whole batch;
- (b') the same, but the decode gear shrinks as members end (kinder to static batching than (b));
- (c) ge-plugin: iteration-level batching, sequences join and leave at every step.

    python -m benchmarks.generate [--quick] [--concurrency 1 8 32] [--per-client 4]

The workload is the issue's: prompts of 8-512 tokens, outputs of 8-256 (uniform, ``ignore_eos``, one
seeded draw shared by every loop), c clients in a closed loop (a client sends its next request when its
previous one ended). The OM is the demo LLaMA compiled for a context of 768 (512 + 256).

The device-time model (the simulator's latency profile, timing-only mode: nothing is computed, every
copy and execute takes its modelled time on the stream; the host's own work takes real time):

- decode step of batch gear b: ``WEIGHTS_MS + b * KV_MS_PER_ROW``: the weights are read once, and every row
  reads its whole context's keys and values (the OM's kv_len is the context, whatever the sequence's
  length): 0.1 ms per row per 256 positions, so 0.3 ms at 768;
- prefill chunk of s tokens: ``WEIGHTS_MS + s * PREFILL_MS_PER_TOKEN``;
- copies: host<->device at ``PCIE_GBPS``, device<->device at ``MEMORY_GBPS`` (bytes / bandwidth; no
  per-copy overhead is modelled).

Measured per loop: tokens/s in the steady window (from the start until the last request is admitted: up
to then the closed loop keeps c requests in the system; the drain after it, with fewer, is left out for
every loop alike) and over the whole run, each also device-bound (tokens over the device time booked in
that span: what the loop would reach if the host cost nothing; it depends on the schedule alone, not on
how loaded the machine is); TTFT p50 (from the client's send, queueing included); ITL p50 and p99; and
the host's time per step outside the device's (wall time minus the time the loop waited in
``synchronize``), of which the simulator's own ``memcpy_async`` calls.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import numpy as np

os.environ.setdefault("GE_PLUGIN_DEVICE", "sim")

from ge_plugin import acl_constants as C
from ge_plugin.atc import flags, simbuild
from ge_plugin.atc.generate import GenerateShapes, atc_flags
from ge_plugin.device import PinnedBuffer, copy_async
from ge_plugin.device.aclapi import acl
from ge_plugin.generate import GenerateConfig, Generator, SamplingParams, Sequence
from ge_plugin.models import write_model
from ge_plugin.models.llama_kv import tiny_llama_kv
from ge_plugin.sim import counters, device_time

PROMPT_TOKENS = (8, 512)
OUTPUT_TOKENS = (8, 256)
CONTEXT = PROMPT_TOKENS[1] + OUTPUT_TOKENS[1]
BATCH_GEARS = (1, 2, 4, 8, 16, 32)
SEQ_GEARS = (1, 16, 64, 256)
WEIGHTS_MS = 4.0
KV_MS_PER_ROW = 0.1 * CONTEXT / 256
PREFILL_MS_PER_TOKEN = 0.05
PCIE_GBPS = 24.0
MEMORY_GBPS = 800.0
LOOPS = {
    "a": "(a) public loop",
    "b": "(b) static batching",
    "b'": "(b') static, gear shrinking",
    "c": "(c) ge-plugin",
}

Case = tuple[np.ndarray, int]


def decode_ms(batch: int) -> float:
    return WEIGHTS_MS + batch * KV_MS_PER_ROW


def prefill_ms(seq: int) -> float:
    return WEIGHTS_MS + seq * PREFILL_MS_PER_TOKEN


def chunk_ms(seq: int) -> float:
    """A prefill chunk's device time as profiled: a one-token chunk runs on gear (1, 1), decode's."""
    return decode_ms(1) if seq == 1 else prefill_ms(seq)


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
    """The model above as gear labels (the dims gear's values: ids, mask, positions, past's batch)."""
    table = {}
    for b in BATCH_GEARS:
        table[",".join(map(str, (b, 1, b, CONTEXT + 1, b, 1, b)))] = decode_ms(b)
    for s in SEQ_GEARS:
        if s != 1:
            table[",".join(map(str, (1, s, 1, CONTEXT + s, 1, s, 1)))] = prefill_ms(s)
    return device_time.LatencyProfile(table, pcie_gbps=PCIE_GBPS, memory_gbps=MEMORY_GBPS)


class PublicLoop(Generator):
    """(a): every decode step moves the sequence's whole KV cache device -> host and back, as the public
    programs do (their OM takes past_key_values from the host each step)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._host_kv = PinnedBuffer(self.cache.slot_bytes)
        self._closing.append(self._host_kv)

    def _decode(self) -> None:
        stream = self.stream.handle
        rows = len(self.active) * self.cache.slot_bytes
        for block in range(self.cache.blocks):
            src = self.cache.block(block)
            copy_async(self._host_kv.ptr, self._host_kv.size, src, rows, C.ACL_MEMCPY_DEVICE_TO_HOST, stream)
            copy_async(src, rows, self._host_kv.ptr, rows, C.ACL_MEMCPY_HOST_TO_DEVICE, stream)
        super()._decode()


class StaticBatching(Generator):
    """(b): a batch is every request waiting when the last batch ended; all of it is prefilled before it
    decodes (the engine's prefill budget is lifted), then every decode step runs on the gear holding the
    whole batch, members that ended included, until the last one ends. Requests that arrive meanwhile wait."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.batch = 0
        self._room = 0

    def step(self) -> None:
        if not self.active and self.prefilling is None:
            with self._lock:
                self.batch = self._room = len(self.waiting)
        super().step()

    def _next_waiting(self) -> Sequence | None:
        if not self._room:
            return None
        sequence = super()._next_waiting()
        if sequence is not None:
            self._room -= 1
        return sequence

    def _decode_gear(self, count: int) -> int:
        return super()._decode_gear(max(count, self.batch))


class _Timers:
    """Host time inside ``synchronize`` (waiting for the device) and inside the simulator's memcpy_async."""

    def __init__(self) -> None:
        self.waiting = 0.0
        self.memcpy = 0.0


@contextmanager
def timed(generator: Generator) -> Iterator[_Timers]:
    timers = _Timers()
    rt = acl().rt
    memcpy_async = rt.memcpy_async
    synchronize = generator.stream.synchronize
    clock = time.perf_counter

    def timed_memcpy(*args: Any) -> Any:
        t0 = clock()
        try:
            return memcpy_async(*args)
        finally:
            timers.memcpy += clock() - t0

    def timed_synchronize() -> None:
        t0 = clock()
        try:
            synchronize()
        finally:
            timers.waiting += clock() - t0

    rt.memcpy_async = timed_memcpy
    generator.stream.synchronize = timed_synchronize  # type: ignore[method-assign]
    try:
        yield timers
    finally:
        rt.memcpy_async = memcpy_async


def workload(requests: int, seed: int = 0) -> list[Case]:
    rng = np.random.default_rng(seed)
    return [
        (
            rng.integers(3, 512, int(rng.integers(PROMPT_TOKENS[0], PROMPT_TOKENS[1] + 1))),
            int(rng.integers(OUTPUT_TOKENS[0], OUTPUT_TOKENS[1] + 1)),
        )
        for _ in range(requests)
    ]


def _device_seconds(before: dict[str, Any], after: dict[str, Any]) -> float:
    """Device time booked between two counter snapshots: execute windows plus copies at their bandwidth."""
    seconds = after["busy_ms"] / 1e3 - before["busy_ms"] / 1e3
    for direction in ("h2d", "d2h", "d2d"):
        nbytes = after["memcpy_bytes"][direction] - before["memcpy_bytes"][direction]
        seconds += device_time.copy_s(direction, nbytes)
    return seconds


def run(om: Path, loop: str, concurrency: int, cases: list[Case]) -> dict[str, float]:
    """One loop over ``cases`` with ``concurrency`` clients in a closed loop."""
    config = GenerateConfig(max_queue=len(cases))
    generator: Generator
    if loop == "a":
        generator = PublicLoop(str(om), config)
    elif loop == "b":
        generator = StaticBatching(
            str(om), attrs.evolve(config, prefill_tokens_per_step=CONTEXT * BATCH_GEARS[-1])
        )
    elif loop == "b'":
        generator = Generator(
            str(om), attrs.evolve(config, prefill_tokens_per_step=CONTEXT * BATCH_GEARS[-1])
        )
    else:
        generator = Generator(str(om), config)
    arrivals: dict[int, float] = {}
    stamps: dict[int, list[float]] = {}
    keys: dict[int, int] = {}
    pending = list(enumerate(cases))
    arrived: list[tuple[int, np.ndarray, int]] = []

    def arrive() -> None:
        if pending:
            key, (prompt, count) = pending.pop(0)
            arrivals[key] = time.perf_counter()
            arrived.append((key, prompt, count))

    def listener(sequence: Sequence, ids: list[int], finish: str) -> None:
        if ids:
            stamps.setdefault(keys[id(sequence)], []).append(time.perf_counter())
        if finish:
            arrive()

    width = 1 if loop == "a" else concurrency
    groups = loop != "c"  # (a), (b), (b'): a new group starts only when the last one has ended
    steps = 0
    admitted_last = 0.0
    device = counters.device(0)
    at_last: dict[str, Any] = {}
    try:
        with timed(generator) as timers:
            before = device.as_dict()
            start = time.perf_counter()
            for _ in range(concurrency):
                arrive()
            while arrived or not generator.idle:
                if arrived and (generator.idle or not groups):
                    room = width - len(generator.active) - len(generator.waiting)
                    room -= generator.prefilling is not None
                    for key, prompt, count in arrived[: max(room, 0)]:
                        sequence = generator.submit(
                            prompt, SamplingParams(max_tokens=count, ignore_eos=True), listener
                        )
                        keys[id(sequence)] = key
                        if not pending and key == len(cases) - 1:
                            admitted_last = time.perf_counter()
                            at_last = device.as_dict()  # between steps: the stream is synchronized
                    del arrived[: max(room, 0)]
                generator.step()
                steps += 1
            elapsed = time.perf_counter() - start
            device_s = _device_seconds(before, device.as_dict())
            window_device_s = _device_seconds(before, at_last)
    finally:
        generator.close()
    tokens = sum(count for _, count in cases)
    window = admitted_last - start
    in_window = sum(1 for times in stamps.values() for t in times if t <= admitted_last)
    ttft = [stamps[k][0] - arrivals[k] for k in stamps]
    itl = [b - a for times in stamps.values() for a, b in itertools.pairwise(times)]
    host = elapsed - timers.waiting
    return {
        "steady": in_window / window,
        "steady_device_bound": in_window / window_device_s,
        "whole": tokens / elapsed,
        "whole_device_bound": tokens / device_s,
        "ttft_p50_ms": statistics.median(ttft) * 1e3,
        "itl_p50_ms": float(np.percentile(itl, 50)) * 1e3,
        "itl_p99_ms": float(np.percentile(itl, 99)) * 1e3,
        "host_ms_per_step": host / steps * 1e3,
        "sim_memcpy_ms_per_step": timers.memcpy / steps * 1e3,
        "steps": steps,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.generate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument(
        "--per-client", type=int, default=4, help="requests per client (at least 16 in all); default 4"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="c=8 and 32 only, 2 requests per client (about 1.5 minutes on a quiet machine)",
    )
    parser.add_argument("--loops", default="a,b,b',c", help="which loops, comma-separated (default all)")
    args = parser.parse_args(argv)
    if args.quick:
        args.concurrency, args.per_client = [8, 32], 2
    loops = [name for name in args.loops.split(",") if name]
    unknown = [name for name in loops if name not in LOOPS]
    if unknown:
        parser.error(f"unknown loop {unknown[0]!r}; choose among {', '.join(LOOPS)}")
    device_time.set_timing_only(True)
    device_time.set_profile(profile())
    load_before = os.getloadavg()[0]
    print(
        "simulator, timing-only, per-step device-time model (not NPU time): decode(b) = "
        f"{WEIGHTS_MS:g} + {KV_MS_PER_ROW:g} b ms, prefill(s) = {WEIGHTS_MS:g} + {PREFILL_MS_PER_TOKEN:g} s ms, "
        f"copies {PCIE_GBPS:g} GB/s host<->device, {MEMORY_GBPS:g} GB/s on the device;"
    )
    print(
        f"demo LLaMA, stacked form, context {CONTEXT}, batch gears {list(BATCH_GEARS)}, seq gears "
        f"{list(SEQ_GEARS)}; prompts {PROMPT_TOKENS[0]}-{PROMPT_TOKENS[1]} tokens, outputs "
        f"{OUTPUT_TOKENS[0]}-{OUTPUT_TOKENS[1]}; c clients in a closed loop, {args.per_client} requests each "
        "(at least 16).\n"
    )
    header = (
        "| c | loop | tokens/s steady | device-bound | tokens/s whole run | device-bound | TTFT p50 ms | "
        "ITL p50 ms | ITL p99 ms | host ms/step (sim memcpy) |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    results: dict[tuple[int, str], dict[str, float]] = {}
    workloads: dict[int, list[Case]] = {}
    with tempfile.TemporaryDirectory() as directory:
        om = build_om(Path(directory))
        for concurrency in args.concurrency:
            cases = workloads[concurrency] = workload(max(16, args.per_client * concurrency))
            for loop in loops:
                if loop.startswith("b") and concurrency == 1:
                    continue  # a batch of one is (c) with one client
                r = results[concurrency, loop] = run(om, loop, concurrency, cases)
                print(
                    f"| {concurrency} | {LOOPS[loop]} | {r['steady']:.0f} | {r['steady_device_bound']:.0f} | "
                    f"{r['whole']:.0f} | {r['whole_device_bound']:.0f} | {r['ttft_p50_ms']:.1f} | "
                    f"{r['itl_p50_ms']:.2f} | "
                    f"{r['itl_p99_ms']:.2f} | {r['host_ms_per_step']:.2f} ({r['sim_memcpy_ms_per_step']:.2f}) |",
                    flush=True,
                )
    _targets(results, workloads, print)
    print(
        f"\n{os.cpu_count()} CPUs, load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after: the wall-clock "
        "columns move with other jobs' load, the device-bound ones do not"
    )


def prefill_chunks_ms(tokens: int, chunk: Callable[[int], float] = chunk_ms) -> float:
    """Device time of one prompt's prefill as the engine chunks it (the smallest seq gear holding what is
    left, else the largest)."""
    total, done = 0.0, 0
    while done < tokens:
        left = tokens - done
        seq = next((s for s in SEQ_GEARS if s >= left), SEQ_GEARS[-1])
        total += chunk(seq)
        done += min(left, seq)
    return total


def ceiling(cases: list[Case], concurrency: int, chunk: Callable[[int], float] = chunk_ms) -> float:
    """The most (c) can gain over (b) on ``cases`` in device time alone: (b) exactly (each batch's prefills,
    then its longest member's decode steps on its gear), over (c) at its ideal (every prefill, and every
    decode step holding ``concurrency`` sequences: no start, no drain, no host)."""
    gear = next(b for b in BATCH_GEARS if b >= concurrency)
    static = 0.0
    for first in range(0, len(cases), concurrency):
        batch = cases[first : first + concurrency]
        static += sum(prefill_chunks_ms(p.size, chunk) for p, _ in batch)
        static += (max(count for _, count in batch) - 1) * decode_ms(
            next(b for b in BATCH_GEARS if b >= len(batch))
        )
    ideal = sum(prefill_chunks_ms(p.size, chunk) for p, _ in cases)
    ideal += sum(count - 1 for _, count in cases) / concurrency * decode_ms(gear)
    return static / ideal


def _targets(
    results: dict[tuple[int, str], dict[str, float]],
    workloads: dict[int, list[Case]],
    say: Callable[[str], None],
) -> None:
    say("")
    top = max(c for c, _ in results)
    c_loop = results.get((top, "c"))
    if c_loop is not None:
        for loop, target in (("a", 4.0), ("b", 1.8), ("b'", 1.8)):
            other = results.get((top, loop))
            if other is None:
                continue
            ratios = ", ".join(
                f"{key.replace('_', ' ')} {c_loop[key] / other[key]:.2f}x"
                for key in ("steady", "steady_device_bound", "whole", "whole_device_bound")
            )
            say(f"tokens/s at c={top}, (c) / {LOOPS[loop]}: {ratios} (target >= {target:g}x)")
        if (top, "b") in results:
            cases = workloads[top]
            say(
                f"device-time ceiling of (c) / (b) on this workload at c={top}: {ceiling(cases, top):.2f}x "
                f"(every decode step full, no start or drain, no host); with prefill free: "
                f"{ceiling(cases, top, lambda s: 0.0):.2f}x"
            )
    single = results.get((1, "c"))
    if single is not None:
        step = decode_ms(1)
        say(
            f"ITL p50 at c=1: {single['itl_p50_ms']:.2f} ms for a {step:.2f} ms decode step: "
            f"{single['itl_p50_ms'] / step:.2f}x (target <= 1.2x)"
        )


if __name__ == "__main__":
    main()
