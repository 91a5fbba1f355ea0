"""Really asynchronous streams: one worker thread per stream runs its tasks in submission order.

Submitting costs a lock and a queue put (microseconds), so benchmarks measure the caller's overhead and not
the simulator's. ``synchronize`` on an idle stream returns at once; on a busy one it queues a marker and
blocks on a lock the worker releases, which drops the GIL the way ``aclrtSynchronizeStream`` does. A task
that fails records the first error since the last synchronize, and that synchronize returns it, as a device
fault surfaces on real hardware. Later tasks still run.
"""

from __future__ import annotations

import _thread
import logging
import queue
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
        "_error",
        "_lock",
        "_queue",
        "_thread",
        "completed",
        "context",
        "destroyed",
        "handle",
        "submitted",
    )

    def __init__(self, handle: int, context: Any, name: str):
        self.handle = handle
        self.context = context
        self.destroyed = False
        self.submitted = 0
        self.completed = 0  # written by the worker only
        self._error: Fail | None = None
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        """Queue ``fn(*args)``; it may raise Fail to report a device-side error."""
        with self._lock:
            self.submitted += 1
            self._queue.put((fn, args))

    @property
    def idle(self) -> bool:
        return self.completed == self.submitted

    def _work(self) -> None:
        get = self._queue.get
        while True:
            item = get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except Fail as fail:
                if self._error is None:
                    self._error = fail
            except Exception as exc:  # a simulator bug: report it like a device fault, keep the worker alive
                log.exception("simulated stream task %r failed", fn)
                if self._error is None:
                    self._error = Fail(C.ACL_ERROR_RT_INTERNAL_ERROR, f"simulator task failed: {exc!r}")
            self.completed += 1

    def _take_error(self) -> Fail | None:
        error, self._error = self._error, None
        return error

    def synchronize(self, timeout_s: float | None = None) -> Fail | None:
        """Wait for every task submitted so far; the first error since the last synchronize, or TIMEOUT."""
        if self.completed == self.submitted:
            return self._take_error()
        done = _thread.allocate_lock()
        done.acquire()
        box: list[Fail | None] = []

        def marker() -> None:
            box.append(self._take_error())
            done.release()

        self.submit(marker)
        if not done.acquire(timeout=-1 if timeout_s is None else timeout_s):
            return TIMEOUT
        return box[0]

    def drain(self) -> None:
        """Wait for the tasks submitted so far, leaving their error for the next synchronize."""
        if self.completed == self.submitted:
            return
        done = _thread.allocate_lock()
        done.acquire()
        self.submit(done.release)
        done.acquire()

    def stop(self) -> None:
        """Finish queued work, then end the worker."""
        self._queue.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join()
