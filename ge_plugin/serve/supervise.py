"""Stubs that died: noticed, their model reloaded, the old instance's surviving stubs ended.

tritonserver 2.51 never restarts a crashed Python stub (a segfault in an extension, an OOM kill) and keeps
the model "ready": that instance's share of the requests fails with "Stub process ... is not healthy" until
someone acts. The documented remedy is unload + load; but after the dead stub has failed a request, 2.51
never finishes unloading the old version, its surviving stubs stay alive (about 620 MB each for the tiny
LLaMA), and the server's stop then runs into the exit timeout. ``StubWatch`` does the remedy and the cleanup:
every ``interval`` it lists tritonserver's stubs (``/proc``: each stub's command line names its model's
``model.py`` and its instance) and compares them with the instances each READY model's config makes
(``<group>_<i>``); an instance without a stub, twice in a row, has died.
The model is then unloaded and loaded again at once (after a dead stub has failed a request, 2.51 never
finishes that unload: waiting for it cost 10 s of every recovery, and a load beside an unloading version is
safe), and once the new instances are ready the old instance's stubs still alive are ended with SIGKILL, so
the old version finishes unloading and a later stop exits 0; the ``/dev/shm`` region of each stub that died
or was ended is removed (2.51 leaves a dead stub's region for good, about 2 MiB each). Each recovery is
logged and counted (``recoveries``, exported as ``ge_serve_stub_recoveries_total`` on the metrics port by
the front).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

log = logging.getLogger("ge_plugin.serve")

STUB = b"triton_python_backend_stub"
#: how long the unload before a reload may take before the load goes ahead anyway (2.51 never finishes the
#: unload of a version whose dead stub failed a request; one that does finish takes well under this)
UNLOAD_WAIT_S = 1.0
LOAD_WAIT_S = 120.0


class Instance(NamedTuple):
    """What a stub's command line says it serves, and its /dev/shm region (without the leading slash)."""

    model: str
    version: str
    name: str
    region: str


def stubs_of(parent: int) -> dict[int, Instance]:
    """Live stub processes whose parent is ``parent``: pid -> what it serves."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            if int(stat[1]) != parent or stat[0] == "Z":
                continue
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if len(argv) > 8 and argv[0].endswith(STUB):
            model_py = Path(os.fsdecode(argv[1]))
            found[int(proc.name)] = Instance(
                model_py.parent.parent.name, model_py.parent.name, os.fsdecode(argv[8]), os.fsdecode(argv[2])
            )
    return found


def remove_region(name: str) -> bool:
    """Unlink ``/dev/shm/<name>`` (a stub's region: a plain name, never a path); whether there was one. A
    process that still maps it (tritonserver, for a dead stub's old instance) keeps its pages until it unmaps."""
    if not name or "/" in name or name in (".", ".."):
        return False
    try:
        os.unlink(Path("/dev/shm") / name)
    except FileNotFoundError:
        return False
    return True


class StubWatch:
    """Watches tritonserver ``pid``'s stubs from a thread; ``client`` makes a tritonclient for the server."""

    def __init__(self, pid: int, client: Callable[[], Any], *, interval: float = 1.0):
        self.pid = pid
        self.client = client
        self.interval = interval
        self.recoveries: collections.Counter[str] = collections.Counter()
        #: every stub seen alive (pid -> what it served and its region): a dead one's region is removed after
        #: its model's recovery; one that died before its first look (``interval``) is not known
        self.seen: dict[int, Instance] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="ge-plugin-stub-watch", daemon=True)
        self._thread.start()

    def stop(self, wait: bool = True) -> None:
        self._stop.set()
        if wait and threading.current_thread() is not self._thread:
            self._thread.join(timeout=LOAD_WAIT_S)

    def metrics_text(self) -> bytes:
        """Prometheus text of the recoveries, appended to tritonserver's own metrics."""
        with self._lock:
            counts = dict(self.recoveries)
        lines = [
            "# HELP ge_serve_stub_recoveries_total Models ge-plugin serve reloaded because a stub died",
            "# TYPE ge_serve_stub_recoveries_total counter",
        ]
        lines += [
            f'ge_serve_stub_recoveries_total{{model="{model}"}} {count}'
            for model, count in sorted(counts.items())
        ]
        return ("\n".join(lines) + "\n").encode()

    def _run(self) -> None:
        expected: dict[str, frozenset[str]] = {}  #: READY model -> the instance names its config makes
        pids: dict[tuple[str, str], int] = {}  #: (model, instance) -> its stub's pid, as last seen
        suspect: set[tuple[str, str]] = set()
        while not self._stop.wait(self.interval):
            try:
                stubs = stubs_of(self.pid)
                ready = self._ready_models()
                expected = {m: expected[m] if m in expected else self._instances(m) for m in ready}
            except Exception as exc:  # the server is going away, or not answering yet
                log.debug("stub watch: %s", exc)
                continue
            live = {(stub.model, stub.name) for stub in stubs.values()}
            pids.update({(stub.model, stub.name): pid for pid, stub in stubs.items()})
            self.seen.update(stubs)
            gone = {(m, name) for m, names in expected.items() for name in names if (m, name) not in live}
            dead = gone & suspect  # twice in a row: not a reload handing one instance over to the next
            suspect = gone - dead
            for model in sorted({m for m, _ in dead}):
                lost = sorted(
                    f"{name} (pid {pids[(m, name)]})" if (m, name) in pids else name
                    for m, name in dead
                    if m == model
                )
                died = [pids[(m, name)] for m, name in dead if m == model and (m, name) in pids]
                survivors = [pid for pid, stub in stubs.items() if stub.model == model]
                if self._recover(model, lost, survivors):
                    for pid in died + survivors:
                        gone_stub = self.seen.pop(pid, None)
                        if gone_stub is not None:
                            remove_region(gone_stub.region)
                expected.pop(model, None)
            known = set(stubs) | set(pids.values())
            self.seen = {pid: stub for pid, stub in self.seen.items() if pid in known}

    def _instances(self, model: str) -> frozenset[str]:
        """The instance names of a model served by stubs (backend python or ge); none for other backends."""
        client = self.client()
        try:
            config = client.get_model_config(model).config
        finally:
            client.close()
        if config.backend not in ("python", "ge"):
            return frozenset()
        return frozenset(f"{group.name}_{i}" for group in config.instance_group for i in range(group.count))

    def _ready_models(self) -> set[str]:
        client = self.client()
        try:
            return {m.name for m in client.get_model_repository_index().models if m.state == "READY"}
        finally:
            client.close()

    def _recover(self, model: str, lost: list[str], survivors: list[int]) -> bool:
        log.warning(
            "ge-plugin serve: the stub of %s instance %s died; reloading %s", model, ", ".join(lost), model
        )
        client = self.client()
        try:
            client.unload_model(model)
            self._wait(client, model, lambda state: state != "UNLOADING", UNLOAD_WAIT_S)
            client.load_model(model)
            self._wait(client, model, lambda state: state == "READY", LOAD_WAIT_S)
        except Exception as exc:
            log.error("ge-plugin serve: reloading %s failed: %s", model, exc)
            return False
        finally:
            client.close()
        for pid in survivors:  # the old instances' stubs, which 2.51 would keep for good
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with self._lock:
            self.recoveries[model] += 1
        log.warning(
            "ge-plugin serve: %s reloaded and serving; ended %d stub(s) of its old instances",
            model,
            len(survivors),
        )
        return True

    def _wait(self, client: Any, model: str, done: Callable[[str], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self._stop.is_set():
            states = [m.state for m in client.get_model_repository_index().models if m.name == model]
            if states and all(done(s) for s in states):
                return
            time.sleep(0.1)
