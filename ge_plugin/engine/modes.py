"""How the engine answers: whether a call waits for its batches, and how long its outputs stay valid."""

from __future__ import annotations

import enum


class Mode(enum.Enum):
    """How requests reach the engine and their answers come back.

    ``SYNCHRONOUS``: ``Engine.execute`` runs a batch and returns its outcomes. ``PIPELINED``:
    ``Engine.submit`` returns once the batch is on the device, and a completion thread answers it while the
    caller gathers the next batch onto another lane. ``Engine.mode`` says which the engine is built for
    (pipelined when it has more than one lane to pipeline on); the backend calls accordingly."""

    SYNCHRONOUS = "synchronous"
    PIPELINED = "pipelined"


class Lifetime(enum.Enum):
    """How long the outputs an engine hands over stay valid.

    Outputs that are views of a lane's staging cost no copy and no fresh memory per response, but the
    staging is written again by the lane's next execute; who copies them, and when, is what this says."""

    #: every output owns its memory: valid for good
    OWNED = ("owned", False, False)
    #: outputs may be views of the staging, which the caller keeps until its next ``execute`` (Triton's
    #: stub copies returned responses before it calls again): the lane copies any still lent before it
    #: runs again, so the views are valid until the next call or ``close()``
    UNTIL_NEXT_CALL = ("until_next_call", True, True)
    #: outputs may be views of the staging, valid until ``put`` returns: ``put`` copies what it keeps
    #: (Triton's response sender does, before ``send`` returns)
    UNTIL_PUT_RETURNS = ("until_put_returns", True, False)

    def __init__(self, label: str, views: bool, kept: bool):
        #: outputs may be views of the staging
        self.views = views
        #: the caller keeps those views after ``put``: the lane copies them before it reuses the staging
        self.kept = kept
