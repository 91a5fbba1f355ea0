"""The generation loop: one thread stepping a Generator while any sequence is active or waiting.

``submit`` wakes it; with nothing to do it sleeps on a condition (no polling). A step that fails (a device
error) ends every sequence it held with the finish reason "error" and the message in ``Sequence.error``;
the loop goes on with the next requests.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ge_plugin.generate.engine import Generator, Listener, Sequence
from ge_plugin.generate.sampling import SamplingParams

log = logging.getLogger("ge_plugin.generate")


class GenerationLoop:
    """Runs ``generator.step()`` on its own thread; ``close()`` ends every sequence ("cancelled") and stops."""

    def __init__(self, generator: Generator):
        self.generator = generator
        self._wake = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="ge-generate", daemon=True)
        self._thread.start()

    def submit(self, prompt: Any, params: SamplingParams, listener: Listener) -> Sequence:
        """``Generator.submit`` (RequestError, UnavailableError), then wake the loop."""
        sequence = self.generator.submit(prompt, params, listener)
        with self._wake:
            self._wake.notify()
        return sequence

    def cancel(self, sequence: Sequence) -> None:
        self.generator.cancel(sequence)

    def _run(self) -> None:
        generator = self.generator
        while True:
            with self._wake:
                while generator.idle and not self._stopping:
                    self._wake.wait()
                if self._stopping:
                    return
            try:
                generator.step()
            except Exception as exc:  # a device fault: the sequences it held end, the next ones run
                log.error("a generation step failed; its sequences end with an error: %s", exc)
                generator.fail_all(str(exc))

    def close(self) -> None:
        """Cancel every sequence (their listeners hear "cancelled"), stop the thread."""
        generator = self.generator
        for sequence in generator.sequences:
            generator.cancel(sequence)
        with self._wake:
            self._wake.notify()
        deadline = 50
        while not generator.idle and deadline and self._thread.is_alive():
            self._thread.join(0.1)
            deadline -= 1
        with self._wake:
            self._stopping = True
            self._wake.notify()
        self._thread.join()
