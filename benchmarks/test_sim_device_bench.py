"""What one execute on the simulated device costs the host, in CPU time, whatever the tensor sizes.

On an Ascend host an execute costs the host a few pyACL calls (microseconds each): the copies are DMA and
the model runs on the NPU, while the host waits in ``synchronize_stream`` off the CPU. A benchmark of the
serving stack on the CPU simulator must see the same, or the plugin's own cost hides under the simulator's.
This measures the simulator alone, in timing-only mode, doing what ge-plugin's engine does per batch:

    memcpy_async H2D (pinned -> device), set_dynamic_batch_size, execute_async,
    memcpy_async D2H (device -> pinned), synchronize_stream

on an identity model with one input and one output of 4 KiB, 2 MiB and 16 MiB, with no device time and with
1 ms of it. Each round is timed in process CPU time (``time.process_time``: every thread of the process,
user and system, so a worker thread's share is counted too), never wall time: the device time is spent
off the CPU. Target: at most 25 us of CPU per execute at every size, the same at every size.

More measurements separate the simulator from the machine: the three sizes again in one simulator, in
alternating blocks (so a loaded machine's drift cancels out of the ratios between sizes); a bare 1 ms
``time.sleep`` in the same process (what waiting for any device costs the host here, simulator or not);
and a 1 ms sleep followed by the step with no device time (the same calls after the same wait, which on a
shared VM finds the caches cold): the 1 ms row minus that is what the simulator's own waiting costs.
Run with ``make bench-micro``; the summary prints the sizes side by side.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _pyacl_lane import PyAclLane, close_device, open_device

from ge_plugin.atc import flags, simbuild
from ge_plugin.models import write_model
from ge_plugin.models._graph import FLOAT, GraphBuilder, tensor
from ge_plugin.sim import _state, device_time
from ge_plugin.sim import acl as sim_acl

#: output (and input) bytes of one execute: a small request, a 2 MiB LLaMA logits row, 8 of them
SIZES = {"4 KiB": 4 << 10, "2 MiB": 2 << 20, "16 MiB": 16 << 20}
#: the device time of every execute, ms
DEVICE_MS = {"no device time": 0.0, "1 ms device time": 1.0}
#: host CPU per execute the simulator may cost, seconds
TARGET_S = 25e-6
ROUNDS, ITERATIONS, WARMUP_ROUNDS = 40, 25, 2
#: the paired measurement: rounds of one block per size, in rotating order, of STEPS steps each
PAIRED_ROUNDS, STEPS = 30, 100


def _identity_om(directory: Path, nbytes: int) -> Path:
    """An identity sim OM of [batch, nbytes / 4] float32, batch gears 1 and 2."""
    width = nbytes // 4
    g = GraphBuilder()
    g.op("Identity", "INPUT0", out="OUTPUT0")
    model = g.build(
        f"identity_{width}",
        [tensor("INPUT0", FLOAT, ["batch", width])],
        [tensor("OUTPUT0", FLOAT, ["batch", width])],
        doc=f"OUTPUT0 = INPUT0, {nbytes} bytes per row: the simulated device's host cost at that size.",
        metadata={"ge_plugin.model": "identity"},
    )
    write_model(directory / f"identity_{width}.onnx", model)
    argv = [
        f"--model={directory / f'identity_{width}.onnx'}",
        "--framework=5",
        f"--output={directory / f'identity_{width}'}",
        "--soc_version=Ascend910B3",
        f"--input_shape=INPUT0:-1,{width}",
        "--dynamic_batch_size=1,2",
        "--precision_mode=must_keep_origin_dtype",
    ]
    return simbuild.build(flags.parse_args(argv)).path


@pytest.fixture(scope="module")
def oms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("sim-device-bench")
    return {label: _identity_om(directory, nbytes) for label, nbytes in SIZES.items()}


@pytest.fixture
def timing_only_sim(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """A fresh simulator in timing-only mode, sanitizer off, with private device locks."""
    monkeypatch.setenv("GE_PLUGIN_SIM_CHECK", "0")
    monkeypatch.setenv("GE_PLUGIN_SIM_TIMING_ONLY", "1")
    monkeypatch.setenv("GE_PLUGIN_SIM_DEVICE_LOCK_DIR", str(tmp_path))
    _state.reset_for_tests()
    yield
    _state.reset_for_tests()
    device_time.set_profile(device_time.LatencyProfile())
    device_time.set_timing_only(False)


@pytest.mark.parametrize("device_ms", list(DEVICE_MS), ids=["0ms", "1ms"])
@pytest.mark.parametrize("size", list(SIZES), ids=["4KiB", "2MiB", "16MiB"])
@pytest.mark.benchmark(group="sim device: host CPU per execute", timer=time.process_time)
def test_bench_sim_execute_host_cpu(
    oms: dict[str, Path],
    timing_only_sim: None,
    size: str,
    device_ms: str,
    benchmark: Any,
    record_sim_device: Callable[..., None],
) -> None:
    device_time.set_profile(device_time.LatencyProfile(base_ms=DEVICE_MS[device_ms]))
    open_device(sim_acl)
    lane = PyAclLane(sim_acl, oms[size], SIZES[size])
    step = lane.step()
    step()
    assert sim_acl.get_recent_err_msg() is None, "the timed loop must be a correct program"
    wall = time.perf_counter()
    benchmark.pedantic(step, rounds=ROUNDS, iterations=ITERATIONS, warmup_rounds=WARMUP_ROUNDS)
    wall = (time.perf_counter() - wall) / ((ROUNDS + WARMUP_ROUNDS) * ITERATIONS)
    assert sim_acl.get_recent_err_msg() is None
    from ge_plugin.sim import snapshot

    executes = snapshot()["devices"][0]["executes"]
    assert executes >= 1 + (ROUNDS + WARMUP_ROUNDS) * ITERATIONS, "every timed step executed"
    lane.release()
    close_device(sim_acl)
    benchmark.extra_info.update(size=size, device_ms=DEVICE_MS[device_ms], wall_s=wall)
    if benchmark.stats is not None:  # None under --benchmark-disable
        record_sim_device(device_ms, size, benchmark.stats.stats.median, wall, TARGET_S)
    assert wall >= DEVICE_MS[device_ms] / 1000.0, "the host waited the device time at synchronize"


def test_bench_sim_execute_sizes_paired(
    oms: dict[str, Path], timing_only_sim: None, record_sim_sizes: Callable[..., None]
) -> None:
    """The three sizes in one simulator, blocks alternating in rotating order, no device time: each size's
    median CPU per execute and, per round, its ratio to the 4 KiB block of that round."""
    device_time.set_profile(device_time.LatencyProfile(base_ms=0.0))
    open_device(sim_acl)
    lanes = {size: PyAclLane(sim_acl, oms[size], nbytes) for size, nbytes in SIZES.items()}
    steps = {size: lane.step() for size, lane in lanes.items()}
    for step in steps.values():
        for _ in range(STEPS):
            step()
    assert sim_acl.get_recent_err_msg() is None, "the timed loop must be a correct program"
    sizes = list(SIZES)
    per_size: dict[str, list[float]] = {size: [] for size in sizes}
    for n in range(PAIRED_ROUNDS):
        for size in sizes[n % len(sizes) :] + sizes[: n % len(sizes)]:
            step = steps[size]
            start = time.process_time()
            for _ in range(STEPS):
                step()
            per_size[size].append((time.process_time() - start) / STEPS)
    for lane in lanes.values():
        lane.release()
    close_device(sim_acl)
    smallest = per_size[sizes[0]]
    record_sim_sizes(
        {size: statistics.median(times) for size, times in per_size.items()},
        {size: [t / base for t, base in zip(times, smallest)] for size, times in per_size.items()},
    )


def test_bench_what_waiting_costs(
    oms: dict[str, Path], timing_only_sim: None, record_sim_floor: Callable[..., None]
) -> None:
    """The floors of the 1 ms row, which no simulator can go below on this machine: a bare 1 ms sleep, and a
    1 ms sleep followed by the step with no device time (the same calls, but the host waited outside the
    simulator, so they run on whatever state of the caches the wait left)."""
    wait_s = DEVICE_MS["1 ms device time"] / 1000.0

    def per_step(step: Callable[[], None] | None) -> float:
        per_round = []
        for _ in range(ROUNDS):
            start = time.process_time()
            for _ in range(ITERATIONS):
                time.sleep(wait_s)
                if step is not None:
                    step()
            per_round.append((time.process_time() - start) / ITERATIONS)
        return statistics.median(per_round)

    bare = per_step(None)
    device_time.set_profile(device_time.LatencyProfile(base_ms=0.0))
    open_device(sim_acl)
    after_wait = {}
    for size, nbytes in SIZES.items():
        lane = PyAclLane(sim_acl, oms[size], nbytes)
        step = lane.step()
        step()
        after_wait[size] = per_step(step)
        lane.release()
    close_device(sim_acl)
    record_sim_floor("1 ms device time", "bare 1 ms sleep", dict.fromkeys(SIZES, bare))
    record_sim_floor("1 ms device time", "sleep + 0 ms step", after_wait)
