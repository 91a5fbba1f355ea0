"""Inside the stub: the stubs' timer samples matched to the points by when they started."""

from __future__ import annotations

import math

import pytest

from ge_plugin.measure import stubtimes
from ge_plugin.measure.records import Measurement, StubPhases


def sample(started: float, requests: int = 1, stream: float = math.nan) -> dict[str, float]:
    return {
        "started": started,
        "requests": requests,
        "read_us": 6.0 * requests,
        "work_us": 100.0,
        "respond_us": 20.0 * requests,
        "stream_us": stream,
    }


def test_each_point_gets_the_medians_of_the_samples_taken_while_it_ran(perf_row):
    first = Measurement("ge_identity", perf_row(1, 1.0, 1.0), True, spans=((10.0, 20.0), (40.0, 45.0)))
    second = Measurement("ge_identity", perf_row(8, 1.0, 1.0), True, spans=((20.5, 30.0),))
    floor = Measurement("py_identity", perf_row(1, 1.0, 1.0), True, spans=((10.0, 20.0),))
    files = [
        {
            "model": "ge_identity",
            "samples": [sample(11, stream=80), sample(12, stream=90), sample(41, stream=85)],
        },
        {"model": "ge_identity", "samples": [sample(21, requests=4, stream=200), sample(35)]},  # another stub
        {"model": "py_identity", "samples": [sample(15), sample(16, requests=2)]},
    ]
    first, second, floor = stubtimes.attach([first, second, floor], files)
    assert first.stub == StubPhases(3, 1.0, 6.0, 100.0, 20.0, 85.0)
    assert second.stub == StubPhases(1, 4.0, 6.0, 100.0, 20.0, 200.0)  # per request; sample at 35 is no one's
    assert floor.stub is not None and floor.stub.stream_us is None and floor.stub.requests_per_execute == 1.5


def test_a_point_without_samples_has_no_stub_phases(perf_row):
    (point,) = stubtimes.attach([Measurement("ge_llama", perf_row(1, 1.0, 1.0), True, spans=((0, 1),))], [])
    assert point.stub is None
    assert stubtimes.phases([]) is None
    assert stubtimes.phases([sample(1)]).read_us == pytest.approx(6.0)
