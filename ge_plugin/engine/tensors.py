"""One record per tensor the config and the OM share, with everything both sides say about it.

A config names its tensors in its own order; the OM numbers them its own way, in its own types. Keeping
each fact in a list of its own (names in one order, OM indices in another, types in a third) leaves every
reader to translate between the two numberings; a record holds them together, once, so that a tensor is
read as one thing.
"""

from __future__ import annotations

import attrs

from ge_plugin import fastpath as fp
from ge_plugin.engine.config import IOConfig

#: one output dim that takes its length from a request's input dim: (output dim, input position, input
#: dim), dims in full numbering (the batch first when the model batches), the input by its position in
#: ``Binding.inputs``
Tie = tuple[int, int, int]


@attrs.frozen
class BoundTensor:
    """A config tensor bound to the OM's: who it is on both sides and what it costs at each gear.

    ``om_index`` is its index among the OM's inputs or outputs (what the lane's buffers and datasets are
    numbered by); ``type`` is the config's (what requests bring and responses carry), ``om_type`` the OM's
    (what the staging holds), both short type names. ``nbytes[g]`` is its size at the gear at position
    ``g`` of the gear table (cheapest first: a chunk's ``gear``)."""

    name: str
    om_index: int
    type: str
    om_type: str
    io: IOConfig
    nbytes: tuple[int, ...] = ()
    #: outputs: the dims that follow an input's
    ties: tuple[Tie, ...] = ()
    #: inputs: what request validation checks (dims and their limits, values, shape ties)
    spec: fp.TensorSpec | None = None
