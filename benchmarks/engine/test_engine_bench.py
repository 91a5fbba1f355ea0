"""The engine per execute on the CPU simulator (timing-only, no device time).

- **P2**: ``Engine.execute`` of one identity request (views of the staging, as the backend asks) against a
  hand-written pyACL loop on the same simulator, same OM and same gear: copy the request into pinned memory,
  H2D, set the batch gear, execute, D2H, synchronize, read the output where it landed. Both pay the
  simulator, so the ratio is what ge-plugin adds to the least a pyACL program does. The two alternate call
  by call, so that the moods of a shared VM (its load moves single calls by half) hit both alike; per block
  of calls the ratio of their medians, and over the blocks the median ratio with a bootstrap interval.
  Target: <= 1.05x.
- **The engine's own host time per execute**: the same executes with the lane's launch and wait stubbed
  out, so that nothing of the simulator is left: validation, planning, the gather into staging, the
  counters and the answers, for the identity at 1 and 8 requests and the tiny LLaMA at 1.
"""

from __future__ import annotations

import contextlib
import ctypes
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

#: P2's target: the engine's execute at most this many times the hand-written loop's
P2_TARGET = 1.05
#: blocks, and calls of each side per block (alternating)
P2_BLOCKS = 40
P2_CALLS = 400
#: timed calls of each host-time case
HOST_CALLS = 5000


@contextlib.contextmanager
def _engine(repo: Any, name: str) -> Iterator[Any]:
    """One engine at a time: two engines of one thread would share whichever context was made current last."""
    from ge_plugin.engine import Engine, read_config_pbtxt

    config = read_config_pbtxt(repo.config(name))
    engine = Engine.from_model_config(config, version_dir=repo.version_dir(name))
    try:
        yield engine
    finally:
        engine.close()


class PyAclLoop:
    """What a pyACL program does per request with everything allocated once: its own stream, buffers and
    datasets on the engine's loaded model, one request copied into pinned memory and back."""

    def __init__(self, engine: Any):
        from ge_plugin import device

        acl = self.acl = device.acl()
        engine.context.make_current()
        model = engine.lanes[0].model
        self.model_id, self.mbatch = model.model_id, model.mbatch_index
        self.stream, ret = acl.rt.create_stream()
        assert ret == 0
        position, gear = next((k, g) for k, g in enumerate(engine.gears.gears) if g.rows == 1)
        self.batch = gear.setting
        self.in_bytes = engine.binding.inputs[0].nbytes[position]
        self.out_bytes = engine.binding.outputs[0].nbytes[position]
        info_in, info_out = model.inputs[0], model.outputs[0]
        self.in_dev, _ = acl.rt.malloc(info_in.size, 0)
        self.in_host, _ = acl.rt.malloc_host(info_in.size)
        self.out_dev, _ = acl.rt.malloc(info_out.size, 0)
        self.out_host, _ = acl.rt.malloc_host(info_out.size)
        self.mbatch_dev, _ = acl.rt.malloc(model.mbatch_size, 0)
        slots = [(0, 0)] * model.num_inputs
        slots[info_in.index] = (self.in_dev, info_in.size)
        slots[self.mbatch] = (self.mbatch_dev, model.mbatch_size)
        self.buffers = []
        self.inputs = acl.mdl.create_dataset()
        for ptr, size in slots:
            self.buffers.append(acl.create_data_buffer(ptr, size))
            acl.mdl.add_dataset_buffer(self.inputs, self.buffers[-1])
        self.outputs = acl.mdl.create_dataset()
        self.buffers.append(acl.create_data_buffer(self.out_dev, info_out.size))
        acl.mdl.add_dataset_buffer(self.outputs, self.buffers[-1])
        words = (ctypes.c_float * (self.out_bytes // 4)).from_address(self.out_host)
        self.result = np.ctypeslib.as_array(words)

    def __call__(self, request: np.ndarray) -> np.ndarray:
        acl = self.acl
        ctypes.memmove(self.in_host, request.ctypes.data, request.nbytes)
        acl.rt.memcpy_async(self.in_dev, self.in_bytes, self.in_host, self.in_bytes, 1, self.stream)
        acl.mdl.set_dynamic_batch_size(self.model_id, self.inputs, self.mbatch, self.batch)
        acl.mdl.execute_async(self.model_id, self.inputs, self.outputs, self.stream)
        acl.rt.memcpy_async(self.out_host, self.out_bytes, self.out_dev, self.out_bytes, 2, self.stream)
        acl.rt.synchronize_stream(self.stream)
        return self.result

    def close(self) -> None:
        acl = self.acl
        for buffer in self.buffers:
            acl.destroy_data_buffer(buffer)
        acl.mdl.destroy_dataset(self.inputs)
        acl.mdl.destroy_dataset(self.outputs)
        for ptr in (self.in_dev, self.out_dev, self.mbatch_dev):
            acl.rt.free(ptr)
        for ptr in (self.in_host, self.out_host):
            acl.rt.free_host(ptr)
        acl.rt.destroy_stream(self.stream)


def _paired_block(
    first: Callable[[], object], second: Callable[[], object], calls: int
) -> tuple[float, float]:
    """The median seconds of ``calls`` calls of each, alternating call by call."""
    a, b = [], []
    clock = time.perf_counter
    for _ in range(calls):
        start = clock()
        first()
        middle = clock()
        second()
        a.append(middle - start)
        b.append(clock() - middle)
    return statistics.median(a), statistics.median(b)


def _bootstrap(ratios: list[float], rounds: int = 4000) -> tuple[float, float]:
    """95 % interval of the median of per-block ratios (percentile bootstrap over blocks)."""
    rng = np.random.default_rng(19)
    values = np.asarray(ratios)
    medians = np.median(rng.choice(values, size=(rounds, len(values)), replace=True), axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return float(low), float(high)


def test_bench_p2_engine_execute_against_a_hand_written_pyacl_loop(
    bench_repository: Any, benchmark: Any, record_engine: Callable[..., None]
) -> None:
    from ge_plugin.engine import Lifetime

    request = np.linspace(-2.0, 1.75, 16, dtype=np.float32).reshape(1, 16)
    requests = [{"INPUT0": request}]
    with _engine(bench_repository, "ge_identity") as identity:
        loop = PyAclLoop(identity)
        try:

            def engine_call() -> object:
                return identity.execute(requests, lifetime=Lifetime.UNTIL_NEXT_CALL)

            def loop_call() -> object:
                return loop(request)

            assert engine_call()[0]["OUTPUT0"].shape == (1, 16)
            for _ in range(200):  # warm both paths
                engine_call()
                loop_call()
            engine_blocks, loop_blocks = [], []
            for k in range(P2_BLOCKS):  # each side first in half of the blocks
                if k % 2 == 0:
                    e, h = _paired_block(engine_call, loop_call, P2_CALLS)
                else:
                    h, e = _paired_block(loop_call, engine_call, P2_CALLS)
                engine_blocks.append(e)
                loop_blocks.append(h)
            ratios = [e / h for e, h in zip(engine_blocks, loop_blocks)]
            low, high = _bootstrap(ratios)
            record_engine(
                "P2",
                engine=statistics.median(engine_blocks),
                loop=statistics.median(loop_blocks),
                ratio=statistics.median(ratios),
                low=low,
                high=high,
                blocks=P2_BLOCKS,
                calls=P2_CALLS,
                target=P2_TARGET,
            )
            benchmark.extra_info.update(ratio=statistics.median(ratios), low=low, high=high)
            benchmark(engine_call)
        finally:
            loop.close()


CASES = {
    "engine host, identity, 1 request": ("ge_identity", 1),
    "engine host, identity, 8 requests": ("ge_identity", 8),
    "engine host, tiny LLaMA, 1 request of 16 tokens": ("ge_llama", 1),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bench_engine_host_time_per_execute(
    case: str,
    bench_repository: Any,
    benchmark: Any,
    record_engine: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ge_plugin.engine import Lifetime

    name, count = CASES[case]
    if name == "ge_identity":
        request = {"INPUT0": np.ones((1, 16), np.float32)}
    else:
        request = {"input_ids": (1000 + 7 * np.arange(16, dtype=np.int64)).reshape(1, 16)}
    requests = [request] * count
    with _engine(bench_repository, name) as engine:
        for lane in engine.lanes:  # launch and wait for nothing: what is left is the engine's own host work
            monkeypatch.setattr(lane, "launch", lambda *args: None)
            monkeypatch.setattr(lane, "wait", lambda: None)
        executes = engine.stats.executes

        def call() -> object:
            return engine.execute(requests, lifetime=Lifetime.UNTIL_NEXT_CALL)

        for _ in range(200):
            call()
        assert engine.stats.executes - executes == 200  # one execute per call: the window is one chunk
        benchmark.pedantic(call, rounds=HOST_CALLS, iterations=1, warmup_rounds=100)
        if benchmark.stats is not None:  # None under --benchmark-disable
            stats = benchmark.stats.stats
            record_engine(case, median=stats.median, min=stats.min, calls=HOST_CALLS)
        monkeypatch.undo()  # the real launch and wait again, for close()
