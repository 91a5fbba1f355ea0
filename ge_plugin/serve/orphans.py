"""Children that die with the process that started them, started without running its fork handlers.

tritonserver and the gRPC front must not outlive ``ge-plugin`` (``kill -9`` and OOM kills included): the
kernel's ``PR_SET_PDEATHSIG`` does it, set in the child before its program runs. Set from a ``preexec_fn``,
the child is forked with the parent's fork handlers, and grpcio's run there in any process that has used a
gRPC channel (the stub watch, the tests, a user's own client): its poller restarted in the child, then
``close_fds`` closed the poller's epoll descriptor, and the child aborted before its program ran (``epoll_wait
error: Bad file descriptor``, SIGABRT: about one start in 200 in a full test run; 3 of 300 spawns in a loop).
So the child is started without a ``preexec_fn`` (vfork: no fork handlers run) as a bare interpreter running
``_EXEC``, which sets the signal, checks that its parent is still the one that started it, gives back the
default action of the signals Python ignores at start-up, and execs the program in its place (same pid).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

#: argv: parent pid, then the program's argv. Only the standard library (-S: no site-packages).
_EXEC = """\
import ctypes, os, signal, sys
if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != int(sys.argv[1]):
    os._exit(125)
for signum in (signal.SIGPIPE, signal.SIGXFSZ):
    signal.signal(signum, signal.SIG_DFL)
os.execvp(sys.argv[2], sys.argv[2:])
"""


def dying_with_this_process(argv: Sequence[str]) -> list[str]:
    """``argv`` as a command whose process is SIGKILLed when the thread that starts it exits (the kernel's
    rule for ``PR_SET_PDEATHSIG``): start it from the thread that waits for it, with no ``preexec_fn``."""
    return [sys.executable, "-I", "-S", "-c", _EXEC, str(os.getpid()), *argv]
