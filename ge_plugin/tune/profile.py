"""Device-time profiles: how long one execute of each gear keeps the device busy, for the simulator to replay.

On an Ascend host a sweep measures the card itself. Here the simulated device takes, per execute, the time a
profile gives for the execute's gear (timing-only: nothing is computed on the host's cores), so the sweep
ranks configurations as that device would. A profile file is JSON:

```json
{"model": "llama_model", "device": "Ascend910B3", "source": "ge-plugin tune profile",
 "execute_latency_ms": {"1,16": 78.0, "4,16": 145.0, "8,16": 220.0}}
```

``execute_latency_ms`` is the simulator's own form (docs/simulator.md, "Device time"): gear labels as
``executes_by_gear`` names them, and optionally ``base_ms`` / ``per_row_ms`` for gears the table does not
list. The bare table alone (``{"1": 78, "4": 145}``) is accepted too. Tuning changes the gears, so a
candidate may have gears the profile never measured: those take the profile's own ``base_ms + per_row_ms ·
rows`` when it gives one, else a line ``base + k · units`` fitted to the measured gears (units: the elements of
the first input at that gear), and the report says which gears were interpolated and how.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ge_plugin.errors import TuneError
from ge_plugin.spec.model import ModelSpec
from ge_plugin.tune.gears import GearInfo, parse_label, spec_gears

TABLE_KEY = "execute_latency_ms"
#: keys a profile file may have besides the table; informative, shown in reports
INFO_KEYS = ("model", "device", "source", "measured", "created")
FORMULA_KEYS = ("base_ms", "per_row_ms")


@attrs.frozen
class Line:
    """``base_ms + slope_ms · x``: x is rows (the simulator's formula) or units (a fit)."""

    base_ms: float
    slope_ms: float
    over: str  #: "rows" or "units"

    def at(self, gear: GearInfo) -> float:
        return self.base_ms + self.slope_ms * (gear.rows if self.over == "rows" else gear.units)

    def describe(self) -> str:
        return f"{self.base_ms:.4g} + {self.slope_ms:.4g}·{self.over} ms"


@attrs.frozen
class DeviceTimes:
    """One candidate's device time per gear label, and how each one was obtained."""

    table: dict[str, float]
    #: labels not in the profile's table, with the line that gave their time
    interpolated: tuple[str, ...] = ()
    line: Line | None = None

    def note(self) -> str:
        if not self.interpolated or self.line is None:
            return ""
        return f"gears {', '.join(self.interpolated)} not in the profile: {self.line.describe()}"


@attrs.frozen
class DeviceProfile:
    """A profile's measured table, its own fallback formula if it gives one, and where it came from."""

    by_gear: dict[str, float]
    formula: Line | None = None
    info: dict[str, Any] = attrs.field(factory=dict)
    where: str = "profile"

    def describe(self) -> str:
        parts = [f"{label}={ms:g}" for label, ms in self.by_gear.items()]
        if self.formula is not None:
            parts.append(self.formula.describe())
        source = ", ".join(f"{k}: {self.info[k]}" for k in ("device", "source") if k in self.info)
        return f"{self.where} ({'; '.join(parts)})" + (f" [{source}]" if source else "")

    def times_for(self, spec: ModelSpec) -> DeviceTimes:
        """Every gear of ``spec`` with a time: TuneError when a gear is neither measured nor interpolable."""
        gears = spec_gears(spec)
        missing = [g for g in gears if g.label not in self.by_gear]
        table = {g.label: self.by_gear[g.label] for g in gears if g.label in self.by_gear}
        if not missing:
            return DeviceTimes(table)
        line = self.formula or fit_line(self._measured(spec), where=self.where)
        for g in missing:
            table[g.label] = round(max(0.0, line.at(g)), 6)
        return DeviceTimes({g.label: table[g.label] for g in gears}, tuple(g.label for g in missing), line)

    def _measured(self, spec: ModelSpec) -> list[tuple[float, float]]:
        points = []
        for label, ms in self.by_gear.items():
            try:
                points.append((float(parse_label(spec, label).units), ms))
            except ValueError:
                continue  # a gear of another kind of model: load() refused those for the input spec
        return points


def fit_line(points: Sequence[tuple[float, float]], *, where: str) -> Line:
    """Least squares ``base + k·units`` through the measured gears, with base and k kept >= 0 (a device
    does not get faster on more work, nor take negative time on none)."""
    distinct = {x for x, _ in points}
    if len(distinct) < 2:
        raise TuneError(
            f"{where}: the sweep has gears the profile does not list, and {len(distinct)} measured gear size"
            f"{'' if len(distinct) == 1 else 's'} cannot be interpolated; measure at least two gears "
            "(ge-plugin tune profile) or give base_ms and per_row_ms"
        )
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    k = sum((x - mx) * (y - my) for x, y in points) / sxx
    base = my - k * mx
    if k < 0:
        k, base = 0.0, my
    elif base < 0:
        k, base = sum(x * y for x, y in points) / sum(x * x for x, _ in points), 0.0
    return Line(base, k, "units")


def load_profile(path: str | Path, spec: ModelSpec) -> DeviceProfile:
    """Read and check a profile file against the model it is for: TuneError listing every bad entry."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TuneError(f"{path}: cannot read the profile: {exc}") from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except ValueError as exc:
        raise TuneError(f"{path}: not a JSON profile: {exc}") from None
    return parse_profile(data, spec, where=str(path))


def parse_profile(data: Any, spec: ModelSpec, *, where: str) -> DeviceProfile:
    if not isinstance(data, Mapping):
        raise TuneError(f"{where}: a profile is a JSON object, not {type(data).__name__}")
    info: dict[str, Any] = {}
    if TABLE_KEY in data:
        unknown = [k for k in data if k != TABLE_KEY and k not in INFO_KEYS]
        if unknown:
            raise TuneError(
                f"{where}: unknown key {', '.join(map(repr, unknown))}; a profile has {TABLE_KEY!r} and "
                f"optionally {', '.join(INFO_KEYS)}"
            )
        info = {k: data[k] for k in INFO_KEYS if k in data}
        table = data[TABLE_KEY]
        if not isinstance(table, Mapping):
            raise TuneError(f"{where}: {TABLE_KEY} is a JSON object of gear label -> ms")
        prefix = f"{where}: {TABLE_KEY}"
    else:
        table, prefix = data, where
    problems: list[str] = []
    by_gear: dict[str, float] = {}
    formula: dict[str, float] = {}
    for key, value in table.items():
        ms = _ms(value)
        if ms is None:
            problems.append(f"{key!r}: {value!r} is not a time in ms (a finite number >= 0)")
            continue
        if key in FORMULA_KEYS:
            formula[key] = ms
            continue
        try:
            label = parse_label(spec, str(key)).label
        except ValueError as exc:
            problems.append(f"{exc} ({spec.name})")
            continue
        if label in by_gear:
            problems.append(f"gear {label} is listed twice")
        by_gear[label] = ms
    if not by_gear and not formula and not problems:
        problems.append("no gear has a time")
    if problems:
        raise TuneError(f"{prefix}: " + "; ".join(problems))
    line = Line(formula.get("base_ms", 0.0), formula.get("per_row_ms", 0.0), "rows") if formula else None
    return DeviceProfile(by_gear, line, info, where)


#: The demo's device (``--seed-profile``): the seed's published direct AscendCL p50 per batch, 1× Ascend 910,
#: LLaMA-7B. A product default, for trying tune without an Ascend host; the rest of the seed's table (its
#: Triton times and throughputs, what the project's targets compare with) is the proof's, in benchmarks/.
SEED_DEVICE_MS = {1: 78.0, 4: 145.0, 8: 220.0}
SEED_DEVICE = "the seed's table (1× Ascend 910, LLaMA-7B)"


def seed_profile(spec: ModelSpec) -> DeviceProfile:
    """The seed's published direct AscendCL times (1× Ascend 910, LLaMA-7B: 78 / 145 / 220 ms at batch 1 / 4 /
    8) as a profile for ``spec``: every gear with one of those batches takes the seed's time whatever its
    other dims (the seed gives one time per batch), others the line through those three points by rows."""
    if spec.batching is None:
        raise TuneError(f"{spec.name}: the seed's table is by batch size; this model does not batch")
    table = {g.label: SEED_DEVICE_MS[g.rows] for g in spec_gears(spec) if g.rows in SEED_DEVICE_MS}
    fitted = fit_line([(float(b), ms) for b, ms in SEED_DEVICE_MS.items()], where="seed")
    return DeviceProfile(
        table,
        Line(fitted.base_ms, fitted.slope_ms, "rows"),
        {"device": "Ascend 910 (published)", "source": SEED_DEVICE},
        "the seed's table",
    )


def profile_json(
    table: Mapping[str, float], *, model: str, device: str, source: str, measured: Any = None
) -> dict[str, Any]:
    """What ``ge-plugin tune profile`` writes and ``load_profile`` reads."""
    data: dict[str, Any] = {"model": model, "device": device, "source": source, TABLE_KEY: dict(table)}
    if measured is not None:
        data["measured"] = measured
    return data


def _ms(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    ms = float(value)
    return ms if math.isfinite(ms) and ms >= 0 else None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"key {key!r} appears twice")
        seen[key] = value
    return seen


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")
