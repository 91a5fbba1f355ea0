"""Generated files are written whole and readable by a tritonserver running as another user."""

import os
import stat

from ge_plugin._files import write_atomic


def test_write_atomic_new_file_gets_the_umask_mode_not_mkstemps_0600(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_atomic(tmp_path / "model.om", b"data")
    finally:
        os.umask(old)
    assert path.read_bytes() == b"data"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["model.om"]  # no temporary file left


def test_write_atomic_keeps_the_mode_of_the_file_it_replaces(tmp_path):
    path = tmp_path / "config.pbtxt"
    path.write_bytes(b"old")
    path.chmod(0o640)
    write_atomic(path, b"new")
    assert path.read_bytes() == b"new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
