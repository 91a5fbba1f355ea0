"""Pure-Python twin of ``ge_plugin._fastpath`` (placeholder until the engine issue fills it in)."""

IMPLEMENTATION = "py"
__all__ = ["IMPLEMENTATION"]
