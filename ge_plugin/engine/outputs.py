"""An execute's outputs, split back per request: views of the lane's staging where they can be, copies where
they must be.

A response that is a view costs no copy and no fresh memory; it is safe only while the staging it shows is
neither written again nor freed. The engine knows when that holds: Triton's Python stub copies a returned
response into its shared memory before it calls ``execute`` again, and a response sender copies it before
``send`` returns. Everything else (a cast, or a request whose trimmed part of the gear is not one
contiguous block) goes through the fast path's ``scatter``, which copies.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ge_plugin import fastpath as fp
from ge_plugin.engine.binding import Binding
from ge_plugin.engine.lane import InFlight, Lane, staged_view
from ge_plugin.errors import GePluginError


def split(binding: Binding, lane: Lane, job: InFlight, batched: bool) -> list[dict]:
    """Per request of ``job`` (in its order), the outputs it asked for. Views are recorded in ``lane.lent``
    so that the lane can copy them before its staging is reused."""
    b = binding
    outputs: list[dict] = [{} for _ in job.indices]
    wanted = job.wanted
    for k in job.out_sel:
        j = b.out_index[k]
        gear_dims = job.gear.output_dims[j]
        rest = tuple(gear_dims[1:])
        ties = b.ties[k]
        rows = []
        shapes = []
        for shape in job.shapes:
            if ties:
                dims = list(gear_dims)
                for out_d, in_k, in_d in ties:
                    dims[out_d] = shape[in_k][in_d]
                rows.append(shape[0][0] if batched else dims[0])
                shapes.append(tuple(dims[1:]))
            else:
                rows.append(shape[0][0] if batched else gear_dims[0])
                shapes.append(rest)
        parts = None
        if job.views and b.out_om_type[k] == b.out_type[k]:
            parts = _views(_whole(lane, j, job.gear.index, gear_dims, b.out_type[k]), rows, shapes)
        lent = parts is not None
        if parts is None:
            try:
                parts = fp.scatter(
                    lane.out_host[j].array, gear_dims, b.out_om_type[k], b.out_type[k], rows, shapes
                )
            except ValueError as exc:
                raise GePluginError(f"output {b.out_cfg[k].name!r}: {exc}") from None
        name = b.out_cfg[k].name
        for index, mine, part in zip(job.indices, outputs, parts):
            if wanted is None or k in wanted[index]:
                mine[name] = part
                if lent:
                    lane.lent.append((mine, name))
    return outputs


def _whole(lane: Lane, j: int, gear_index: int, gear_dims: Sequence[int], type_name: str) -> np.ndarray:
    """Output ``j``'s staging as a ``gear_dims`` array of its type: made once per lane, output and gear (the
    lane drops them when its staging is freed)."""
    key = (j, gear_index)
    whole = lane.out_views.get(key)
    if whole is None:
        whole = lane.out_views[key] = staged_view(lane.out_host[j], gear_dims, type_name)
    return whole


def _views(whole: np.ndarray, rows: list[int], shapes: list[tuple[int, ...]]) -> list[np.ndarray] | None:
    """Each request's part of the gear-shaped output ``whole``, as views; None if one is not contiguous."""
    full = whole.shape[1:]
    parts = []
    row = 0
    for n, shape in zip(rows, shapes):
        if shape == full:  # whole rows of a C-contiguous array: contiguous
            part = whole[row : row + n]
        else:
            part = whole[(slice(row, row + n), *map(slice, shape))]
            if not part.flags.c_contiguous:
                return None
        parts.append(part)
        row += n
    return parts
