"""Really asynchronous streams: a worker thread per stream runs its tasks in submission order.

Submitting costs a lock and a deque append (microseconds), so benchmarks measure the caller's overhead and
not the simulator's. Tasks run under the stream's execution lock, in order, by whoever holds it: the worker
as soon as it is scheduled, or a thread that calls ``synchronize`` and finds tasks not started yet. That
second path stands in for hardware that starts work at once: without it every execute would pay two host
thread hand-offs (tens of microseconds, more on a busy 2-core machine) that an NPU does not have.
``synchronize`` waits for a task the worker is running on a lock, which drops the GIL the way
``aclrtSynchronizeStream`` does; an idle stream returns at once. A task that fails records the first error
since the last synchronize, and that synchronize returns it, as a device fault surfaces on real hardware.
Later tasks still run.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from typing import Any

from ge_plugin import acl_constants as C
from ge_plugin.sim._fail import Fail

log = logging.getLogger("ge_plugin.sim")

#: what ``synchronize`` returns when its timeout expires
TIMEOUT = Fail(C.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, "the stream's tasks did not finish within the timeout")


class Stream:
    __slots__ = (
        "_done",
        "_error",
        "_exec",
        "_ready",
        "_stopping",
        "_tasks",
        "_thread",
        "completed",
        "context",
        "destroyed",
        "handle",
        "submitted",
        "subscriber",
    )

    def __init__(self, handle: int, context: Any, name: str):
        self.handle = handle
        self.context = context
        self.destroyed = False
        self.submitted = 0
        self.completed = 0
        self.subscriber: int | None = None  #: the thread id handling this stream's callbacks
        self._error: Fail | None = None
        self._tasks: collections.deque = collections.deque()
        self._ready = threading.Condition(threading.Lock())  # guards _tasks; wakes the worker
        self._exec = threading.Lock()  # held while tasks run: one runner at a time, in order
        self._done = threading.Condition(threading.Lock())  # notified as tasks complete (timed waits)
        self._stopping = False
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        """Queue ``fn(*args)``; it may raise Fail to report a device-side error."""
        with self._ready:
            self.submitted += 1
            self._tasks.append((fn, args))
            self._ready.notify()

    @property
    def idle(self) -> bool:
        return self.completed == self.submitted

    def _work(self) -> None:
        ready = self._ready
        while True:
            with ready:
                while not self._tasks and not self._stopping:
                    ready.wait()
                if self._stopping and not self._tasks:
                    return
            with self._exec:
                self._run_queued()

    def _run_queued(self) -> None:
        """Run tasks until none is queued; the caller holds ``_exec``."""
        tasks = self._tasks
        while True:
            with self._ready:
                if not tasks:
                    return
                fn, args = tasks.popleft()
            try:
                fn(*args)
            except Fail as fail:
                if self._error is None:
                    # kept until a synchronize reports it: without its traceback, which would hold the
                    # frames of whoever ran the task (a synchronize runs queued tasks in the caller's thread)
                    self._error = fail.with_traceback(None)
            except Exception as exc:  # a simulator bug: report it like a device fault, keep the stream alive
                log.exception("simulated stream task %r failed", fn)
                if self._error is None:
                    self._error = Fail(C.ACL_ERROR_RT_INTERNAL_ERROR, f"simulator task failed: {exc!r}")
            with self._done:
                self.completed += 1
                self._done.notify_all()

    def _take_error(self) -> Fail | None:
        error, self._error = self._error, None
        return error

    def synchronize(self, timeout_s: float | None = None) -> Fail | None:
        """Wait for every task submitted so far; the first error since the last synchronize, or TIMEOUT."""
        if self.completed == self.submitted:
            return self._take_error()
        if timeout_s is not None:  # a deadline: the caller waits for the worker and never runs work itself
            target = self.submitted
            with self._done:
                if not self._done.wait_for(lambda: self.completed >= target, timeout_s):
                    return TIMEOUT
            return self._take_error()
        with self._exec:
            self._run_queued()
        return self._take_error()

    def drain(self) -> None:
        """Wait for the tasks submitted so far, leaving their error for the next synchronize."""
        if self.completed == self.submitted:
            return
        with self._exec:
            self._run_queued()

    def stop(self) -> None:
        """Finish queued work, then end the worker."""
        with self._ready:
            self._stopping = True
            self._ready.notify()
        if self._thread is not threading.current_thread():
            self._thread.join()
