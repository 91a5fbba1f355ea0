"""``ge-plugin tune`` from start to end: the space, the sweep, the choice, the spec, the confirming run, the report.

The chosen configuration is written as the user's spec with the chosen values, then served again from that
very file (as a model of its own) and measured at the chosen concurrency: what the sweep hands back is what
was confirmed, not only what one window of the sweep happened to show.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

import attrs

from ge_plugin.errors import BenchError, ServeError, SpecError, TuneError
from ge_plugin.spec import load_spec
from ge_plugin.spec.model import ModelSpec
from ge_plugin.tune import inputs, report, specedit
from ge_plugin.tune.measure import SIM, Settings, Sweep
from ge_plugin.tune.profile import DeviceProfile, load_profile, seed_profile
from ge_plugin.tune.records import Candidate, Choice, Constraints, TunePoint
from ge_plugin.tune.search import TOLERANCE, Budget, SearchResult, choose, closest, pareto_front, search
from ge_plugin.tune.space import KNOBS, SPEC_KEYS, Config, build_space, show


@attrs.frozen
class TuneOptions:
    spec: Path
    constraints: Constraints
    concurrencies: tuple[int, ...] = (1, 4, 8)
    output: Path = Path("tune-results")
    #: where the chosen spec goes (default: OUTPUT/<spec file name>)
    output_spec: Optional[Path] = None
    profile: Optional[Path] = None
    seed_profile: bool = False
    budget_minutes: float = 30.0
    measurement_ms: int = 2000
    stability_percentage: int = 20
    max_trials: int = 6
    input_data: Optional[Path] = None
    knobs: tuple[str, ...] = KNOBS
    #: knob -> its ladder, replacing the default one
    ladders: Mapping[str, tuple[Any, ...]] = attrs.field(factory=dict)
    confirm: bool = True
    max_passes: int = 4
    #: how much better a step must be to count (and a choice to beat the input spec), as a fraction
    tolerance: float = TOLERANCE

    def __attrs_post_init__(self) -> None:
        """TuneError naming every value that is wrong, in the sweep's words: a record that exists is valid."""
        problems = []
        if not self.concurrencies or any(c < 1 for c in self.concurrencies):
            problems.append(f"concurrencies must be integers >= 1, got {list(self.concurrencies)}")
        if not self.constraints.latency_p99_ms > 0:
            problems.append(f"the p99 latency budget must be > 0 ms, got {self.constraints.latency_p99_ms:g}")
        if self.constraints.min_throughput < 0:
            problems.append(f"the least throughput must be >= 0, got {self.constraints.min_throughput:g}")
        if not self.budget_minutes > 0:
            problems.append(f"the sweep's budget must be > 0 minutes, got {self.budget_minutes:g}")
        if not 0 <= self.tolerance < 1:
            problems.append(f"the tolerance must be between 0 and 100 percent, got {self.tolerance * 100:g}")
        if self.measurement_ms < 100:
            problems.append(f"a measurement window must be >= 100 ms, got {self.measurement_ms}")
        if self.profile is not None and self.seed_profile:
            problems.append("a profile file and the seed's profile exclude each other")
        unknown = [k for k in self.knobs if k not in KNOBS]
        if unknown:
            problems.append(f"knobs {', '.join(unknown)}: unknown; the knobs are {', '.join(KNOBS)}")
        if problems:
            raise TuneError("; ".join(problems))


@attrs.frozen
class Outcome:
    spec: ModelSpec
    result: SearchResult
    choice: Optional[Choice]
    front: list[tuple[Candidate, int]]
    profile: Optional[DeviceProfile]
    label: str
    machine: dict[str, Any]
    options: TuneOptions
    created: str
    written: Optional[Path] = None
    confirmed: Optional[TunePoint] = None
    notes: tuple[str, ...] = ()


def device_kind() -> str:
    from ge_plugin.device import aclapi

    return aclapi.kind()


def run_tune(
    options: TuneOptions, *, say: Callable[[str], None] = print, kind: Optional[str] = None
) -> Outcome:
    report.require_matplotlib()
    spec = load_spec(options.spec)
    text = Path(options.spec).read_text(encoding="utf-8")
    kind = kind or device_kind()
    profile = _profile(options, spec, kind)
    out = Path(options.output)
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    if options.input_data is not None:
        shapes = inputs.read_shapes(options.input_data, spec)
        input_data = options.input_data
    else:
        shapes = inputs.default_shapes(spec)
        input_data = inputs.write_input_data(spec, shapes, work / "input-data.json")
    refused = inputs.refused_shape(spec, shapes)
    if refused:
        raise TuneError(f"{options.spec}: the input spec itself cannot serve the sweep's requests: {refused}")
    space = build_space(spec, knobs=options.knobs, overrides=_ladders(spec, options.ladders))
    label = _label(kind)
    say(
        f"tuning {spec.name} ({label}) for {options.constraints.describe()} at concurrency "
        f"{','.join(map(str, options.concurrencies))}; knobs varied: {', '.join(space.varying) or 'none'} "
        f"({space.size()} configurations in the full product); budget {options.budget_minutes:g} min"
    )
    if profile is not None:
        say(f"device time: {profile.describe()}")
    settings = Settings(
        options.concurrencies, options.measurement_ms, options.stability_percentage, options.max_trials
    )
    load = os.getloadavg()
    budget = Budget(options.budget_minutes * 60, reserve=1 if options.confirm else 0)
    notes: list[str] = []
    with Sweep(
        spec,
        text,
        work=work,
        settings=settings,
        shapes=shapes,
        input_data=input_data,
        profile=profile,
        device_kind=kind,
        say=say,
    ) as sweep:
        result = search(
            space,
            sweep.evaluate,
            options.constraints,
            budget,
            max_passes=options.max_passes,
            tolerance=options.tolerance,
            say=lambda line: say("  " + line),
        )
        server_version = sweep.server_version()
        choice = choose(result.candidates, options.constraints, tolerance=options.tolerance)
        machine = _machine(server_version, load)
        outcome = Outcome(
            spec,
            result,
            choice,
            pareto_front(result.candidates),
            profile,
            label,
            machine,
            options,
            datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat(),
        )
        if choice is None:
            paths = report.write(outcome, out)
            raise TuneError(_impossible(result, options.constraints, paths["markdown"]))
        target = options.output_spec or out / Path(options.spec).name
        written = write_spec(outcome, text, target)
        outcome = attrs.evolve(outcome, written=written)
        if options.confirm:
            say(f"confirming: {written} served as written, at concurrency {choice.point.concurrency}")
            try:
                confirmed: Optional[TunePoint] = confirm(sweep, written, choice.point.concurrency)
            except (TuneError, BenchError, ServeError) as exc:
                confirmed = None
                notes.append(f"the confirming run could not measure the written spec: {exc}")
            outcome = attrs.evolve(outcome, confirmed=confirmed)
            if confirmed is not None and not options.constraints.met(confirmed):
                notes.append(
                    f"the confirming run missed the constraints: p99 {confirmed.p99_ms:.2f} ms, "
                    f"{confirmed.throughput:.1f} infer/s ({options.constraints.describe()})"
                )
            write_spec(outcome, text, target)
    outcome = attrs.evolve(outcome, notes=tuple(notes))
    paths = report.write(outcome, out)
    say(report.summary(outcome))
    say("written: " + ", ".join(str(p) for p in (written, *paths.values())))
    return outcome


def confirm(sweep: Sweep, path: Path, concurrency: int) -> TunePoint:
    """The written spec, loaded from its file as a user would, served and measured once more."""
    try:
        spec = load_spec(path)
    except SpecError as exc:  # never: write_spec checked it; kept loud rather than assumed
        raise TuneError(f"{path}: the written spec does not validate: {exc}") from None
    points, _ = sweep.serve(spec, f"{spec.name}__confirm", [concurrency])
    return points[0]


def write_spec(outcome: Outcome, text: str, target: Path) -> Path:
    """The input spec with the chosen values and a header saying what was measured; validated on the way."""
    assert outcome.choice is not None
    choice = outcome.choice
    spec = outcome.spec
    edits = specedit.edits_for(spec, choice.candidate.config) + specedit.relocation(spec, target)
    body = specedit.apply(text, edits)
    lines = header_lines(outcome)
    written = specedit.header(body, lines)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(written, encoding="utf-8")
    try:
        load_spec(target)
    except SpecError as exc:
        raise TuneError(f"{target}: the tuned spec does not validate (please report it): {exc}") from None
    return target


def header_lines(outcome: Outcome) -> list[str]:
    assert outcome.choice is not None
    c, p = outcome.choice.candidate, outcome.choice.point
    o = outcome.options
    m = outcome.machine
    changed = [
        f"{SPEC_KEYS[k]}: {show(outcome.result.candidates[0].config.get(k))} -> {show(c.config.get(k))}"
        for k in KNOBS
        if c.config.get(k) != outcome.result.candidates[0].config.get(k)
    ]
    lines = [
        f"Tuned by `ge-plugin tune` on {outcome.created} for {o.constraints.describe()}.",
        f"Chosen: candidate #{c.id} of {len(outcome.result.candidates)}, measured by perf_analyzer (gRPC, "
        f"{o.measurement_ms} ms windows) through tritonserver {m.get('tritonserver', '')}:",
        f"  p99 {p.p99_ms:.2f} ms, p50 {p.p50_ms:.2f} ms, {p.throughput:.1f} infer/s at concurrency {p.concurrency}"
        + (f", {p.rows_per_execute:.2f} rows per execute" if p.rows_per_execute else ""),
    ]
    if outcome.confirmed is not None:
        q = outcome.confirmed
        verdict = "meets" if o.constraints.met(q) else "MISSES"
        lines.append(
            f"  confirmed from this file: p99 {q.p99_ms:.2f} ms, {q.throughput:.1f} infer/s ({verdict} the constraints)"
        )
    lines.append(f"Changed: {'; '.join(changed) if changed else 'nothing (the input spec was the best)'}.")
    lines.append(f"Machine: {outcome.label}; {m.get('cpu', '')}.")
    if outcome.profile is not None:
        lines.append(
            "Absolute times are the CPU simulator's, with the device time per gear from "
            f"{outcome.profile.where}; the ranking carries over to a device that profile was measured on."
        )
        if c.device_note:
            lines.append(f"Interpolated device time: {c.device_note}.")
    return lines


def _ladders(spec: ModelSpec, given: Mapping[str, tuple[Any, ...]]) -> dict[str, tuple[Any, ...]]:
    """The ladders as the spec holds them: a one-value dims gear ("16") stands for every -1 dim."""
    ladders = dict(given)
    width = len(spec.dynamic_dims)
    if "dims_gears" in ladders:
        sets = []
        for gears in ladders["dims_gears"]:
            full = tuple(g * width if len(g) == 1 else g for g in gears)
            bad = [g for g in full if len(g) != width]
            if bad:
                raise TuneError(
                    f"--dims-gears: {'x'.join(map(str, bad[0]))} has {len(bad[0])} values; {spec.name} has "
                    f"{width} -1 dims (one value for all of them, or {width} joined by x)"
                )
            sets.append(full)
        ladders["dims_gears"] = tuple(sets)
    if "image_sizes" in ladders:
        bad_sizes = [s for sizes in ladders["image_sizes"] for s in sizes if len(s) != 2]
        if bad_sizes:
            raise TuneError(f"--image-sizes: {'x'.join(map(str, bad_sizes[0]))} is not HxW")
    return ladders


def _profile(options: TuneOptions, spec: ModelSpec, kind: str) -> Optional[DeviceProfile]:
    if options.profile is not None:
        return load_profile(options.profile, spec)
    if options.seed_profile:
        return seed_profile(spec)
    if kind == SIM:
        raise TuneError(
            "the simulator needs each gear's device time: --profile FILE (measured with ge-plugin tune-profile "
            "on an Ascend host, or written from msprof / ais_bench results) or --seed-profile (the seed's "
            "published LLaMA-7B times)"
        )
    return None


def _label(kind: str) -> str:
    from ge_plugin.measure import machine

    if kind == SIM:
        return machine.label(machine.cores())
    return f"Ascend NPU (real device), host with {machine.cores()} cores"


def _machine(server_version: str, load: Sequence[float]) -> dict[str, Any]:
    from ge_plugin.measure import machine, perf

    try:
        perf_version = perf.version()
    except Exception:  # the sweep ran perf_analyzer; its --version is only for the record
        perf_version = ""
    return machine.describe(
        tritonserver=server_version,
        perf_analyzer=perf_version,
        load_average=tuple(load),  # type: ignore[arg-type]
    )


def _impossible(result: SearchResult, constraints: Constraints, report_path: Path) -> str:
    near = closest(result.candidates)
    if near is None:
        failed = [c for c in result.candidates if not c.measured]
        why = f": {failed[0].status}: {failed[0].reason}" if failed else ""
        return f"nothing could be measured{why} (report: {report_path})"
    c, p = near.candidate, near.point
    most = max(
        (q.throughput for cand in result.candidates if cand.measured for q in cand.points), default=0.0
    )
    return (
        f"no configuration met {constraints.describe()} in {len(result.candidates)} candidates: the best p99 "
        f"found was {p.p99_ms:.2f} ms ({p.throughput:.1f} infer/s, candidate #{c.id} at concurrency "
        f"{p.concurrency}: {c.config.describe()}); the most throughput was {most:.1f} infer/s. Relax the "
        f"constraint, add lower concurrencies, or widen the knobs (report: {report_path})"
    )


__all__ = ["Config", "TuneOptions", "run_tune"]
