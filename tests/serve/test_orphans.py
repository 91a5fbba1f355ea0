"""tritonserver and the gRPC front are started by ``serve.orphans``: they die with the thread that started
them, run in the launcher's place, and no fork handler of this process runs in them (grpcio's did: a
child aborted before its program ran, ``epoll_wait error: Bad file descriptor``, in about one start in 200)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

from ge_plugin.serve.orphans import dying_with_this_process

#: where the fork hook below writes while a test wants it to (it cannot be unregistered: None is off)
_marker: Path | None = None


def _mark_child() -> None:
    if _marker is not None:
        _marker.write_text("a fork handler ran in the child")


os.register_at_fork(after_in_child=_mark_child)


def test_no_fork_handler_of_this_process_runs_in_the_child(tmp_path):
    global _marker
    _marker = tmp_path / "marker"
    try:
        child = subprocess.Popen(dying_with_this_process(["true"]))
        assert child.wait(timeout=30) == 0
    finally:
        _marker = None
    assert not (tmp_path / "marker").exists()


def test_the_program_runs_in_the_launchers_place_with_the_signals_python_ignores_given_back():
    child = subprocess.Popen(dying_with_this_process(["cat", "/proc/self/status"]), stdout=subprocess.PIPE)
    out, _ = child.communicate(timeout=30)
    fields = dict(line.split(":\t", 1) for line in out.decode().splitlines() if ":\t" in line)
    assert int(fields["Pid"]) == child.pid  # exec'd in place: the pid Popen knows is the program's
    assert fields["Name"].strip() == "cat"
    ignored = int(fields["SigIgn"], 16)
    assert not ignored & (1 << (13 - 1)), "SIGPIPE left ignored"
    assert not ignored & (1 << (25 - 1)), "SIGXFSZ left ignored"


def test_the_child_is_killed_when_the_thread_that_started_it_ends():
    started: list[subprocess.Popen[bytes]] = []

    def start() -> None:  # and stay until the program runs, as TritonServer's thread waits for its server
        child = subprocess.Popen(dying_with_this_process(["sleep", "60"]))
        started.append(child)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{child.pid}/comm").read_text().strip() != "sleep" and time.monotonic() < deadline:
            time.sleep(0.01)

    starter = threading.Thread(target=start)
    starter.start()
    starter.join()
    (child,) = started
    assert child.wait(timeout=30) == -9  # SIGKILL from the kernel: PR_SET_PDEATHSIG
