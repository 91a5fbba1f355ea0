"""The engine's microbenchmarks on the simulator: P2 (the engine's execute against a hand-written pyACL loop
doing the same copies, execute and synchronize) and the engine's own host time per execute (the simulator's
calls stubbed out), with a summary of both at the end of ``make bench-micro``.

The models are the bench's own (``benchmarks.proof.repository``: the identity and the served tiny LLaMA, sim
OMs built with ATC's flags, timing-only, no device time), built once per session. The simulated device's
lock is this session's own, so no other simulator on the host holds it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: (case) -> a dict of what the summary prints for it
ENGINE_RESULTS = pytest.StashKey[dict]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[ENGINE_RESULTS] = {}


@pytest.fixture(scope="session")
def bench_repository(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The bench's model repository, built once; pyACL is finalised after the last benchmark."""
    locks = tmp_path_factory.mktemp("device-locks")
    previous = {name: os.environ.get(name) for name in ("GE_PLUGIN_SIM_DEVICE_LOCK_DIR", "GE_PLUGIN_DEVICE")}
    os.environ["GE_PLUGIN_SIM_DEVICE_LOCK_DIR"] = str(locks)
    os.environ.setdefault("GE_PLUGIN_DEVICE", "sim")
    from benchmarks.proof.repository import build_repository
    from ge_plugin import device

    repo = build_repository(Path(tmp_path_factory.mktemp("bench")) / "work")
    yield repo
    device.finalize()
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def record_engine(request: pytest.FixtureRequest):
    """``record_engine(case, **values)``: keeps a case's figures for the summary."""

    def record(case: str, **values: Any) -> None:
        request.config.stash[ENGINE_RESULTS][case] = values

    return record


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    results = config.stash.get(ENGINE_RESULTS, {})
    if not results:
        return
    terminalreporter.section("ge-plugin engine on the CPU simulator (timing-only), medians")
    p2 = results.get("P2")
    if p2:
        verdict = (
            "met"
            if p2["high"] <= p2["target"]
            else ("missed" if p2["low"] > p2["target"] else "within noise")
        )
        terminalreporter.write_line(
            f"P2 identity, batch 1: engine execute {_us(p2['engine'])}, hand-written pyACL loop {_us(p2['loop'])}: "
            f"{p2['ratio']:.3f}x (95 % interval {p2['low']:.3f}-{p2['high']:.3f}; {p2['blocks']} blocks of "
            f"{p2['calls']} calls each, alternating), target <= {p2['target']:g}x: {verdict}"
        )
    for case, values in results.items():
        if case == "P2":
            continue
        terminalreporter.write_line(
            f"{case}: {_us(values['median'])} per execute (min {_us(values['min'])}, {values['calls']} calls)"
        )
