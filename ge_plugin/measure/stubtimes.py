"""Inside the stub, per point: the stubs' own timers (``ge_plugin.backend.timing``) matched to the points.

Every model instance of the bench's server times each ``execute`` (reading the requests, its own work,
building the responses) and writes the samples when it unloads. A sample belongs to the point whose
perf_analyzer runs were under way when it started (their wall-clock spans, recorded as they ran); the
medians of a point's samples are its ``StubPhases``: reading and responding per request, the work per
execute, and for ge the part of the work on the simulated device's stream. A ge model that answers from its
engine's completion thread (``streams_per_instance`` > 1) has no responding inside ``execute``, and its work
is the submit: validating, staging and launching.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ge_plugin.measure.records import Measurement, StubPhases


def phases(samples: Sequence[Mapping[str, float]]) -> StubPhases | None:
    """The medians of one point's samples; None without any."""
    if not samples:
        return None
    streams = [s["stream_us"] for s in samples if not math.isnan(s["stream_us"])]
    responds = [s["respond_us"] / s["requests"] for s in samples if not math.isnan(s["respond_us"])]
    return StubPhases(
        executes=len(samples),
        requests_per_execute=statistics.fmean(s["requests"] for s in samples),
        read_us=statistics.median(s["read_us"] / s["requests"] for s in samples),
        work_us=statistics.median(s["work_us"] for s in samples),
        respond_us=statistics.median(responds) if responds else None,
        stream_us=statistics.median(streams) if streams else None,
    )


def attach(measurements: Sequence[Measurement], files: Sequence[Mapping[str, Any]]) -> list[Measurement]:
    """``measurements`` with each one's StubPhases, from the timing files of its model's stubs."""
    by_model: dict[str, list[Mapping[str, float]]] = {}
    for found in files:
        by_model.setdefault(found["model"], []).extend(found["samples"])
    attached = []
    for m in measurements:
        samples = [
            s
            for s in by_model.get(m.model, ())
            if s["requests"] > 0 and any(start <= s["started"] <= end for start, end in m.spans)
        ]
        attached.append(attrs.evolve(m, stub=phases(samples)))
    return attached
