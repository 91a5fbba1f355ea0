"""What the generation loop counts, for the metrics (published off the request path by the backend).

The loop only appends and increments; whoever publishes takes the latency observations with ``drain``.
"""

from __future__ import annotations

import collections
import threading

#: latency observations kept until drained (older ones are dropped: metrics must not grow memory)
KEEP = 4096


class Stats:
    """Counters since the start, gauges of the last step, and latency observations not yet drained."""

    def __init__(self) -> None:
        self.tokens = 0
        self.prefill_executes = 0
        self.decode_executes = 0
        self.active = 0
        self.cached_tokens = 0
        self._lock = threading.Lock()
        self._ttft: collections.deque[float] = collections.deque(maxlen=KEEP)
        self._itl: collections.deque[float] = collections.deque(maxlen=KEEP)

    def first_token(self, seconds: float) -> None:
        self._ttft.append(seconds)

    def inter_token(self, seconds: float) -> None:
        self._itl.append(seconds)

    def drain(self) -> tuple[list[float], list[float]]:
        """The time-to-first-token and inter-token observations since the last drain (seconds)."""
        with self._lock:
            ttft, itl = list(self._ttft), list(self._itl)
            self._ttft.clear()
            self._itl.clear()
        return ttft, itl
