"""The generating model's Triton tensors (Contract B of docs/generate.md), in one place: the renderer writes
them into config.pbtxt and the backend's generation adapter reads requests and writes responses by them.

Each entry: (name, Triton data type, dims, optional). Requests carry the prompt and the sampling
parameters; every response carries the ids new in it, the finish reason ("" until the final response) and
the token counts so far.
"""

from __future__ import annotations

INPUTS: tuple[tuple[str, str, tuple[int, ...], bool], ...] = (
    ("input_ids", "TYPE_INT64", (-1,), False),
    ("max_tokens", "TYPE_INT32", (1,), True),
    ("temperature", "TYPE_FP32", (1,), True),
    ("top_k", "TYPE_INT32", (1,), True),
    ("top_p", "TYPE_FP32", (1,), True),
    ("seed", "TYPE_INT64", (1,), True),
    ("ignore_eos", "TYPE_BOOL", (1,), True),
    ("stop_ids", "TYPE_INT64", (-1,), True),
    ("stream", "TYPE_BOOL", (1,), True),
)

OUTPUTS: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("output_ids", "TYPE_INT64", (-1,)),
    ("finish_reason", "TYPE_STRING", (1,)),
    ("prompt_tokens", "TYPE_INT32", (1,)),
    ("completion_tokens", "TYPE_INT32", (1,)),
)

#: finish reasons of the final response
FINISH_REASONS = ("length", "stop", "cancelled")
