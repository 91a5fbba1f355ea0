"""Measuring a device-time profile: every gear of a model timed by the engine alone, no Triton.

This is the bench's direct engine (``ge_plugin.measure.direct``) pointed at gears instead of batch sizes: the
spec is rendered, its OM built (a sim OM here, ATC's on an Ascend host, or the one given), and for each gear
the engine runs a batch that lands exactly on it, after a warm-up, for ``seconds``. The engine's own clock
gives the time each execute spent on the stream (copies in, the execute, copies out, until the stream was
synchronized): on an Ascend host that is the card's time for the gear, which is what the simulator replays.
On the simulator it measures the simulator (onnxruntime on the host's cores), which is useful only to try
the command.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import numpy.typing as npt

from ge_plugin.errors import TuneError
from ge_plugin.measure.direct import summarize, time_calls
from ge_plugin.render import write_repository
from ge_plugin.spec.model import ModelSpec
from ge_plugin.tune.profile import profile_json

if TYPE_CHECKING:
    from ge_plugin.engine.gear_table import Gear

WARMUP_CALLS = 3


def _request(spec: ModelSpec, gear: Gear, dtypes: dict[str, np.dtype[Any]]) -> dict[str, npt.NDArray[Any]]:
    """One request that, ``gear.rows`` times over, runs exactly on ``gear``."""
    request = {}
    for decl, dims in zip(spec.inputs, gear.input_dims):
        shape = (1, *dims[1:]) if spec.batching is not None else tuple(dims)
        low = 0
        if decl.range is not None and not decl.range[0] <= 0 <= decl.range[1]:
            low = decl.range[0]
        request[decl.name] = np.full(shape, low, dtype=dtypes[decl.name])
    return request


def measure_profile(
    spec: ModelSpec,
    *,
    work: Path,
    seconds: float = 1.0,
    min_iterations: int = 10,
    om: Optional[Path] = None,
    device_kind: str,
    say: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """The profile JSON of ``spec`` on this host's device."""
    from ge_plugin import device
    from ge_plugin.engine import Engine, Lifetime, read_config_pbtxt
    from ge_plugin.tune.measure import compile_om

    repo = Path(work) / "repository"
    shutil.rmtree(repo, ignore_errors=True)
    write_repository([spec], repo)
    version = repo / spec.name / "1"
    target = version / spec.om_filename
    if om is not None:
        shutil.copyfile(om, target)
    else:
        compile_om(spec, target, device_kind=device_kind)
    config = read_config_pbtxt(repo / spec.name / "config.pbtxt")
    table: dict[str, float] = {}
    measured: dict[str, Any] = {}
    try:
        engine = Engine.from_model_config(config, version_dir=version)
        try:
            dtypes = {io.name: np.dtype(io.dtype.numpy) for io in engine.config.inputs}
            for gear in sorted(engine.gears.gears, key=lambda g: g.index):
                requests = [_request(spec, gear, dtypes)] * (gear.rows if spec.batching is not None else 1)
                # the profile's label of the gear, as the simulator counts it and ``tune`` reads it back
                label = engine.gears.gear_set.label(gear.index)

                def call(requests: list[dict[str, npt.NDArray[Any]]] = requests, label: str = label) -> None:
                    for outcome in engine.execute(requests, lifetime=Lifetime.UNTIL_NEXT_CALL):
                        if not isinstance(outcome, dict):
                            raise TuneError(f"gear {label}: the engine refused the request: {outcome}")

                for _ in range(WARMUP_CALLS):
                    call()
                executes, stream_us = engine.stats.executes, engine.stats.execute_us_sum
                latencies = time_calls(call, seconds=seconds, min_iterations=min_iterations)
                done = engine.stats.executes - executes
                if done != len(latencies):
                    raise TuneError(
                        f"gear {label}: {len(latencies)} calls made {done} executes; the batch did not "
                        "land on one gear"
                    )
                stream_ms = (engine.stats.execute_us_sum - stream_us) / done / 1e3
                row = summarize(spec.name, gear.rows, latencies, stream_ms)
                table[label] = round(stream_ms, 4)
                measured[label] = {
                    "calls": row.iterations,
                    "stream_ms": round(stream_ms, 4),
                    "call_p50_ms": round(row.p50_ms, 4),
                    "call_p99_ms": round(row.p99_ms, 4),
                }
                say(f"gear {label}: {stream_ms:.3f} ms on the stream per execute ({row.iterations} calls)")
        finally:
            engine.close()
        kind = device.kind()
    finally:
        device.finalize()
    name = (
        "CPU simulator (onnxruntime on the host: not NPU time)" if kind == "sim" else spec.model.soc_version
    )
    return profile_json(
        table,
        model=spec.name,
        device=name,
        source="ge-plugin tune-profile: the engine's stream time per execute, mean over the timed calls",
        measured=measured,
    )
