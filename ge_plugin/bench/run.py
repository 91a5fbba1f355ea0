"""``ge-plugin bench SPEC...``: each spec served as ``ge-plugin tune`` serves a candidate, then its engine alone.

Per spec: rendered and compiled (a sim OM here, ATC's on an Ascend host), loaded into one tritonserver,
measured by perf_analyzer at each concurrency, unloaded; when every spec is done and the server stopped, the
same rendered models are timed in-process without Triton (``ge_plugin.measure.direct``), so nothing competes
with them for the cores. On the simulator each gear takes the device time of a profile (``--profile``):
every figure then says "CPU simulator". What the table shows is what Triton and the ``ge`` backend add to the
engine, on this host, for these models.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from ge_plugin.errors import BenchError
from ge_plugin.measure import direct
from ge_plugin.measure.records import DirectRow
from ge_plugin.spec import load_spec
from ge_plugin.spec.model import ModelSpec
from ge_plugin.tune import inputs
from ge_plugin.tune.measure import SIM, Settings, Sweep
from ge_plugin.tune.profile import load_profile
from ge_plugin.tune.records import TunePoint


def _positive(values: Sequence[int]) -> bool:
    return bool(values) and all(v >= 1 for v in values)


@attrs.frozen
class BenchOptions:
    """Everything ``ge-plugin bench`` is asked; a record that exists is a valid one (BenchError otherwise)."""

    specs: tuple[Path, ...]
    output: Path = Path("bench-results")
    concurrencies: tuple[int, ...] = (1, 4, 8)
    #: the device time per gear, for the simulator (JSON, docs/tune.md); None on an Ascend host
    profile: Path | None = None
    measurement_ms: int = 2000
    direct_seconds: float = 2.0

    def __attrs_post_init__(self) -> None:
        problems = []
        if not self.specs:
            problems.append("no spec to measure")
        if not _positive(self.concurrencies):
            problems.append(f"concurrencies must be integers >= 1, got {list(self.concurrencies)}")
        if self.measurement_ms < 100:
            problems.append(f"a measurement window must be >= 100 ms, got {self.measurement_ms}")
        if self.direct_seconds <= 0:
            problems.append(f"the direct engine's time per model must be > 0 s, got {self.direct_seconds:g}")
        if problems:
            raise BenchError("; ".join(problems))


@attrs.frozen
class SpecRows:
    """One spec's figures: through Triton per concurrency, the direct engine per batch gear."""

    name: str
    triton: tuple[TunePoint, ...]
    direct: tuple[DirectRow, ...]
    device_note: str = ""


def run_bench(options: BenchOptions, *, say: Callable[[str], None] = print) -> list[SpecRows]:
    """Measure every spec of ``options``; prints and returns their table's rows."""
    from ge_plugin.device import aclapi

    kind = aclapi.kind()
    work = Path(options.output).resolve() / "work"
    loaded: list[tuple[ModelSpec, str, Path]] = []
    for path in options.specs:
        spec = load_spec(path)
        data = inputs.write_input_data(
            spec, inputs.default_shapes(spec), work / "inputs" / f"{spec.name}.json"
        )
        loaded.append((spec, path.read_text(), data))
    settings = Settings(concurrencies=options.concurrencies, measurement_ms=options.measurement_ms)
    served: dict[str, tuple[list[TunePoint], str]] = {}
    for spec, text, data in loaded:
        profile = load_profile(options.profile, spec) if options.profile is not None else None
        say(f"{spec.name}: served through Triton at concurrency {', '.join(map(str, options.concurrencies))}")
        sweep = Sweep(
            spec,
            text,
            work=work / spec.name,
            settings=settings,
            shapes=inputs.default_shapes(spec),
            input_data=data,
            profile=profile,
            device_kind=kind,
        )
        with sweep:
            served[spec.name] = sweep.serve(spec, spec.name, options.concurrencies)
    rows = []
    for spec, _, data in loaded:
        say(f"{spec.name}: the direct engine, no Triton")
        direct_rows, _ = direct.run_child(
            work / spec.name / "repository",
            {spec.name: data},
            seconds=options.direct_seconds,
            output=work / spec.name / "direct.json",
            environment={"GE_PLUGIN_SIM_DEVICE_LOCK_DIR": str(work / spec.name / "device-locks")},
        )
        points, note = served[spec.name]
        rows.append(SpecRows(spec.name, tuple(points), tuple(direct_rows), note))
    say(table(rows, simulated=kind == SIM))
    return rows


def table(rows: Sequence[SpecRows], *, simulated: bool) -> str:
    """The markdown table ``ge-plugin bench`` prints: the direct engine's rows, then Triton's, per spec."""
    where = "CPU simulator (timing-only)" if simulated else "Ascend device"
    lines = [
        f"## ge-plugin bench: {where}",
        "",
        "| model | path | batch | c | rows/s | p50 ms | p99 ms |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for spec in rows:
        for d in spec.direct:
            lines.append(
                f"| {spec.name} | direct engine | {d.batch} | 1 | {d.throughput:.1f} | {d.p50_ms:.2f} "
                f"| {d.p99_ms:.2f} |"
            )
        for p in spec.triton:
            star = "" if p.stable else " (unstable)"
            lines.append(
                f"| {spec.name} | Triton, gRPC | 1 | {p.concurrency} | {p.throughput:.1f}{star} "
                f"| {p.p50_ms:.2f} | {p.p99_ms:.2f} |"
            )
        if spec.device_note:
            lines.append(f"\n{spec.name}: {spec.device_note}")
    return "\n".join(lines)
