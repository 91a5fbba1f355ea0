"""ge_plugin's warnings and errors (a lane rebuilt, a precision the config did not declare) in Triton's log,
where an operator looks. Each record is one IPC to the server: only the unusual reaches it."""

from __future__ import annotations

import logging
from typing import Any


class TritonLog(logging.Handler):
    """Sends each record to ``pb_utils.Logger`` (given, so that only the adapter imports pb_utils)."""

    def __init__(self, logger: Any):
        super().__init__(logging.WARNING)
        self.logger = logger

    def emit(self, record: logging.LogRecord) -> None:
        message = f"ge: {self.format(record)}"
        if record.levelno >= logging.ERROR:
            self.logger.log_error(message)
        else:
            self.logger.log_warn(message)


def log_to_triton(logger: Any) -> None:
    """Route the ``ge_plugin`` loggers' warnings and errors to Triton's log, once per process."""
    root = logging.getLogger("ge_plugin")
    if not any(isinstance(h, TritonLog) for h in root.handlers):
        root.addHandler(TritonLog(logger))
        root.propagate = False
