"""The sim OM file format: round trip, magic, version and integrity checks."""

from __future__ import annotations

import struct

import pytest

from ge_plugin.atc import simom
from ge_plugin.errors import ModelFileError


def test_round_trip(tmp_path):
    path = simom.write(tmp_path / "m.om", {"inputs": [], "note": "x"}, b"onnx-bytes")
    data = path.read_bytes()
    assert data[:16] == b"GEPLUGIN-SIM-OM\0"
    assert struct.unpack_from("<I", data, 16)[0] == simom.VERSION
    om = simom.read(path)
    assert om.onnx == b"onnx-bytes"
    assert om.header["note"] == "x" and om.header["onnx_size"] == 10 and len(om.header["onnx_sha256"]) == 64
    assert simom.read(data) == om


def test_real_om_and_other_files_are_not_sim_oms(tmp_path):
    with pytest.raises(simom.NotSimOmError, match="real Ascend OM") as real:
        simom.loads(b"IMOD" + bytes(100))
    assert real.value.real_om
    with pytest.raises(simom.NotSimOmError, match="not a ge-plugin sim OM") as other:
        simom.loads(b"\x08\x07onnx")
    assert not other.value.real_om
    assert "ge-plugin atc --model=" in str(other.value)


def test_newer_version_is_refused():
    data = bytearray(simom.dumps({}, b"x"))
    struct.pack_into("<I", data, 16, simom.VERSION + 1)
    with pytest.raises(simom.SimOmVersionError, match="rebuild"):
        simom.loads(bytes(data))


def test_corruption_is_detected():
    data = simom.dumps({}, b"0123456789")
    with pytest.raises(ModelFileError, match="truncated"):
        simom.loads(data[:-1])
    tampered = data[:-1] + b"X"
    with pytest.raises(ModelFileError, match="sha256"):
        simom.loads(tampered)
    with pytest.raises(ModelFileError, match="header"):
        simom.loads(data[:28] + b"\xff" + data[29:])


def test_missing_file_is_a_model_file_error(tmp_path):
    with pytest.raises(ModelFileError, match="cannot read"):
        simom.read(tmp_path / "missing.om")
