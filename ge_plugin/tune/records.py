"""What a sweep measured and decided, as plain records (the report and the JSON file read these)."""

from __future__ import annotations

import attrs

from ge_plugin.tune.space import Config

#: candidate statuses
MEASURED = "measured"
REFUSED = "refused"  #: the spec's rules (or ATC's) refuse the configuration
UNSERVABLE = "unservable"  #: the requests of the sweep would be refused (a shape no gear takes)
FAILED = "failed"  #: it did not load or could not be measured


@attrs.frozen
class Constraints:
    latency_p99_ms: float
    min_throughput: float = 0.0

    def met(self, point: TunePoint) -> bool:
        return point.p99_ms <= self.latency_p99_ms and point.throughput >= self.min_throughput

    def describe(self) -> str:
        text = f"p99 <= {self.latency_p99_ms:g} ms"
        return text + (f", throughput >= {self.min_throughput:g} infer/s" if self.min_throughput else "")


@attrs.frozen
class TunePoint:
    """One concurrency of one candidate, as perf_analyzer measured it."""

    concurrency: int
    throughput: float  #: inferences (rows) per second
    p50_ms: float
    p99_ms: float
    stable: bool = True
    #: rows per execute over the point, from Triton's statistics (None where not read)
    rows_per_execute: float | None = None


@attrs.frozen
class Candidate:
    id: int
    config: Config
    origin: str  #: why it was tried: "the input spec", "instances 2 -> 3 from #4"
    status: str
    reason: str = ""  #: for a candidate not measured: the validator's or the server's words
    points: tuple[TunePoint, ...] = ()
    #: device time: which gears the profile did not cover and how they were interpolated
    device_note: str = ""
    seconds: float = 0.0

    @property
    def measured(self) -> bool:
        return self.status == MEASURED and bool(self.points)


@attrs.frozen
class Choice:
    """The best point under the constraints: a candidate at one concurrency."""

    candidate: Candidate
    point: TunePoint
