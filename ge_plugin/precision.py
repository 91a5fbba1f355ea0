"""ge-plugin's precisions and ATC's precision modes, in one table.

A spec's ``precision`` and config.pbtxt's ``parameters.precision`` say what an OM computes in: ``origin``
(the model's own float types), ``fp16`` or ``bf16``. ATC chooses it with ``--precision_mode`` (every CANN
release) or ``--precision_mode_v2`` (newer ones); CANN's GE backend took the same values as
``ge.exec.precision_mode(_v2)``. A sim OM's header names the precision by how its float outputs are
rounded, where ``origin`` is ``fp32``. Everything else (what ``ge-plugin atc`` writes, how the simulator
rounds, what ``migrate`` carries) is derived from ``MODES``.
"""

from __future__ import annotations

from typing import NamedTuple

#: ge-plugin's precisions, as specs and configs write them
PRECISIONS = ("origin", "fp16", "bf16")
#: a sim OM header's name of each precision: how its float outputs are rounded
ROUNDING = {"origin": "fp32", "fp16": "fp16", "bf16": "bf16"}


class Mode(NamedTuple):
    """One value of ATC's ``--precision_mode`` or ``--precision_mode_v2``."""

    flag: str  #: precision_mode | precision_mode_v2
    value: str
    precision: str  #: what the OM computes in, as ge-plugin names it (the simulator rounds to it)
    exact: (
        bool  #: ge-plugin's ``precision`` means exactly this mode (for ``precision_mode``: the one it passes)
    )


PRECISION_MODE = "precision_mode"
PRECISION_MODE_V2 = "precision_mode_v2"
#: ATC's default when neither flag is given
DEFAULT_MODE = "force_fp16"

#: every mode ATC takes that the simulator builds, in ATC's documentation order per flag
MODES = (
    Mode(PRECISION_MODE, "force_fp16", "fp16", exact=True),
    Mode(PRECISION_MODE, "allow_fp32_to_fp16", "fp16", exact=False),
    Mode(PRECISION_MODE, "allow_mix_precision", "fp16", exact=False),
    Mode(PRECISION_MODE, "allow_mix_precision_fp16", "fp16", exact=False),
    Mode(PRECISION_MODE, "cube_fp16in_fp32out", "fp16", exact=False),
    Mode(PRECISION_MODE, "force_fp32", "fp16", exact=False),
    Mode(PRECISION_MODE, "must_keep_origin_dtype", "origin", exact=True),
    Mode(PRECISION_MODE, "allow_mix_precision_bf16", "bf16", exact=True),
    Mode(PRECISION_MODE, "allow_fp32_to_bf16", "bf16", exact=False),
    Mode(PRECISION_MODE_V2, "fp16", "fp16", exact=True),
    Mode(PRECISION_MODE_V2, "cube_fp16in_fp32out", "fp16", exact=False),
    Mode(PRECISION_MODE_V2, "mixed_float16", "fp16", exact=False),
    Mode(PRECISION_MODE_V2, "origin", "origin", exact=True),
    Mode(PRECISION_MODE_V2, "mixed_bfloat16", "bf16", exact=True),
)


def precision_of(flag: str, *, exact: bool = False) -> dict[str, str]:
    """``flag``'s values -> ge-plugin's precision (``exact``: only the values a precision means exactly)."""
    return {m.value: m.precision for m in MODES if m.flag == flag and (m.exact or not exact)}


#: ge-plugin's precision -> the ``--precision_mode`` that ``ge-plugin atc`` passes for it
ATC_PRECISION_MODE = {
    precision: value for value, precision in precision_of(PRECISION_MODE, exact=True).items()
}
