"""Opt-in timers inside Triton's Python stub: what one ``execute`` spends reading its requests, on its own
work, and building the responses.

perf_analyzer's breakdown stops at "compute infer", the stub's whole ``execute``; these timers split it, for
the ``ge`` backend and for the bench's Python-backend floors alike, so that the two can be read side by side.
``GE_PLUGIN_STUB_TIMING=<directory>`` turns them on. The variable is read once, when a model instance
initializes; with it unset nothing is timed. When set, the instance runs each execute's phases through
``StubTimer.phases``, which adds one sample (its wall clock start, its requests, and µs per phase) to an
in-memory array, and ``finalize`` writes them to
``<directory>/<model>-<pid>-<instance>.json``, which the bench reads after the server stopped.
"""

from __future__ import annotations

import array
import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

_Read = TypeVar("_Read")
_Work = TypeVar("_Work")
_Responses = TypeVar("_Responses")

ENV = "GE_PLUGIN_STUB_TIMING"
#: one sample per execute: wall clock at its start (s), requests, then µs reading, working, responding, and
#: µs of the work spent on the (simulated) device's stream (NaN where the model has none, and both NaN for a
#: batch submitted to be answered from the engine's completion thread: ``work`` is then the submit alone)
FIELDS = ("started", "requests", "read_us", "work_us", "respond_us", "stream_us")


class StubTimer:
    """The samples of one model instance."""

    def __init__(self, directory: str | os.PathLike[str], model: str, instance: str):
        self.directory = Path(directory)
        self.model = model
        self.instance = instance
        self._samples = array.array("d")

    def record(
        self, started: float, requests: int, read_s: float, work_s: float, respond_s: float, stream_us: float
    ) -> None:
        self._samples.extend((started, requests, read_s * 1e6, work_s * 1e6, respond_s * 1e6, stream_us))

    def phases(
        self,
        requests: list[Any],
        read: Callable[[list[Any]], _Read],
        work: Callable[[list[Any], _Read], _Work | None],
        respond: Callable[[_Work], _Responses],
        stream_us: Callable[[], float] | None = None,
    ) -> _Responses | None:
        """One execute, ``respond(work(requests, read(requests)))``, with each phase timed. ``work`` returning
        None (a batch submitted, answered later) ends it with no responding; ``stream_us()``, when given, is
        the µs the device's stream has spent so far, and its difference over ``work`` is recorded too."""
        started = wall()
        t0 = clock()
        tensors = read(requests)
        t1 = clock()
        stream_before = stream_us() if stream_us is not None else math.nan
        result = work(requests, tensors)
        t2 = clock()
        if result is None:
            self.record(started, len(requests), t1 - t0, t2 - t1, math.nan, math.nan)
            return None
        stream = stream_us() - stream_before if stream_us is not None else math.nan
        responses = respond(result)
        self.record(started, len(requests), t1 - t0, t2 - t1, clock() - t2, stream)
        return responses

    def samples(self) -> list[tuple[float, ...]]:
        width = len(FIELDS)
        data = self._samples
        return [tuple(data[k : k + width]) for k in range(0, len(data), width)]

    def write(self) -> Path:
        """The samples as JSON (NaN as null), in a file of this model instance and process."""
        self.directory.mkdir(parents=True, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in self.instance) or "instance"
        path = self.directory / f"{self.model}-{os.getpid()}-{safe}.json"
        rows = [[None if math.isnan(v) else v for v in sample] for sample in self.samples()]
        data = {
            "model": self.model,
            "instance": self.instance,
            "pid": os.getpid(),
            "fields": FIELDS,
            "samples": rows,
        }
        path.write_text(json.dumps(data) + "\n")
        return path


def from_environment(model: str, instance: str) -> StubTimer | None:
    """A timer when ``GE_PLUGIN_STUB_TIMING`` names a directory; None (nothing timed) otherwise."""
    directory = os.environ.get(ENV, "")
    return StubTimer(directory, model, instance) if directory else None


def clock() -> float:
    return time.perf_counter()


def wall() -> float:
    return time.time()


def read(directory: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every timing file in ``directory``: model, instance, pid and samples (dicts by FIELDS, NaN for null)."""
    found = []
    for path in sorted(Path(directory).glob("*.json")):
        data = json.loads(path.read_text())
        fields = data["fields"]
        samples = [
            {name: (math.nan if value is None else value) for name, value in zip(fields, sample)}
            for sample in data["samples"]
        ]
        found.append(
            {"model": data["model"], "instance": data["instance"], "pid": data["pid"], "samples": samples}
        )
    return found
