"""A stop signal that lands while a command stops its tritonserver still ends the command.

The end of ``ge-plugin demo`` and the last candidate of ``ge-plugin tune`` stop a server; a Ctrl-C, SIGTERM or
SIGHUP during that stop used to be spent hurrying it (tritonserver killed at once), and the command went on
as if nothing had come, to exit 0 (tests/e2e/test_signals.py saw it on a loaded host). The signal must both
hurry the stop and end the command with its status, as it does at any other moment.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from ge_plugin.serve import triton


@pytest.mark.parametrize("signum", triton.STOP_SIGNALS)
def test_a_stop_signal_during_a_servers_stop_hurries_it_and_still_ends_the_command(signum):
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    replaced = triton._raise_on_stop_signals()  # as TritonServer.__enter__ sets them for a command
    try:
        with pytest.raises(triton.SignalStop) as stopped, triton._while_stopping(server):
            os.kill(os.getpid(), signum)  # lands while the stop waits for the server
            assert server.wait(timeout=10) == -signal.SIGKILL  # hurried: killed, not waited for
        assert stopped.value.signum == signum
    finally:
        for number, handler in replaced.items():
            signal.signal(number, handler)
        if server.poll() is None:
            server.kill()
            server.wait()


def test_a_stop_without_a_signal_raises_nothing_and_leaves_the_handlers_as_they_were():
    server = subprocess.Popen([sys.executable, "-c", "pass"])
    before = {signum: signal.getsignal(signum) for signum in triton.STOP_SIGNALS}
    with triton._while_stopping(server):
        server.wait(timeout=10)
    assert {signum: signal.getsignal(signum) for signum in triton.STOP_SIGNALS} == before
    assert server.returncode == 0
