"""device.physical_id: which chip an instance runs on, for the ``physical_id`` metric label (issue 32 §2)."""

from __future__ import annotations

import types

import pytest

from ge_plugin import device
from ge_plugin.device import runtime


@pytest.fixture
def initialised():
    runtime.acquire()
    yield
    runtime.release()
    runtime.finalize()


def test_physical_id_is_what_the_runtime_says_in_a_container(initialised, monkeypatch):
    monkeypatch.setenv("ASCEND_VISIBLE_DEVICES", "3,1")
    assert device.physical_id(0) == 1
    assert device.physical_id(1) == 3


def test_physical_id_outside_a_container_is_the_device_id(initialised, monkeypatch):
    monkeypatch.delenv("ASCEND_VISIBLE_DEVICES", raising=False)
    assert device.physical_id(2) == 2


def test_physical_id_is_unknown_when_the_runtime_refuses_and_the_refusal_leaves_no_trace(
    initialised, monkeypatch
):
    monkeypatch.setenv("ASCEND_VISIBLE_DEVICES", "7")
    assert device.physical_id(1) is None
    assert device.acl().get_recent_err_msg() is None  # taken: a later error does not carry it


def test_physical_id_is_unknown_on_a_cann_without_the_call(monkeypatch):
    """CANN before 8 has no aclrtGetPhyDevIdByLogicDevId: the label stays empty rather than guessed."""
    rt = types.SimpleNamespace()  # an acl.rt with no get_phy_dev_id_by_logic_dev_id
    monkeypatch.setattr(runtime, "acl", lambda: types.SimpleNamespace(rt=rt))
    assert device.physical_id(0) is None
