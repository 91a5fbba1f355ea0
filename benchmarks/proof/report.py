"""One bench run as data (``Result``), as JSON with stable keys (``report_json``), what its figures say
(``analysis``) and the markdown report people read (``markdown``); ``write`` puts all three files in a folder.
Every section heading and the JSON's ``label`` say "CPU simulator (timing-only), N cores".
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.proof.analysis import (
    LAYOUTS,
    device_bound,
    device_bound_gears,
    host_rows,
    replica_rows,
    stub_rows,
)
from benchmarks.proof.markdown import markdown
from benchmarks.proof.plot import plot
from benchmarks.proof.report_json import (
    JSON,
    MARKDOWN,
    PLOT,
    SCHEMA,
    from_json,
    json_text,
    seed_json,
    to_json,
)
from benchmarks.proof.result import Result

__all__ = [
    "JSON",
    "LAYOUTS",
    "MARKDOWN",
    "PLOT",
    "SCHEMA",
    "device_bound",
    "device_bound_gears",
    "from_json",
    "host_rows",
    "json_text",
    "markdown",
    "replica_rows",
    "seed_json",
    "stub_rows",
    "to_json",
    "write",
]


def write(result: Result, directory: Path) -> dict[str, Path]:
    """report.md, report.json and the plot in ``directory``; name -> path."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": directory / MARKDOWN, "json": directory / JSON, "plot": directory / PLOT}
    paths["json"].write_text(json_text(result))
    plot(result, paths["plot"])
    paths["markdown"].write_text(markdown(result))
    return paths
