"""device.memory_info: a device's free and total memory, for the backend's memory metric (issue 10 §1)."""

from __future__ import annotations

import threading

import pytest

from ge_plugin import device
from ge_plugin.device import runtime
from ge_plugin.errors import AclError
from ge_plugin.sim import _state


@pytest.fixture
def context():
    runtime.acquire()
    ctx = device.Context(0)
    yield ctx
    ctx.close()
    runtime.release()
    runtime.finalize()


def test_memory_info_follows_allocations_and_loaded_models(context, oms):
    free0, total = device.memory_info(0)
    assert total == 32768 << 20 and free0 == total
    buffer = device.DeviceBuffer(1000)
    assert device.memory_info(0) == (free0 - 1056, total)  # malloc rounding: ALIGN_UP(1000, 32) + 32
    work, weight, ret = device.acl().mdl.query_size(str(oms["identity"]))
    assert ret == 0
    model = device.OmModel(oms["identity"], context)
    assert device.memory_info(0) == (free0 - 1056 - work - weight, total)
    model.close()
    buffer.close()
    assert device.memory_info(0) == (free0, total)


def test_memory_info_of_another_device_leaves_this_threads_context_current(context):
    assert device.memory_info(1)[1] == 32768 << 20
    assert device.acl().rt.get_context() == (context.handle, 0)
    assert _state.SIM.devices[1].refcount == 0, "memory_info left device 1 set"


def test_memory_info_works_in_a_thread_without_a_context(context):
    results = []
    thread = threading.Thread(target=lambda: results.append(device.memory_info(0)))
    thread.start()
    thread.join()
    assert results == [device.memory_info(0)]
    assert _state.SIM.devices[0].refcount == 1, "only the context's own set_device remains"


def test_memory_info_of_a_device_that_does_not_exist_raises(context):
    with pytest.raises(AclError, match="107001"):
        device.memory_info(99)
