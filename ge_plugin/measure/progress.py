"""A one-line progress bar on stderr, redrawn in place on a terminal and printed line by line elsewhere."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, total: int, *, stream: TextIO | None = None, width: int = 24):
        self.total = max(1, total)
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.started = time.monotonic()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def line(self, label: str) -> str:
        filled = self.width * self.done // self.total
        elapsed = int(time.monotonic() - self.started)
        bar = "#" * filled + "-" * (self.width - filled)
        return f"[{bar}] {self.done}/{self.total} {elapsed // 60:02d}:{elapsed % 60:02d} {label}"

    def show(self, label: str) -> None:
        """Say what runs now (the bar counts what is done)."""
        text = self.line(label)
        if self.tty:
            self.stream.write("\r\x1b[2K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def advance(self, label: str = "") -> None:
        self.done = min(self.total, self.done + 1)
        if label:
            self.show(label)

    def close(self, label: str = "done") -> None:
        self.done = self.total
        self.show(label)
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
