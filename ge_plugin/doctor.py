"""``ge-plugin doctor``: what this host runs, and what to do about each piece that is missing.

Each check returns one ``Finding``: ``ok``, ``warn`` (an optional piece: only bench, tune and
``ge-plugin perf-analyzer`` need perf_analyzer) or ``fail`` (serving would not work, or would silently work worse: a fast path that fell back
to the pure-Python twin serves small requests 20-49x slower). Checks import what they check lazily, so a
broken piece fails its own line, not the command.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from ge_plugin.serve.access import Access

OK, WARN, FAIL = "ok", "warn", "fail"
NUMPY_PIN = "numpy<2"


@attrs.frozen
class Finding:
    status: str
    what: str
    detail: str


def check_device() -> Finding:
    from ge_plugin.device import aclapi
    from ge_plugin.errors import ConfigError

    try:
        described = aclapi.describe()
    except ConfigError as exc:
        return Finding(FAIL, "device", str(exc))
    return Finding(OK, "device", described)


def check_fastpath() -> Finding:
    from ge_plugin import fastpath

    if fastpath.FALLBACK_REASON:
        return Finding(
            FAIL,
            "fast path",
            f"{fastpath.describe()}; rebuild the extension (make setup, or pip install --force-reinstall "
            "--no-binary ge-plugin ge-plugin) with a C compiler and the Python headers installed",
        )
    return Finding(OK, "fast path", fastpath.describe())


def check_numpy() -> Finding:
    import numpy as np

    major = int(np.__version__.split(".")[0])
    if major >= 2:
        return Finding(
            FAIL,
            "numpy",
            f"{np.__version__}: tritonserver 2.51's Python backend stub breaks on numpy 2; pip install '{NUMPY_PIN}'",
        )
    return Finding(OK, "numpy", f"{np.__version__} (< 2, as tritonserver 2.51's Python backend stub needs)")


def check_glibc(confstr: str | None = None) -> Finding:
    """The C library: tritonserver (nvidia-pytriton 0.7.0) is built for glibc 2.35 or newer, so pip finds no
    wheel of it on an older one (openEuler 22.03 has 2.34) and a copied-in binary fails to load.
    ``confstr``: what ``confstr('CS_GNU_LIBC_VERSION')`` says ("glibc 2.36"), for tests."""
    if confstr is None:
        try:
            confstr = os.confstr("CS_GNU_LIBC_VERSION")
        except (ValueError, OSError):
            confstr = None
    from ge_plugin.serve.triton import TRITON_MIN_GLIBC

    need = ".".join(map(str, TRITON_MIN_GLIBC))
    name, _, version = (confstr or "").partition(" ")
    try:
        found = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        found = ()
    if name != "glibc" or len(found) != 2:
        return Finding(
            FAIL,
            "glibc",
            f"not a glibc system ({confstr or 'no CS_GNU_LIBC_VERSION'}): tritonserver (nvidia-pytriton 0.7.0) "
            f"needs glibc {need} or newer",
        )
    if found < TRITON_MIN_GLIBC:
        return Finding(
            FAIL,
            "glibc",
            f"{version}: tritonserver (nvidia-pytriton 0.7.0, manylinux_2_35 wheels) needs glibc {need} or newer; "
            "pip finds no wheel of it here. Serve from an Ubuntu 22.04 (or newer) based image; openEuler 22.03 "
            "has 2.34 (docs/deploy.md lists the CANN base images that work)",
        )
    return Finding(OK, "glibc", f"{version} (>= {need}, as tritonserver from nvidia-pytriton 0.7.0 needs)")


def check_tritonserver() -> Finding:
    from ge_plugin.errors import ServeError
    from ge_plugin.serve.triton import find_distribution

    try:
        dist = find_distribution()
    except ServeError as exc:
        return Finding(FAIL, "tritonserver", str(exc))
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    if not dist.stub().is_file():
        return Finding(
            FAIL,
            "tritonserver",
            f"{dist.binary} has no Python backend stub for Python {python}; run ge-plugin with a Python the "
            "nvidia-pytriton wheel has a stub for",
        )
    return Finding(OK, "tritonserver", f"{dist.binary}, with the Python backend stub for Python {python}")


def check_perf_analyzer(environ: Mapping[str, str] | None = None) -> Finding:
    """perf_analyzer and the libraries it links, as ``ge-plugin perf-analyzer`` (and bench, tune) run it,
    and as this shell would run it alone: ``ldd`` with each environment. ``environ``: the shell's (this
    process's by default, which is the user's: run ``ge-plugin doctor`` from the shell in question)."""
    from ge_plugin.errors import BenchError
    from ge_plugin.measure import perf

    shell = dict(os.environ if environ is None else environ)
    try:
        binary = perf.binary()
        wrapped = perf.environment(shell)
        libdir = perf.library_dir()
    except BenchError as exc:
        return Finding(WARN, "perf_analyzer", f"{exc} (only ge-plugin bench, tune and perf-analyzer need it)")
    missing = _missing_libraries(binary, wrapped)
    if isinstance(missing, str):
        return Finding(WARN, "perf_analyzer", missing)
    if missing:
        advice = {"libb64.so.0d": "apt-get install libb64-0d (scripts/system-deps.sh does)"}
        hints = "; ".join(
            f"{lib}: {advice.get(lib, 'install the package that provides it')}" for lib in missing
        )
        return Finding(
            WARN,
            "perf_analyzer",
            f"{binary} cannot load: missing {hints} (only ge-plugin bench, tune and perf-analyzer need it)",
        )
    alone = _missing_libraries(binary, shell)
    if alone and not isinstance(alone, str):
        return Finding(
            OK,
            "perf_analyzer",
            f"{binary}: every library found when run as `ge-plugin perf-analyzer ARGS` (as bench and tune run "
            f"it); run alone from this shell it would not start (missing {', '.join(alone)}): "
            f"export LD_LIBRARY_PATH={libdir}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}} to run it so",
        )
    return Finding(OK, "perf_analyzer", f"{binary}, every library found, from this shell too")


def _missing_libraries(binary: Path, env: Mapping[str, str]) -> list[str] | str:
    """The libraries ``ldd`` does not find for ``binary`` with ``env``, or why it could not say."""
    try:
        out = subprocess.run(["ldd", str(binary)], env=dict(env), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{binary}: cannot list its libraries with ldd ({exc})"
    return [line.split()[0] for line in out.stdout.splitlines() if "not found" in line]


def check_control_plane(access: Access | None = None) -> list[Finding]:
    """Which API groups ``ge-plugin serve`` with these control-plane settings opens to whom, per protocol,
    and what a load may do (docs/serving.md, "Security"). ``warn`` for a switch that lets clients change or
    take over the server."""
    from ge_plugin.serve.access import Access

    access = access or Access()
    findings = []
    for protocol in ("http", "grpc"):
        parts = [f"{who}: {', '.join(groups)}" for who, groups in access.exposure(protocol).items()]
        risky = sorted(
            {"model-repository", "shared-memory", "logging", "trace"}
            & set(access.exposure(protocol).get("every client", []))
        )
        status = WARN if risky else OK
        note = f" (open to every client: {', '.join(risky)} change the server)" if risky else ""
        findings.append(Finding(status, f"{protocol} APIs", "; ".join(parts) + note))
    roots = ", ".join(str(root) for root in access.model_roots)
    loads = [
        "model files uploaded with a load: "
        + ("ALLOWED (key holders can run code in the server)" if access.allow_model_files else "refused"),
        "a config override's OM path: the model's own folder" + (f" and {roots}" if roots else " only"),
    ]
    findings.append(Finding(WARN if access.allow_model_files else OK, "loads", "; ".join(loads)))
    return findings


CHECKS: tuple[Callable[[], Finding], ...] = (
    check_device,
    check_fastpath,
    check_numpy,
    check_glibc,
    check_tritonserver,
    check_perf_analyzer,
)


def run_checks(checks: tuple[Callable[[], Finding], ...] = CHECKS) -> list[Finding]:
    return [check() for check in checks]


def report(findings: list[Finding]) -> str:
    width = max(len(f.what) for f in findings)
    lines = [f"{f.status:<5} {f.what:<{width}}  {f.detail}" for f in findings]
    return "\n".join(lines)


def environment_summary() -> str:
    """The knobs that change what runs, as set now."""
    names = ("GE_PLUGIN_DEVICE", "GE_PLUGIN_NO_EXTENSIONS")
    return ", ".join(f"{name}={os.environ.get(name, '')!r}" for name in names)
