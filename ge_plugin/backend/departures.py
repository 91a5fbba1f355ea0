"""Requests whose client left before their batch ran: answered CANCELLED, never run.

A gRPC client's departure shows as ``request.is_cancelled()``; an HTTP client's only the front sees, and it
writes the request's ticket to the gone-clients ring (``gone_clients``). Each ``is_cancelled()`` is one
synchronous IPC to tritonserver (about 45 µs measured), so the check is made only on an instance whose
executes keep the device long enough per request for the work it saves to cost more.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ge_plugin import gone_clients
from ge_plugin.engine.stats import EngineStats

#: the device time (µs) an instance's executes take per request, on average, from which a batch is checked
CANCEL_CHECK_US = 1_000.0

#: runs requests through the engine: their responses, or None when they are sent from the completion thread
Serve = Callable[[list[Any]], "list[Any] | None"]


class Departures:
    """Finds a batch's requests whose client is gone and answers them apart from the others."""

    def __init__(self, pb_utils: ModuleType, stats: EngineStats):
        self.pb_utils = pb_utils
        self.stats = stats
        #: tickets of HTTP requests whose client left (the front writes them; None without the front)
        self.ring = gone_clients.GoneClients.from_environment()

    def worth_checking(self, requests: int) -> bool:
        """Whether the device time this batch will take, at the instance's average, pays for the checks."""
        stats = self.stats
        executes = sum(stats.execute_buckets)
        return bool(executes) and stats.execute_us_sum >= CANCEL_CHECK_US * executes * requests

    def gone(self, requests: list[Any]) -> list[bool]:
        """Whether each request's client left."""
        gone = [False] * len(requests)
        if self.ring is not None:
            tickets = [json.loads(r.parameters() or "{}").get(gone_clients.PARAMETER, 0) for r in requests]
            gone = self.ring.contains(t if isinstance(t, int) and t > 0 else 0 for t in tickets)
        return [left or request.is_cancelled() for left, request in zip(gone, requests)]

    def serve_without(self, requests: list[Any], gone: list[bool], serve: Serve) -> list[Any] | None:
        """The batch served without its gone requests, each answered CANCELLED as Triton expects of a request
        it cancelled (a response object of its own: one object returned for two requests crashes
        tritonserver 2.51), in the way the live ones are answered (returned, or sent later)."""
        live = [request for request, left in zip(requests, gone) if not left]
        answers = serve(live) if live else []
        if answers is None:  # the live ones are answered from the completion thread: these too
            final = self.pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
            for request, left in zip(requests, gone):
                if left:
                    request.get_response_sender().send(self.cancelled(), flags=final)
            return None
        live_answers = iter(answers)
        return [self.cancelled() if left else next(live_answers) for left in gone]

    def cancelled(self) -> Any:
        pb = self.pb_utils
        return pb.InferenceResponse(
            error=pb.TritonError(
                "request cancelled before it ran (its client left)", pb.TritonError.CANCELLED
            )
        )
