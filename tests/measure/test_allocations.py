"""Served allocation evidence: stubs found by their command line, reports matched by pid, nothing assumed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ge_plugin.errors import BenchError
from ge_plugin.measure import allocations as alloc


def _report(device_mallocs: int, pinned_mallocs: int) -> dict:
    return {
        "devices": [{"device": 0, "mallocs": device_mallocs}, {"device": 1, "mallocs": 0}],
        "host_pinned": {"mallocs": pinned_mallocs},
    }


def _proc(root, pid: int, ppid: int, argv: list[str], comm: str = "triton_python_b") -> None:
    entry = root / str(pid)
    entry.mkdir()
    (entry / "stat").write_text(f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1\n")
    (entry / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")


def test_stub_models_maps_the_servers_stubs_to_their_models(tmp_path):
    stub = "/w/triton/backends/python/triton_python_backend_stub"
    _proc(tmp_path, 101, 100, [stub, "/w/repository/ge_llama/1/model.py", "shm", "1048576"])
    _proc(tmp_path, 102, 100, [stub, "/w/repository/naive_llama/1/model.py", "shm"], comm="a (weird) name")
    _proc(tmp_path, 103, 999, [stub, "/w/repository/other/1/model.py"])  # another server's stub
    _proc(tmp_path, 104, 100, ["/usr/bin/python3", "/w/repository/ge_llama/1/model.py"])  # not a stub
    (tmp_path / "self").mkdir()
    assert alloc.stub_models(100, proc=tmp_path) == {101: "ge_llama", 102: "naive_llama"}


def test_stub_models_finds_a_real_child_process(tmp_path):
    # a child whose argv looks like a stub's: argv[0] the stub, argv[1] the model file (a script that waits)
    model_file = tmp_path / "repository" / "ge_identity" / "1" / "model.py"
    model_file.parent.mkdir(parents=True)
    model_file.write_text("import sys\nsys.stdin.read()\n")
    child = subprocess.Popen(
        [str(tmp_path / alloc.STUB), str(model_file)], executable=sys.executable, stdin=subprocess.PIPE
    )
    try:
        assert alloc.stub_models(os.getpid()) == {child.pid: "ge_identity"}
    finally:
        child.communicate(timeout=30)


def test_read_reports_keeps_each_processes_last_report(tmp_path):
    (tmp_path / "sim-7-0.json").write_text(json.dumps(_report(1, 0)))
    (tmp_path / "sim-7-1.json").write_text(json.dumps(_report(9, 0)))
    (tmp_path / "sim-8-0.json").write_text(json.dumps(_report(2, 1)))
    (tmp_path / "notes.json").write_text("{}")
    reports = alloc.read_reports(tmp_path)
    assert set(reports) == {7, 8}
    assert alloc.mallocs(reports[7]) == 9 and alloc.mallocs(reports[8]) == 3


def test_read_reports_names_an_unreadable_report(tmp_path):
    (tmp_path / "sim-7-0.json").write_text("{not json")
    with pytest.raises(BenchError, match=r"sim-7-0\.json: unreadable simulator report"):
        alloc.read_reports(tmp_path)


def test_served_counts_allocations_beyond_start_up_per_request():
    reports = {1: _report(3, 2), 2: _report(3, 2), 3: _report(2400, 800)}
    stubs = {1: "ge_llama", 2: "ge_llama", 3: "naive_llama", 4: "py_identity"}
    ge, naive = alloc.served(
        reports,
        stubs,
        requests={"ge_llama": 500, "naive_llama": 800},
        at_start={"ge_llama": 5, "naive_llama": 0},
    )
    assert (ge.model, ge.where, ge.instances, ge.mallocs_total, ge.per_request) == (
        "ge_llama",
        "served",
        2,
        10,
        0,
    )
    assert (naive.instances, naive.mallocs_total, naive.per_request) == (1, 3200, 4)


def test_served_refuses_missing_evidence():
    with pytest.raises(BenchError, match="no Triton stub process of model 'ge_llama'"):
        alloc.served({}, {}, requests={}, at_start={"ge_llama": 5})
    with pytest.raises(BenchError, match=r"stubs of 'ge_llama' \(pids 2\) wrote no simulator report"):
        alloc.served(
            {1: _report(5, 0)}, {1: "ge_llama", 2: "ge_llama"}, requests={}, at_start={"ge_llama": 5}
        )


def test_mallocs_names_a_report_without_counters():
    with pytest.raises(BenchError, match="without allocation counters"):
        alloc.mallocs({"devices": []})
