"""Fixtures for the simulator tests: a fresh simulator per test and a helper that drives a model through the
raw pyACL calls (the sim OMs and their graphs are tests/conftest.py's ``oms`` and ``graphs``)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np
import pytest

from ge_plugin.sim import _state, device_time, sanitizer
from ge_plugin.sim import acl as sim_acl


@pytest.fixture(scope="session")
def device_lock_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("device-locks")


@pytest.fixture(scope="module", autouse=True)
def private_device_locks(device_lock_dir: Path) -> Iterator[Path]:
    """The simulated devices' cross-process lock files in a directory of this test session, so that other
    test runs on the machine (other worktrees) never share a device queue with these tests. Module-scoped,
    so the variable is gone again when tests of other folders run."""
    before = os.environ.get("GE_PLUGIN_SIM_DEVICE_LOCK_DIR")
    os.environ["GE_PLUGIN_SIM_DEVICE_LOCK_DIR"] = str(device_lock_dir)
    yield device_lock_dir
    if before is None:
        os.environ.pop("GE_PLUGIN_SIM_DEVICE_LOCK_DIR", None)
    else:
        os.environ["GE_PLUGIN_SIM_DEVICE_LOCK_DIR"] = before


@pytest.fixture(autouse=True)
def fresh_sim() -> Iterator[None]:
    """acl.init is once per process: every test starts from (and leaves) a fresh simulator."""
    _state.reset_for_tests()
    yield
    _state.reset_for_tests()


@pytest.fixture
def acl():
    return sim_acl


COMPUTING, TIMING_ONLY = "computing", "timing only"


@pytest.fixture(params=[COMPUTING, TIMING_ONLY])
def mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """The simulator computing (a worker thread per stream) or timing only (no data, records settled by the
    clock): stream, event and callback semantics must be the same in both. Numbers exist only when
    computing."""
    device_time.set_timing_only(request.param == TIMING_ONLY)
    yield request.param
    device_time.set_timing_only(False)


@pytest.fixture
def spinning() -> Callable[[], AbstractContextManager[list[int]]]:
    """``with spinning() as counts:``: a thread counts as fast as it can while the block runs, and its count
    is in ``counts[0]`` after: a block that waits without the GIL lets it count far."""

    @contextlib.contextmanager
    def spin() -> Iterator[list[int]]:
        counts: list[int] = []
        stop = threading.Event()

        def count() -> None:
            n = 0
            while not stop.is_set():
                n += 1
            counts.append(n)

        thread = threading.Thread(target=count)
        thread.start()
        try:
            yield counts
        finally:
            stop.set()
            thread.join()

    return spin


@pytest.fixture
def computing(mode: str) -> bool:
    """``mode``, as "are the numbers there": the test runs in both modes and checks data only when computing."""
    return mode == COMPUTING


@pytest.fixture
def checking(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The sanitizer reporting for this test (as ``GE_PLUGIN_SIM_CHECK=1`` makes acl.init do), no findings yet."""
    monkeypatch.setenv(sanitizer.ENV, "1")
    sanitizer.enable()
    sanitizer.clear()
    yield


@pytest.fixture
def not_checking(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The simulator as it runs by default, whatever the test session chose: only its refusals, no reports."""
    monkeypatch.setenv(sanitizer.ENV, "0")
    sanitizer.enable(False)
    sanitizer.clear()
    yield


@pytest.fixture
def ready(acl):
    """acl.init, device 0 set (its default context current in this thread) and one stream."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    return stream


class Model:
    """A model loaded through the raw calls, with max-gear device buffers in its datasets."""

    def __init__(self, acl, path: Path | None, model_id: int | None = None):
        """Load ``path``, or take ``model_id`` loaded some other way (load_from_file_with_mem)."""
        self.acl = acl
        if model_id is None:
            model_id, ret = acl.mdl.load_from_file(str(path))
            assert ret == 0, acl.get_recent_err_msg()
        self.id = model_id
        self.desc = acl.mdl.create_desc()
        assert acl.mdl.get_desc(self.desc, self.id) == 0
        self.inputs = self._dataset(acl.mdl.get_num_inputs(self.desc), acl.mdl.get_input_size_by_index)
        self.outputs = self._dataset(acl.mdl.get_num_outputs(self.desc), acl.mdl.get_output_size_by_index)
        self.mbatch, ret = acl.mdl.get_input_index_by_name(self.desc, "ascend_mbatch_shape_data")
        if ret != 0:
            self.mbatch = None
            acl.get_recent_err_msg()

    def _dataset(self, count: int, size_of) -> tuple[int, list[tuple[int, int, int]]]:
        ds = self.acl.mdl.create_dataset()
        entries = []
        for i in range(count):
            size = size_of(self.desc, i)
            ptr, ret = self.acl.rt.malloc(size, 0)
            assert ret == 0
            buf = self.acl.create_data_buffer(ptr, size)
            _, ret = self.acl.mdl.add_dataset_buffer(ds, buf)
            assert ret == 0
            entries.append((ptr, size, buf))
        return ds, entries

    def feed(self, arrays: Sequence[np.ndarray]) -> None:
        for (ptr, size, _), array in zip(self.inputs[1], arrays):
            array = np.ascontiguousarray(array)
            assert self.acl.rt.memcpy(ptr, size, array.ctypes.data, array.nbytes, 1) == 0

    def fetch(self, dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        results = []
        for j, ((ptr, _, _), dtype) in enumerate(zip(self.outputs[1], dtypes)):
            dims, ret = self.acl.mdl.get_cur_output_dims(self.desc, j)
            assert ret == 0
            out = np.empty(dims["dims"], dtype=dtype)
            assert self.acl.rt.memcpy(out.ctypes.data, out.nbytes, ptr, out.nbytes, 2) == 0
            results.append(out)
        return results

    def run(
        self, arrays: Sequence[np.ndarray], dtypes: Sequence[np.dtype] = (np.float32,)
    ) -> list[np.ndarray]:
        self.feed(arrays)
        assert self.acl.mdl.execute(self.id, self.inputs[0], self.outputs[0]) == 0, (
            self.acl.get_recent_err_msg()
        )
        return self.fetch(dtypes)

    def release(self) -> None:
        for ds, entries in (self.inputs, self.outputs):
            for ptr, _, buf in entries:
                assert self.acl.destroy_data_buffer(buf) == 0
                assert self.acl.rt.free(ptr) == 0
            assert self.acl.mdl.destroy_dataset(ds) == 0
        assert self.acl.mdl.unload(self.id) == 0
        assert self.acl.mdl.destroy_desc(self.desc) == 0


@pytest.fixture
def model_class() -> type[Model]:
    """``Model(acl, path)``, for tests that set up acl.init themselves."""
    return Model


@pytest.fixture
def load(acl, ready):
    """``load(path) -> Model`` in the ready context (fresh_sim's reset releases what the test leaves loaded)."""

    def _load(path: Path) -> Model:
        return Model(acl, path)

    return _load
