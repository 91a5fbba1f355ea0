"""``ge-plugin bench``: the user's own specs served through Triton, measured against the direct engine."""
