"""Allocation evidence for the served models, read from the simulator reports their stubs leave behind.

Every Triton model instance is its own stub process with its own simulator. With
``GE_PLUGIN_SIM_REPORT_DIR`` set, each writes ``sim-<pid>-<n>.json`` (its counters) at ``acl.finalize``, which
runs when the server unloads the model. The report does not say which model it belongs to, so the bench
notes each stub's pid and model from its command line (``triton_python_backend_stub <repo>/<model>/1/model.py
...``) while the server runs. A ``ge`` instance that allocates nothing per request ends with exactly the
allocations one engine makes at start-up (the direct run counts those for the same config), however many
requests it served; the naive baseline's count grows with every request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ge_plugin.errors import BenchError
from ge_plugin.measure.records import Allocations

STUB = "triton_python_backend_stub"
_REPORT = re.compile(r"sim-(\d+)-(\d+)\.json")


def stub_models(server_pid: int, proc: Path = Path("/proc")) -> dict[int, str]:
    """pid -> model name of every Python-backend stub the server started (Linux /proc)."""
    stubs = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # exited meanwhile, or not ours to read
        # the parent pid is the 2nd field after the parenthesised command name, which may hold spaces
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == server_pid and argv and argv[0].decode(errors="replace").endswith(STUB) and len(argv) > 1:
            stubs[int(entry.name)] = Path(argv[1].decode(errors="replace")).parent.parent.name
    return stubs


def read_reports(directory: Path) -> dict[int, dict[str, Any]]:
    """pid -> the last counters report that process wrote."""
    reports: dict[int, tuple[int, dict[str, Any]]] = {}
    for path in sorted(Path(directory).glob("sim-*.json")):
        match = _REPORT.fullmatch(path.name)
        if not match:
            continue
        pid, seq = int(match.group(1)), int(match.group(2))
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise BenchError(f"{path}: unreadable simulator report: {exc}") from None
        if pid not in reports or seq > reports[pid][0]:
            reports[pid] = (seq, data)
    return {pid: data for pid, (_, data) in reports.items()}


def mallocs(report: Mapping[str, Any]) -> int:
    """Device mallocs on every device plus pinned host mallocs."""
    try:
        return sum(int(d["mallocs"]) for d in report["devices"]) + int(report["host_pinned"]["mallocs"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BenchError(f"a simulator report without allocation counters ({exc})") from None


def served(
    reports: Mapping[int, Mapping[str, Any]],
    stubs: Mapping[int, str],
    *,
    requests: Mapping[str, int],
    at_start: Mapping[str, int],
) -> list[Allocations]:
    """One Allocations per model in ``at_start`` (mallocs one instance makes before its first request).

    BenchError when a model's stub left no report: evidence that is missing must not read as zero.
    """
    out = []
    for model, start in at_start.items():
        pids = [pid for pid, name in stubs.items() if name == model]
        if not pids:
            raise BenchError(f"no Triton stub process of model {model!r} was seen while the server ran")
        missing = [pid for pid in pids if pid not in reports]
        if missing:
            raise BenchError(
                f"the stubs of {model!r} (pids {', '.join(map(str, missing))}) wrote no simulator report; "
                "was GE_PLUGIN_SIM_REPORT_DIR set and did the server unload its models?"
            )
        out.append(
            Allocations(
                model=model,
                where="served",
                instances=len(pids),
                requests=int(requests.get(model, 0)),
                mallocs_at_start=start,
                mallocs_total=sum(mallocs(reports[pid]) for pid in pids),
            )
        )
    return out
