"""The sim OM file: what ``ge-plugin atc`` writes and the simulator loads in place of a real ``.om``.

Three parts of ge-plugin share this format; it lives with the ATC stand-in that makes it:
``ge_plugin.atc.simbuild`` writes it (``ge-plugin atc``); the simulator reads it (``ge_plugin.sim.mdl`` loads
it, ``python -m ge_plugin.sim om FILE`` prints its header); ``ge_plugin.device.om`` reads only the header,
for the precision the OM computes in. Nothing here imports the simulator, onnx or the rest of ``atc``.

Layout (all integers little-endian)::

    16 bytes   magic b"GEPLUGIN-SIM-OM\\0"
    u32        format version (1)
    u64        header length H
    H bytes    UTF-8 JSON header
    rest       the ONNX model, serialized

The header records what a real OM knows after ATC: ``inputs`` and ``outputs`` (``name``, ``dtype`` as
aclDataType, ``format`` as aclFormat, ``dims`` with -1 in dynamic dims, ``graph_dtype`` the ONNX side's
dtype, and for outputs ``onnx_name``), ``dynamic`` (``mode`` static | batch | hw | dims, ``gears``: per
gear the ``values`` ATC was given plus the concrete ``inputs`` and ``outputs`` dims), ``precision``
(fp32 | fp16 | bf16, how float outputs are rounded), ``precision_mode`` as given, ``soc_version``,
``atc_options`` (every flag as given), ``atc_command``, ``onnx_sha256`` and ``onnx_size``. A real OM starts
with ``IMOD``; the simulator refuses it with a message on how to build a sim OM instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

import attrs

from ge_plugin._files import write_atomic
from ge_plugin.errors import ModelFileError

MAGIC = b"GEPLUGIN-SIM-OM\0"
REAL_OM_MAGIC = b"IMOD"
VERSION = 1
_PREFIX = struct.Struct("<16sIQ")

BUILD_HINT = (
    "build a sim OM from the ONNX model with `ge-plugin atc --model=MODEL.onnx --framework=5 "
    "--output=MODEL --soc_version=Ascend910B3 ...` (ATC's own flags); the simulator cannot run real OM files"
)


class NotSimOmError(ModelFileError):
    """The file is not a sim OM at all (a real OM, or something else)."""

    def __init__(self, message: str, *, real_om: bool):
        super().__init__(message)
        self.real_om = real_om


class SimOmVersionError(ModelFileError):
    """A sim OM written by a newer ge-plugin."""


@attrs.frozen
class SimOm:
    header: dict[str, Any]
    onnx: bytes


def dumps(header: dict[str, Any], onnx_bytes: bytes) -> bytes:
    """The file's bytes; ``onnx_sha256``, ``onnx_size`` and ``format_version`` are filled in here."""
    header = dict(header)
    header["format_version"] = VERSION
    header["onnx_size"] = len(onnx_bytes)
    header["onnx_sha256"] = hashlib.sha256(onnx_bytes).hexdigest()
    text = json.dumps(header, indent=1, sort_keys=True).encode()
    return _PREFIX.pack(MAGIC, VERSION, len(text)) + text + onnx_bytes


def write(path: str | os.PathLike[str], header: dict[str, Any], onnx_bytes: bytes) -> Path:
    """Write atomically, so a simulator loading the file never sees half of it."""
    return write_atomic(path, dumps(header, onnx_bytes))


def check_magic(data: bytes, source: str) -> None:
    """Raise NotSimOmError unless ``data`` starts like a sim OM."""
    if data[: len(MAGIC)] == MAGIC:
        return
    if data[: len(REAL_OM_MAGIC)] == REAL_OM_MAGIC:
        raise NotSimOmError(
            f"{source} is a real Ascend OM (built by CANN's ATC), not a ge-plugin sim OM; {BUILD_HINT}",
            real_om=True,
        )
    raise NotSimOmError(
        f"{source} is not a ge-plugin sim OM (no {MAGIC[:-1].decode()} magic); {BUILD_HINT}", real_om=False
    )


def loads(data: bytes, source: str = "the model") -> SimOm:
    check_magic(data, source)
    if len(data) < _PREFIX.size:
        raise ModelFileError(f"{source} is truncated: {len(data)} bytes, shorter than the sim OM prefix")
    _, version, header_len = _PREFIX.unpack_from(data)
    if version != VERSION:
        raise SimOmVersionError(
            f"{source} is sim OM format version {version}; this ge-plugin reads version {VERSION}; rebuild it "
            "with this ge-plugin's `ge-plugin atc`"
        )
    end = _PREFIX.size + header_len
    if end > len(data):
        raise ModelFileError(f"{source} is truncated: its header claims {header_len} bytes")
    try:
        header = json.loads(data[_PREFIX.size : end].decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFileError(f"{source} has a corrupt sim OM header: {exc}") from None
    if not isinstance(header, dict):
        raise ModelFileError(f"{source} has a corrupt sim OM header: not a JSON object")
    onnx_bytes = data[end:]
    if header.get("onnx_size") != len(onnx_bytes):
        raise ModelFileError(
            f"{source} is truncated or corrupt: {len(onnx_bytes)} ONNX bytes, the header says {header.get('onnx_size')}"
        )
    if header.get("onnx_sha256") != hashlib.sha256(onnx_bytes).hexdigest():
        raise ModelFileError(f"{source} is corrupt: the ONNX bytes do not match the header's sha256")
    return SimOm(header, bytes(onnx_bytes))


def read(path_or_bytes: str | os.PathLike[str] | bytes) -> SimOm:
    """Parse a sim OM file (or its bytes); ModelFileError (NotSimOmError for other files) says what is wrong."""
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return loads(bytes(path_or_bytes))
    path = Path(path_or_bytes)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    return loads(data, str(path))


def read_header(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The header of a sim OM file without reading its model, or None for any other file (a real OM).

    What a loaded model's description does not say (its precision, the ATC options) is read from here."""
    try:
        with open(path, "rb") as fh:
            prefix = fh.read(_PREFIX.size)
            if len(prefix) < _PREFIX.size or prefix[: len(MAGIC)] != MAGIC:
                return None
            _, version, header_len = _PREFIX.unpack(prefix)
            if version != VERSION:
                return None
            header = json.loads(fh.read(header_len).decode())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return header if isinstance(header, dict) else None
