"""What the simulator's sanitizer costs per execute, on and off, on the CPU simulator (no NPU anywhere).

Two request loops on the identity model (batch gears 1..16, timing only and no device time, so what is
timed is the host side of the pyACL calls, not onnxruntime):

- ``engine path``: what ge-plugin's engine does per batch: memcpy_async H2D from pinned memory,
  set_dynamic_batch_size, execute_async, memcpy_async D2H into pinned memory, synchronize_stream;
- ``sample path``: what a public sample does per request: memcpy from a numpy buffer it handed over
  with bytes_to_ptr, execute, memcpy back into bytes.

Each runs with checking off (the default) and on (``GE_PLUGIN_SIM_CHECK=1`` / ``run --check``), timed by
pytest-benchmark one after the other, and again paired: blocks of steps alternate off and on in one
simulator (checking can be switched at any call), timed in process CPU time, so that a loaded machine's
drift and other processes' work cancel out of the on/off ratio. The summary prints both. Run with
``make bench-micro``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _pyacl_lane import D2H, H2D, PyAclLane, close_device, open_device

from ge_plugin.atc import flags, simbuild
from ge_plugin.models import IDENTITY_WIDTH, identity, write_model
from ge_plugin.sim import _state, device_time, sanitizer
from ge_plugin.sim import acl as sim_acl

BATCH = 4
NBYTES = BATCH * IDENTITY_WIDTH * 4  #: one batch of the identity model, each way
#: the paired measurement: rounds of (off block, on block), in alternating order, of STEPS steps each
ROUNDS, STEPS = 40, 200


@pytest.fixture(scope="module")
def identity_om(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("sim-check-bench")
    write_model(directory / "identity.onnx", identity())
    argv = [
        f"--model={directory / 'identity.onnx'}",
        "--framework=5",
        f"--output={directory / 'identity'}",
        "--soc_version=Ascend910B3",
        f"--input_shape=INPUT0:-1,{IDENTITY_WIDTH}",
        "--dynamic_batch_size=1,2,4,8,16",
        "--precision_mode=must_keep_origin_dtype",
    ]
    return simbuild.build(flags.parse_args(argv)).path


@pytest.fixture(params=["off", "on"])
def checking(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[str]:
    """A fresh simulator with checking off or on, timing only, no device time, private device locks."""
    monkeypatch.setenv(sanitizer.ENV, "1" if request.param == "on" else "0")
    monkeypatch.setenv("GE_PLUGIN_SIM_TIMING_ONLY", "1")
    monkeypatch.setenv("GE_PLUGIN_SIM_EXECUTE_LATENCY_MS", "0")
    monkeypatch.setenv("GE_PLUGIN_SIM_DEVICE_LOCK_DIR", str(tmp_path))
    _state.reset_for_tests()
    yield request.param
    _state.reset_for_tests()
    device_time.set_profile(device_time.LatencyProfile())
    device_time.set_timing_only(False)


def _engine_path(acl: Any, lane: PyAclLane) -> Callable[[], None]:
    return lane.step()


def _sample_path(acl: Any, lane: PyAclLane) -> Callable[[], None]:
    x = np.ones((BATCH, IDENTITY_WIDTH), np.float32)
    dev_in, dev_out = lane.dev_in, lane.dev_out
    rt, mdl, util = acl.rt, acl.mdl, acl.util

    def step() -> None:
        data = x.tobytes()
        rt.memcpy(dev_in, len(data), util.bytes_to_ptr(data), len(data), H2D)
        mdl.set_dynamic_batch_size(lane.id, lane.inputs, lane.mbatch, BATCH)
        mdl.execute(lane.id, lane.inputs, lane.outputs)
        out = bytes(len(data))
        rt.memcpy(util.bytes_to_ptr(out), len(out), dev_out, len(out), D2H)

    return step


@pytest.mark.parametrize("path", [_engine_path, _sample_path], ids=["engine path", "sample path"])
@pytest.mark.benchmark(group="sim check: one execute")
def test_bench_sim_execute_with_and_without_checking(
    identity_om: Path, checking: str, path: Callable[..., Callable[[], None]], record: Callable[..., None]
) -> None:
    open_device(sim_acl)
    lane = PyAclLane(sim_acl, identity_om, NBYTES, BATCH)
    step = path(sim_acl, lane)
    step()
    assert sim_acl.get_recent_err_msg() is None, "the timed loop must be a correct program"
    case = f"sim {path.__name__.strip('_').replace('_', ' ')}, batch {BATCH}, per execute"
    record(case, f"check {checking}", 0, step)
    lane.release()
    close_device(sim_acl)
    assert sanitizer.counts().get(sanitizer.ERROR, 0) == 0 and sanitizer.counts().get(sanitizer.LEAK, 0) == 0


@pytest.mark.parametrize("path", [_engine_path, _sample_path], ids=["engine path", "sample path"])
def test_bench_sim_check_overhead_paired(
    identity_om: Path,
    path: Callable[..., Callable[[], None]],
    record_pair: Callable[..., None],
    tmp_path: Path,
) -> None:
    """The on/off ratio from alternating blocks in one process (median, and the interquartile range)."""
    mp = pytest.MonkeyPatch()
    for name, value in (
        (sanitizer.ENV, "0"),
        ("GE_PLUGIN_SIM_TIMING_ONLY", "1"),
        ("GE_PLUGIN_SIM_EXECUTE_LATENCY_MS", "0"),
        ("GE_PLUGIN_SIM_DEVICE_LOCK_DIR", str(tmp_path)),
    ):
        mp.setenv(name, value)
    _state.reset_for_tests()
    try:
        open_device(sim_acl)
        lane = PyAclLane(sim_acl, identity_om, NBYTES, BATCH)
        step = path(sim_acl, lane)
        for _ in range(STEPS * 2):
            step()

        def block(on: bool) -> float:
            sanitizer.enable(on)
            start = time.process_time()
            for _ in range(STEPS):
                step()
            return (time.process_time() - start) / STEPS

        offs, ons = [], []
        for n in range(ROUNDS):
            if n % 2:
                ons.append(block(True))
                offs.append(block(False))
            else:
                offs.append(block(False))
                ons.append(block(True))
        lane.release()
        close_device(sim_acl)
        assert sanitizer.counts().get(sanitizer.ERROR, 0) == 0
    finally:
        _state.reset_for_tests()
        mp.undo()
        device_time.set_profile(device_time.LatencyProfile())
        device_time.set_timing_only(False)
    record_pair(f"sim {path.__name__.strip('_').replace('_', ' ')}, batch {BATCH}, per execute", offs, ons)
