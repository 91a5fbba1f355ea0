"""The DVPP handles ``acl.media`` hands out (channel and picture descriptions, configs), one table per kind.

Kept apart from ``_state`` so that the process state can forget them (``forget``, from
``_state.reset_for_tests``) without importing ``acl.media``'s calls.
"""

from __future__ import annotations

from typing import Any

#: kind -> {handle: object}
TABLES: dict[str, dict[int, Any]] = {
    "channel description": {},
    "picture description": {},
    "batch picture description": {},
    "ROI config": {},
    "resize config": {},
    "JPEGE config": {},
}


def forget() -> None:
    for table in TABLES.values():
        table.clear()
