"""Fixtures shared by the test folders."""

from __future__ import annotations

import pytest

from ge_plugin.device import runtime
from ge_plugin.sim import _state

#: simulator knobs read from the environment; a test that wants one sets it itself
SIM_ENVIRONMENT = (
    "GE_PLUGIN_SIM_FAULTS",
    "GE_PLUGIN_SIM_EXECUTE_LATENCY_MS",
    "GE_PLUGIN_SIM_REPORT_DIR",
    "GE_PLUGIN_SIM_TIMING_ONLY",
    "GE_PLUGIN_SIM_DEVICE_LOCK_DIR",
)


@pytest.fixture
def fresh_sim(monkeypatch):
    """A fresh simulated process around the test: pyACL not initialised, no counters, no faults, and the
    device layer holding no users (acl.init runs once per process, so tests cannot simply re-init)."""
    monkeypatch.setenv("GE_PLUGIN_DEVICE", "sim")
    for name in SIM_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    _state.reset_for_tests()
    runtime.reset_for_tests()
    yield
    _state.reset_for_tests()
    runtime.reset_for_tests()
