"""A bench run as JSON with stable keys, and back.

The JSON holds every row, the machine, the options and each target with its threshold, value and verdict,
so runs can be compared by a script; ``from_json`` reads it back and names the first missing key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from benchmarks.proof import seed
from benchmarks.proof.analysis import replica_rows, stub_rows
from benchmarks.proof.result import Result, Target
from ge_plugin.errors import BenchError
from ge_plugin.measure.direct import direct_row
from ge_plugin.measure.records import (
    Allocations,
    BenchModel,
    DirectRow,
    Measurement,
    Pass,
    PerfRow,
    StubPhases,
    Window,
)

SCHEMA = "ge-plugin-bench/3"


MARKDOWN = "report.md"


JSON = "report.json"


PLOT = "latency_throughput.png"


def to_json(result: Result) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "label": result.label,
        "created": result.created,
        "machine": result.machine,
        "options": result.options,
        "models": [attrs.asdict(m) for m in result.models],
        "triton": [_measurement_json(m) for m in result.triton],
        "direct": [{**attrs.asdict(r), "host_us": r.host_us} for r in result.direct],
        "allocations": [{**attrs.asdict(a), "per_request": a.per_request} for a in result.allocations],
        "targets": [{**attrs.asdict(t), "passed": t.passed, "verdict": t.verdict()} for t in result.targets],
        "seed": seed_json(result),
        "inside_stub": stub_rows(result),
        "notes": list(result.notes),
        "files": {"markdown": MARKDOWN, "plot": PLOT},
    }


def _measurement_json(m: Measurement) -> dict[str, Any]:
    return {
        "model": m.model,
        "batch": m.batch,
        "stable": m.stable,
        **attrs.asdict(m.server),
        **attrs.asdict(m.row),
        "windows": [attrs.asdict(w) for w in m.windows],
        "spans": [list(span) for span in m.spans],
        "stub": attrs.asdict(m.stub) if m.stub is not None else None,
        **({"failure": m.failure} if m.failure is not None else {}),
    }


def seed_json(result: Result) -> dict[str, Any]:
    """The seed's rows and ours, side by side: p50 ms per batch and the most rows per second."""
    ours = replica_rows(result)
    return {
        "source": seed.SOURCE,
        "seed": {
            "direct_ms": {str(b): ms for b, ms in seed.DIRECT_MS.items()},
            "triton_ms": {str(b): ms for b, ms in seed.TRITON_MS.items()},
            "direct_max_rows_per_s": seed.DIRECT_MAX_RPS,
            "triton_max_rows_per_s": seed.TRITON_MAX_RPS,
        },
        "ours": ours,
    }


def from_json(data: Mapping[str, Any], *, source: str = "report.json") -> Result:
    """The Result a ``to_json`` dict holds; BenchError names the first key that is missing or wrong."""
    if data.get("schema") != SCHEMA:
        raise BenchError(f"{source}: schema is {data.get('schema')!r}, expected {SCHEMA!r}")

    def each(key: str, build) -> tuple:
        try:
            return tuple(build(item) for item in data[key])
        except KeyError as exc:
            raise BenchError(f"{source}: $.{key}: missing key {exc}") from None
        except (TypeError, ValueError) as exc:
            raise BenchError(f"{source}: $.{key}: {exc}") from None

    def fields(cls: type, item: Mapping[str, Any]) -> dict[str, Any]:
        return {f.name: item[f.name] for f in attrs.fields(cls)}

    try:
        head = {key: data[key] for key in ("label", "created", "machine", "options")}
    except KeyError as exc:
        raise BenchError(f"{source}: missing key {exc}") from None
    return Result(
        **head,
        models=each("models", lambda m: BenchModel(**fields(BenchModel, m))),
        triton=each(
            "triton",
            lambda m: Measurement(
                model=m["model"],
                row=PerfRow(**fields(PerfRow, m)),
                stable=m["stable"],
                batch=m["batch"],
                server=Window(**fields(Window, m)),
                windows=tuple(Pass(**w) for w in m["windows"]),
                spans=tuple((float(a), float(b)) for a, b in m["spans"]),
                stub=StubPhases(**m["stub"]) if m["stub"] is not None else None,
                failure=m.get("failure"),
            ),
        ),
        direct=each("direct", lambda r: direct_row(fields(DirectRow, r))),
        allocations=each("allocations", lambda a: Allocations(**fields(Allocations, a))),
        targets=each("targets", lambda t: Target(**fields(Target, t))),
        notes=tuple(data.get("notes", ())),
    )


def json_text(result: Result) -> str:
    """report.json's text."""
    return json.dumps(to_json(result), indent=2) + "\n"
