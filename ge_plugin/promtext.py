"""Prometheus' text exposition format, read: what Triton's metrics endpoint says, as samples.

Triton publishes ``name{label="value",...} number`` lines, with ``# TYPE`` comments; nothing here needs the
rest of the format (timestamps, exemplars). The demo, the bench and the end-to-end tests read the same
endpoint through this one parser.
"""

from __future__ import annotations

import re
import urllib.request

import attrs

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@attrs.define
class Metrics:
    """One scrape: (name, labels, value) samples and each family's type."""

    samples: list[tuple[str, dict[str, str], float]]
    types: dict[str, str]

    @classmethod
    def parse(cls, text: str) -> Metrics:
        samples = []
        types = {}
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(maxsplit=3)
                types[name] = kind
                continue
            if not line or line.startswith("#"):
                continue
            match = _LINE.match(line)
            if match is None:
                raise ValueError(f"not a Prometheus sample line: {line!r}")
            name, labels, value = match.groups()
            samples.append((name, dict(_LABEL.findall(labels or "")), float(value)))
        return cls(samples, types)

    def names(self) -> set[str]:
        return {name for name, _, _ in self.samples}

    def select(self, name: str, **labels: str) -> list[tuple[dict[str, str], float]]:
        return [
            (lab, value)
            for n, lab, value in self.samples
            if n == name and all(lab.get(k) == v for k, v in labels.items())
        ]

    def total(self, name: str, **labels: str) -> float:
        """The sum over every sample of ``name`` whose labels include ``labels`` (0 when there is none)."""
        return sum(value for _, value in self.select(name, **labels))


def scrape(url: str, timeout: float = 10.0) -> Metrics:
    """``url`` is Triton's metrics endpoint, e.g. ``http://127.0.0.1:8002/metrics``."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return Metrics.parse(response.read().decode())
