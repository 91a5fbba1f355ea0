# cython: language_level=3
"""Compiled fast path (placeholder until the engine issue fills it in)."""

IMPLEMENTATION = "c"
__all__ = ["IMPLEMENTATION"]
