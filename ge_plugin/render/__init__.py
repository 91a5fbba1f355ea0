"""Specs -> a Triton model repository of ``backend: "ge"`` models."""

from ge_plugin.render.pbtxt import render_config, render_text
from ge_plugin.render.repository import (
    Rendered,
    diff_repository,
    render_repository,
    served_versions,
    stale_models,
    stale_versions,
    write_repository,
)

__all__ = [
    "Rendered",
    "diff_repository",
    "render_config",
    "render_repository",
    "render_text",
    "served_versions",
    "stale_models",
    "stale_versions",
    "write_repository",
]
