"""tritonserver's memory: its allocator (jemalloc, preloaded, when the system has it) and the buffers its gRPC
endpoint keeps for reuse (the pool size, from a budget).

tritonserver 2.51's RSS grows with large requests and stays up (issue reports: 103 to 518 MB after 8 rounds
of 64 MiB requests per protocol), the usual sign of an allocator keeping freed memory; jemalloc gives freed
pages back to the kernel after a decay time. It is loaded with ``LD_PRELOAD``, which tritonserver's Python
stubs inherit too. What it changes, measured by ``benchmarks/jemalloc_rss.py``, is in docs/serving.md
("Memory"): for 64 MiB requests that tritonserver reads and refuses, HTTP gives everything back with either
allocator and gRPC keeps about 260 MB with either, so what gRPC keeps there is not the allocator's.

``ge-plugin serve --jemalloc`` (or ``GE_PLUGIN_JEMALLOC``) says which: ``auto`` (the default) looks for
Debian's ``libjemalloc2`` (``scripts/system-deps.sh`` installs it) at the paths in ``CANDIDATES``; ``off``
keeps glibc's malloc; any other value is the library's path, which must exist.

tritonserver 2.51's gRPC endpoint keeps up to ``--grpc-infer-allocation-pool-size`` (default 8) request
objects for reuse, each with the capacity of the largest request and response it carried: 32 rounds of one
64 MiB request and answer took its RSS to 1.6 GB (docs/serving.md, "Memory"). ``grpc_pool_size`` chooses the
pool from a budget (``ge-plugin serve --grpc-buffer-budget``) and the largest exchange the served models
allow (``largest_exchange``: their config.pbtxt dims, bounded by a ``ge`` model's gears).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ge_plugin.errors import ConfigError, ServeError
from ge_plugin.params import ModelParams
from ge_plugin.serve.policy import ITEMSIZE

#: where Debian and Ubuntu (libjemalloc2), and RPM distributions, put the library
CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
    "/usr/lib64/libjemalloc.so.2",
    "/usr/lib/libjemalloc.so.2",
)
#: return freed pages after a second (jemalloc's default is 10 s) from a background thread, so an idle
#: server shrinks too, not only one that allocates again; purged at once rather than MADV_FREE'd, which
#: would leave them counted in RSS until the kernel wants them
MALLOC_CONF = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0"
ENV = "GE_PLUGIN_JEMALLOC"


def find_jemalloc(choice: str) -> Path | None:
    """The library ``choice`` names ("auto", "off" or a path); ServeError for a path that is not there."""
    if choice == "off":
        return None
    if choice == "auto":
        return next((Path(p) for p in CANDIDATES if os.path.isfile(p)), None)
    path = Path(choice)
    if not path.is_file():
        raise ServeError(
            f"--jemalloc {choice}: no such file (use auto, off, or the path of libjemalloc.so.2)"
        )
    return path


def allocator_environment(choice: str, base: Mapping[str, str]) -> dict[str, str]:
    """The variables to add to tritonserver's environment ``base`` for the allocator ``choice``."""
    library = find_jemalloc(choice)
    if library is None:
        return {}
    preload = " ".join(p for p in (str(library), base.get("LD_PRELOAD", "")) if p)
    return {"LD_PRELOAD": preload, "MALLOC_CONF": base.get("MALLOC_CONF", MALLOC_CONF)}


#: tritonserver 2.51's own pool size, the most ``ge-plugin serve`` chooses
TRITON_POOL_SIZE = 8
#: the default of ``--grpc-buffer-budget``
GRPC_BUFFER_BUDGET = 1 << 30
#: what one pooled request object holds, in exchanges (a request and its response): measured with 64 MiB
#: requests and answers, each pool slot added about 256 MB of RSS (docs/serving.md, "Memory")
SLOT_EXCHANGES = 2


def grpc_pool_size(budget: int, exchange_bytes: int) -> int:
    """The pool size whose buffers stay within ``budget`` bytes when each exchange is ``exchange_bytes``."""
    return max(0, min(TRITON_POOL_SIZE, budget // max(1, SLOT_EXCHANGES * exchange_bytes)))


def largest_exchange(configs: Sequence[Any], unknown: int) -> int:
    """The bytes of the largest request plus the largest response of the models whose ``ModelConfig``
    messages are ``configs``; a tensor whose size no config bounds (a -1 dim without a gear, a BYTES
    element) counts as ``unknown`` (the largest message the front takes)."""
    largest = 0
    for config in configs:
        inputs, outputs = _tensor_bounds(config)
        largest = max(largest, _total(inputs, unknown) + _total(outputs, unknown))
    return largest


def _total(sizes: Sequence[int | None], unknown: int) -> int:
    return min(unknown, sum(unknown if size is None else size for size in sizes))


def _tensor_bounds(config: Any) -> tuple[list[int | None], list[int | None]]:
    """Per input and per output of ``config``, its largest size in bytes (None: not bounded)."""
    batch = config.max_batch_size if config.max_batch_size > 0 else 1
    params = None
    if config.backend == "ge":
        try:
            params = ModelParams.from_parameters({k: v.string_value for k, v in config.parameters.items()})
        except ConfigError:
            params = None
    # the largest value of each -1 input dim, in input order (a ge model's dims_gears), else per input the
    # largest (height, width) of its image-size gears
    gear_dims = [max(values) for values in zip(*params.dims_gears)] if params and params.dims_gears else []
    image = (
        (max(h for h, _ in params.image_sizes), max(w for _, w in params.image_sizes))
        if params and params.image_sizes
        else None
    )
    bounds: dict[tuple[str, int], int] = {}
    inputs: list[int | None] = []
    position = 0
    for tensor in config.input:
        dims: list[int | None] = []
        unknown_in_tensor = 0
        for index, dim in enumerate(tensor.dims):
            if dim >= 0:
                dims.append(dim)
                continue
            value: int | None = None
            if position < len(gear_dims):
                value = gear_dims[position]
            elif image is not None and unknown_in_tensor < 2:
                value = image[unknown_in_tensor]
            position += 1
            unknown_in_tensor += 1
            if value is not None:
                bounds[(tensor.name, index)] = value
            dims.append(value)
        inputs.append(_bytes(dims, tensor.data_type, batch))
    ties = (
        {(t.output, t.output_dim): (t.input, t.input_dim) for t in params.output_dim_ties} if params else {}
    )
    outputs: list[int | None] = []
    for tensor in config.output:
        dims = [
            d if d >= 0 else bounds.get(ties.get((tensor.name, i), ("", -1)))
            for i, d in enumerate(tensor.dims)
        ]
        outputs.append(_bytes(dims, tensor.data_type, batch))
    return inputs, outputs


def _bytes(dims: Sequence[int | None], data_type: int, batch: int) -> int | None:
    from tritonclient.grpc import model_config_pb2

    name = model_config_pb2.DataType.Name(data_type)[len("TYPE_") :]
    itemsize = ITEMSIZE.get(name)
    if itemsize is None or any(d is None for d in dims):
        return None
    return batch * itemsize * math.prod(d for d in dims if d is not None)


def repository_configs(repository: Path) -> list[Any]:
    """The ``ModelConfig`` of every model folder of a local repository whose config.pbtxt parses."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    configs = []
    for path in sorted(Path(repository).glob("*/config.pbtxt")):
        try:
            configs.append(text_format.Parse(path.read_text(), model_config_pb2.ModelConfig()))
        except (OSError, text_format.ParseError, UnicodeDecodeError):
            continue  # tritonserver refuses to load it; it holds no buffers
    return configs
