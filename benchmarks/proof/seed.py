"""The seed's published table (1× Ascend 910, LLaMA-7B) and the simulated device that replays it.

The seed publishes direct AscendCL latencies of 78 / 145 / 220 ms at batch 1 / 4 / 8 and at most 36 req/s,
and for Triton with CANN's GE backend 82 / 152 / 228 ms and 35 req/s. The bench replays the direct times as
the simulator's device time per batch gear (timing-only: no computation, outputs zero-filled), so the tiny
LLaMA's inputs and outputs (logits [B,16,32000] fp32) go through the real serving stack while the "device"
runs beside the CPU as an NPU does. What the stack adds to those times is ours to measure.
"""

from __future__ import annotations

from collections.abc import Iterable

from ge_plugin.tune.profile import SEED_DEVICE, SEED_DEVICE_MS

#: the seed's direct AscendCL p50 (ms) per batch: what the simulated device takes per execute (the product's
#: demo device, ``ge-plugin tune --seed-profile``, is the same table: one home, there)
DIRECT_MS = SEED_DEVICE_MS
#: the seed's Triton + CANN GE backend p50 (ms) per batch
TRITON_MS = {1: 82.0, 4: 152.0, 8: 228.0}
#: the seed's most requests (rows) per second: direct, and through Triton
DIRECT_MAX_RPS = 36.0
TRITON_MAX_RPS = 35.0
BATCHES = tuple(DIRECT_MS)
SOURCE = SEED_DEVICE


def latency_table(seq_gears: Iterable[int]) -> dict[str, float]:
    """The simulator's ``execute_latency_ms`` table: every (batch, sequence) gear of the LLaMA takes the seed's
    time for its batch, whatever its sequence length (the seed gives one time per batch)."""
    return {f"{batch},{seq}": ms for batch, ms in DIRECT_MS.items() for seq in seq_gears}


def sim_section(*, latency: dict[str, float] | None = None) -> dict:
    """The ``ge_plugin_sim`` section of a model's acl.json: timing-only, with this device time per gear."""
    section: dict = {"timing_only": True}
    if latency:
        section["execute_latency_ms"] = dict(latency)
    return {"ge_plugin_sim": section}
