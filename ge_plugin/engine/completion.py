"""The thread that completes submitted batches, so that the caller's thread can start the next one.

With more than one lane, ``Engine.submit`` returns as soon as a batch is on the device; this thread waits
for each lane in the order the batches started (a device runs them in that order), answers the batch's
requests and frees the lane. Waiting on a stream releases the GIL, so the caller's thread gathers and starts
the next batch on another lane meanwhile.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from ge_plugin import device
from ge_plugin.engine.lane import Lane

log = logging.getLogger("ge_plugin.engine")


class Completion:
    def __init__(self, context: device.Context, finish: Callable[[Lane], None]):
        self._context = context
        self._finish = finish
        self._lanes: queue.SimpleQueue[Lane | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="ge-completion", daemon=True)
        self._thread.start()

    def push(self, lane: Lane) -> None:
        """Complete ``lane``'s batch once the ones started before it are done."""
        self._lanes.put(lane)

    def _run(self) -> None:
        self._context.make_current()  # pyACL contexts are per thread
        while True:
            lane = self._lanes.get()
            if lane is None:
                return
            try:
                self._finish(lane)
            except Exception:  # a failure to deliver must not stop the answers to the batches after it
                log.exception("completing a batch failed")

    def stop(self) -> None:
        """End the thread after the batches already pushed."""
        self._lanes.put(None)
        self._thread.join()
