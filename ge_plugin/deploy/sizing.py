"""How much shared memory a pod serving the specs needs: /dev/shm sized from the specs, not a fixed guess.

Triton's Python backend moves every request's inputs and every response's outputs through one shared-memory
region per model instance (the stub's), so a pod needs, per instance, room for the largest execute's tensors
once per batch in flight (one per stream), and some room for the region's own bookkeeping and the requests
of the next batch. A fixed 1 GiB was too small for the demo LLaMA (its output at the largest gear is 131 MB per
batch, two streams) and too large for a small CNN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ge_plugin.spec.model import ModelSpec

MiB = 1 << 20
#: per stub: the Python backend's own region start (shm-default-byte-size is small, but the stub maps its
#: control structures and the requests' metadata there too)
PER_INSTANCE_BASE = 64 * MiB
#: on top of the tensors: a batch forming while the others run, and the region's fragmentation
MARGIN = 1.5
#: the size is rounded up to this, so a small spec change does not change the pod spec
GRANULE = 256 * MiB


def _gear_shapes(spec: ModelSpec) -> list[dict[str, tuple[int, ...]]]:
    """Per gear (``ModelSpec.gear_set``), each input's dims without the batch dim, which is counted apart."""
    extra = 1 if spec.batching is not None else 0
    shapes = spec.input_shapes
    return [
        {name: dims[extra:] for (name, _), dims in zip(shapes, gear)} for gear in spec.gear_set.shapes(shapes)
    ]


def execute_bytes(spec: ModelSpec) -> int:
    """The bytes of every input and output of one execute at the spec's largest gear (batch and dims)."""
    batch = max(spec.max_batch_size, 1)
    largest = 0
    for shapes in _gear_shapes(spec):
        total = sum(batch * math.prod(shapes[d.name]) * d.dtype.itemsize for d in spec.inputs)
        #: an output dim that follows no input takes the gear's widest length
        widest = max(
            (shapes[t.name][d] for t in spec.inputs for d, dim in enumerate(t.dims) if dim == -1), default=1
        )
        for out in spec.outputs:
            dims = tuple(
                (shapes[out.follows[i].input][out.follows[i].dim] if i in out.follows else widest)
                if d == -1
                else d
                for i, d in enumerate(out.dims)
            )
            total += batch * math.prod(dims) * out.dtype.itemsize
        largest = max(largest, total)
    return largest


def instances(spec: ModelSpec) -> int:
    return len(spec.placement.devices) * spec.placement.instances_per_device


def shm_bytes(specs: Sequence[ModelSpec]) -> int:
    """What the pod's /dev/shm should hold: per instance, its base plus the largest execute once per stream,
    with the margin; summed over the specs' instances; rounded up to a GRANULE."""
    need = sum(
        instances(spec)
        * (PER_INSTANCE_BASE + MARGIN * execute_bytes(spec) * spec.placement.streams_per_instance)
        for spec in specs
    )
    return max(GRANULE, math.ceil(need / GRANULE) * GRANULE)


def shm_size(specs: Sequence[ModelSpec]) -> str:
    """``shm_bytes`` as a Kubernetes quantity in Mi."""
    return f"{shm_bytes(specs) // MiB}Mi"
