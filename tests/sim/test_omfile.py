"""The sim OM file format: round trip, magic, version and integrity checks."""

from __future__ import annotations

import struct

import pytest

from ge_plugin.errors import ModelFileError
from ge_plugin.sim import omfile


def test_round_trip(tmp_path):
    path = omfile.write(tmp_path / "m.om", {"inputs": [], "note": "x"}, b"onnx-bytes")
    data = path.read_bytes()
    assert data[:16] == b"GEPLUGIN-SIM-OM\0"
    assert struct.unpack_from("<I", data, 16)[0] == omfile.VERSION
    om = omfile.read(path)
    assert om.onnx == b"onnx-bytes"
    assert om.header["note"] == "x" and om.header["onnx_size"] == 10 and len(om.header["onnx_sha256"]) == 64
    assert omfile.read(data) == om


def test_real_om_and_other_files_are_not_sim_oms(tmp_path):
    with pytest.raises(omfile.NotSimOmError, match="real Ascend OM") as real:
        omfile.loads(b"IMOD" + bytes(100))
    assert real.value.real_om
    with pytest.raises(omfile.NotSimOmError, match="not a ge-plugin sim OM") as other:
        omfile.loads(b"\x08\x07onnx")
    assert not other.value.real_om
    assert "ge-plugin atc --model=" in str(other.value)


def test_newer_version_is_refused():
    data = bytearray(omfile.dumps({}, b"x"))
    struct.pack_into("<I", data, 16, omfile.VERSION + 1)
    with pytest.raises(omfile.SimOmVersionError, match="rebuild"):
        omfile.loads(bytes(data))


def test_corruption_is_detected():
    data = omfile.dumps({}, b"0123456789")
    with pytest.raises(ModelFileError, match="truncated"):
        omfile.loads(data[:-1])
    tampered = data[:-1] + b"X"
    with pytest.raises(ModelFileError, match="sha256"):
        omfile.loads(tampered)
    with pytest.raises(ModelFileError, match="header"):
        omfile.loads(data[:28] + b"\xff" + data[29:])


def test_missing_file_is_a_model_file_error(tmp_path):
    with pytest.raises(ModelFileError, match="cannot read"):
        omfile.read(tmp_path / "missing.om")
