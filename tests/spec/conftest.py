"""A small valid spec whose line numbers the mistake tests rely on, and a way to write variants of it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

#: every line matters: the mistake tests name lines of this text
BASE = """\
name: m
model:
  om: m.om
  source: m.onnx
  soc_version: Ascend310P3
inputs:
  - name: input_ids
    dtype: int64
    dims: [-1]
outputs:
  - name: logits
    dtype: fp32
    dims: [-1, 8]
    follows: {0: input_ids:0}
batching:
  gears: [1, 4, 8]
  max_queue_delay_us: 100
dims_gears: [16, 32]
placement:
  devices: [0]
  instances_per_device: 1
"""


def _variant(replace: dict[str, str] | None = None, append: str = "", base: str = BASE) -> str:
    """BASE with whole lines replaced (a replacement "" deletes the line) and text appended."""
    lines = base.splitlines()
    for old, new in (replace or {}).items():
        assert lines.count(old) == 1, f"{old!r} must be exactly one line of the base spec"
        index = lines.index(old)
        lines[index : index + 1] = new.splitlines() if new else []
    return "\n".join(lines) + "\n" + append


@pytest.fixture
def variant() -> Callable[..., str]:
    return _variant


@pytest.fixture
def write_spec(tmp_path: Path) -> Callable[..., Path]:
    def write(text: str, name: str = "spec.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write
