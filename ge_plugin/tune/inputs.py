"""The requests a sweep sends: a perf_analyzer ``--input-data`` file, and which candidates can serve them.

By default one request per dims gear (or image size) of the input spec, taken in turn, so a candidate with
coarser gears pays for the padding those requests need, as the same traffic would on a device. Values
respect each input's ``range`` (token ids inside the vocabulary; a random id would be refused with 400). An
input with ``preprocess`` takes encoded images, so its requests carry one JPEG a camera could have written
(``sample_jpeg``), which DVPP decodes and resizes as it would a client's. ``--input-data FILE`` replaces them
with the user's own traffic, in perf_analyzer's format.
"""

from __future__ import annotations

import base64
import functools
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ge_plugin.errors import TuneError
from ge_plugin.params import REQUEST_TENSORS
from ge_plugin.spec.model import InputDecl, ModelSpec

#: a request's shape per input (dims without the batch dim), as the model's config declares them
Shapes = dict[str, tuple[int, ...]]


#: the size of the picture an image input's default requests carry: a small camera frame, which the model's
#: own size is resized from (as most clients' pictures are)
SAMPLE_SIZE = (320, 240)


@functools.cache
def sample_jpeg() -> bytes:
    """A baseline JPEG of ``SAMPLE_SIZE`` (smooth colour ramps, quality 90), the same every time: what an
    image input's default requests carry. Pillow encodes it (the ``sim`` extra installs it)."""
    try:
        from PIL import Image
    except ImportError:
        raise TuneError(
            "an input with preprocess is sent JPEGs, which Pillow encodes: pip install pillow, or give your "
            "own requests with --input-data"
        ) from None
    width, height = SAMPLE_SIZE
    pixels = bytes(
        channel
        for y in range(height)
        for x in range(width)
        for channel in (x * 255 // width, y * 255 // height, (x + y) * 255 // (width + height))
    )
    out = io.BytesIO()
    Image.frombytes("RGB", SAMPLE_SIZE, pixels).save(out, "JPEG", quality=90)
    return out.getvalue()


def request_dims(tensor: InputDecl) -> tuple[int, ...]:
    """What a request of ``tensor`` holds, without the batch dim: the config's dims, or for an input with
    ``preprocess`` the encoded images' tensor (an image's bytes, or one BYTES element)."""
    if tensor.preprocess is None:
        return tuple(tensor.dims)
    return REQUEST_TENSORS[tensor.preprocess.request][1]


def default_shapes(spec: ModelSpec) -> list[Shapes]:
    """One request shape per dims gear or image size of ``spec`` (one request when it has neither)."""
    preprocessed = spec.preprocessed
    if preprocessed is not None:  # the image's bytes, or one BYTES element; the other inputs fixed
        image = preprocessed[1]
        dims = (len(sample_jpeg()),) if image.preprocess and image.preprocess.request == "uint8" else (1,)
        return [{t.name: dims if t is image else tuple(t.dims) for t in spec.inputs}]
    if spec.dims_gears:
        fills = [iter(gear) for gear in spec.dims_gear_values]
        out = []
        for fill in fills:
            out.append({t.name: tuple(next(fill) if d == -1 else d for d in t.dims) for t in spec.inputs})
        return out
    if spec.image_sizes:
        out = []
        for h, w in spec.image_sizes:
            shapes = {}
            for t in spec.inputs:
                hw = iter((h, w))
                shapes[t.name] = tuple(next(hw, d) if d == -1 else d for d in t.dims)
            out.append(shapes)
        return out
    return [{t.name: tuple(t.dims) for t in spec.inputs}]


def write_input_data(spec: ModelSpec, shapes: Sequence[Shapes], path: Path) -> Path:
    entries = []
    for request in shapes:
        entry = {}
        for t in spec.inputs:
            shape = request[t.name]
            if t.preprocess is not None:
                entry[t.name] = _image(t, shape)
                continue
            n = 1
            for d in shape:
                n *= d
            entry[t.name] = {"content": _values(t, n), "shape": list(shape)}
        entries.append(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"data": entries}) + "\n")
    return path


def _image(tensor: InputDecl, shape: tuple[int, ...]) -> dict[str, Any]:
    """An image input's requests: the sample JPEG's bytes (UINT8, base64 as perf_analyzer reads binary data),
    or the same bytes as one BYTES element (base64 of Triton's serialized form: its length, then its bytes)."""
    jpeg = sample_jpeg()
    if tensor.preprocess is not None and tensor.preprocess.request == "bytes":
        from tritonclient.utils import serialize_byte_tensor

        serialized: bytes = serialize_byte_tensor(np.array([jpeg], dtype=object)).item()
        return {"b64": base64.b64encode(serialized).decode(), "shape": list(shape)}
    return {"b64": base64.b64encode(jpeg).decode(), "shape": list(shape)}


def _values(tensor: Any, n: int) -> list[Any]:
    kind = tensor.dtype.numpy.kind
    if kind == "b":
        return [k % 2 == 0 for k in range(n)]
    integer = kind in "iu"
    if tensor.range is not None:
        low, high = tensor.range
        if integer:
            span = int(high) - int(low) + 1
            return [int(low) + (7 * k) % span for k in range(n)]
        return [float(low) + (float(high) - float(low)) * ((k % 11) / 10) for k in range(n)]
    if integer:
        return [k % 7 for k in range(n)]
    return [round(0.25 * (k % 16) - 2.0, 2) for k in range(n)]


def read_shapes(path: Path, spec: ModelSpec) -> list[Shapes]:
    """The request shapes of a perf_analyzer input-data file (``shape`` where given, else the config dims,
    which must then be fixed); TuneError naming the entry that says neither."""
    try:
        data = json.loads(Path(path).read_text())
        entries = data["data"]
        if not isinstance(entries, list) or not entries:
            raise ValueError("'data' is not a list of requests")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TuneError(f"{path}: not a perf_analyzer input-data file: {exc}") from None
    shapes = []
    for k, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise TuneError(f"{path}: data[{k}] is not an object of input name -> tensor")
        request = {}
        for t in spec.inputs:
            given = entry.get(t.name)
            shape = given.get("shape") if isinstance(given, dict) else None
            if shape is None:
                dims = request_dims(t)
                if -1 in dims:
                    raise TuneError(
                        f"{path}: data[{k}].{t.name} has no 'shape', and its dims {list(dims)} vary"
                    )
                shape = list(dims)
            if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 1 for d in shape):
                raise TuneError(f"{path}: data[{k}].{t.name}.shape is {shape!r}, not a list of dims >= 1")
            request[t.name] = tuple(shape)
        shapes.append(request)
    return shapes


def refused_shape(spec: ModelSpec, shapes: Sequence[Shapes]) -> str:
    """Why a candidate could not serve one of the requests ("" when it serves them all): a length no dims
    gear holds (or, without ``pad``, equals), or an image size it was not compiled for. The fit is the
    engine's own rule (``engine.planner.gear_fit``, the fast path's planner)."""
    from ge_plugin.engine.planner import gear_fit

    for request in shapes:
        for t in spec.inputs:
            dims = request_dims(t)
            if len(request[t.name]) != len(dims):
                return f"{t.name} of shape {list(request[t.name])} has not the rank of its dims {list(dims)}"
        if spec.dims_gears:
            need = [request[t.name][d] for t in spec.inputs for d, dim in enumerate(t.dims) if dim == -1]
            pads = [t.pad for t in spec.inputs for dim in t.dims if dim == -1]
            if gear_fit(spec.dims_gear_values, [not pad for pad in pads])(need) is None:
                return f"a request with dims {need} fits no dims gear of {[list(g) for g in spec.dims_gear_values]}"
        elif spec.image_sizes:
            sizes = [tuple(s) for s in spec.image_sizes]
            for t in spec.inputs:
                if -1 not in t.dims:
                    continue
                hw = tuple(v for v, d in zip(request[t.name], t.dims) if d == -1)
                if gear_fit(sizes, [not t.pad] * 2)(hw) is None:
                    return f"a {hw[0]}x{hw[1]} {t.name} fits no image size of {[list(s) for s in sizes]}"
    return ""
