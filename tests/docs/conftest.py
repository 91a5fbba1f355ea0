"""The slow tier of the docs test (bench, tune, servers) runs only under ``make test-docs``, which sets
``GE_PLUGIN_DOCS_SLOW=1``; ``make test`` deselects it (tests/docs/README.md)."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("GE_PLUGIN_DOCS_SLOW") == "1":
        return
    slow = [item for item in items if item.get_closest_marker("docs_slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("docs_slow")]
