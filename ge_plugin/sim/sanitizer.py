"""The simulator as a sanitizer of pyACL programs, the way compute-sanitizer and ASan serve CUDA and C.

Real hardware answers a copy past the end of a buffer, a copy into freed pinned memory or a host pointer
passed as device memory with silent corruption, garbage or a crash, long after the bug. The simulator knows
every pointer it handed out (``acl.rt.malloc``, ``malloc_host`` ...) or was handed
(``acl.util.bytes_to_ptr``, ``numpy_to_ptr``, data buffers), with the line of the program that made it, so
it refuses such a call at once with the code CANN documents for a bad argument (``ACL_ERROR_INVALID_PARAM``
and friends) and a message naming the call, the memory, where it was allocated (and freed) and the overrun;
``acl.get_recent_err_msg()`` returns it. Those refusals are always on: they cost nothing on a correct call.

With checking on (``GE_PLUGIN_SIM_CHECK=1``, ``"check": true`` in the init JSON's ``ge_plugin_sim`` section,
:func:`enable`, or ``python -m ge_plugin.sim run --check``), the simulator also:

- reports every such refusal as a *finding*: one block on stderr (a program that ignores return codes still
  learns about it), kept in :func:`findings` and in the counters report (``GE_PLUGIN_SIM_REPORT_DIR``);
  ``run --check`` exits with status 1 when the program made errors;
- checks each data buffer of an execute against the allocation it points into (a buffer that claims more
  bytes than its memory holds is an overrun waiting for a bigger gear);
- reports the allocations a program never freed when ``acl.rt.reset_device`` or ``acl.finalize`` reclaims
  them, or at exit, with the line that made each;
- says once per line of the program when it was given a host pointer it cannot check (a raw
  ``ndarray.ctypes.data``): that copy goes ahead unchecked, as on hardware.

What real pyACL cannot see and lets through (a copy reading past a ``bytes_to_ptr`` object or through a
dropped one, a memcpy kind contradicting the pointers) goes through when checking is off, with one warning
per line (:func:`tolerate`); checking on, it is refused and a finding.

Findings are reported, never raised: the program sees what pyACL would return (a code), so it behaves under
the sanitizer as on an Ascend host. A finding's ``kind`` is one of the constants below.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable
from typing import Any, NamedTuple

from ge_plugin.acl_constants import error_name
from ge_plugin.sim._sites import Site, user_site

OUT_OF_BOUNDS = "out-of-bounds"
USE_AFTER_FREE = "use-after-free"
DOUBLE_FREE = "double-free"
INVALID_FREE = "invalid-free"
WRONG_MEMORY_KIND = "wrong-memory-kind"
INVALID_POINTER = "invalid-pointer"
LEAK = "leak"
UNKNOWN_POINTER = "unknown-pointer"

ERROR, WARNING = "error", "warning"
#: the environment variable that turns checking on for every acl.init of the process
ENV = "GE_PLUGIN_SIM_CHECK"
_TRUE = ("1", "true", "yes", "on")
#: findings kept in memory; later ones are counted but only written to stderr
_MAX_KEPT = 1000


class Finding(NamedTuple):
    """One thing the sanitizer caught: what (``kind``), in which call, at which line of the program."""

    kind: str
    severity: str  #: ERROR (the call failed), WARNING (a raw pointer went unchecked) or LEAK's "leak"
    call: str
    site: Site
    message: str
    code: int  #: what the call returned; 0 for warnings and leaks

    def __str__(self) -> str:
        if self.severity == LEAK:
            head = f"leak found by {self.call}"
        elif self.severity == WARNING:
            head = f"warning: {self.kind} in {self.call}"
        else:
            head = f"{self.kind} in {self.call}"
        where = f" at {self.site}" if self.site.file else ""
        lines = [f"ge-plugin sim check: {head}{where}", f"  {self.message}"]
        if self.code:
            lines.append(f"  -> {self.call} returned {error_name(self.code)} ({self.code})")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "call": self.call,
            "site": str(self.site),
            "message": self.message,
            "code": self.code,
        }


def _from_environment() -> bool:
    return os.environ.get(ENV, "").strip().lower() in _TRUE


class _Sanitizer:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.enabled = _from_environment()
        self.kept: list[Finding] = []
        self.counts: dict[str, int] = {}
        self.warned: set[tuple[str, Site]] = set()
        self.tolerated: set[tuple[str, str, Site]] = set()


_S = _Sanitizer()
#: the state itself, for the per-call paths that read ``STATE.enabled`` without a function call
STATE = _S


def enabled() -> bool:
    """Whether checking is on (read on every call that would report, so it can change at any time)."""
    return _S.enabled


def enable(on: bool = True) -> None:
    """Turn checking on (or off) for this process; ``acl.init`` sets it again from its configuration."""
    _S.enabled = on


def configure(check: bool | None) -> None:
    """What ``acl.init`` does with the ``check`` setting: None leaves the current state alone."""
    if check is not None:
        _S.enabled = check


def findings() -> list[Finding]:
    """Every finding kept since the last :func:`clear` (at most 1000; :func:`counts` has them all)."""
    with _S.lock:
        return list(_S.kept)


def counts() -> dict[str, int]:
    """How many findings of each severity (``error``, ``warning``, ``leak``) since the last :func:`clear`."""
    with _S.lock:
        return dict(_S.counts)


def clear() -> None:
    """Forget the findings (and which raw-pointer lines were already warned about)."""
    with _S.lock:
        _S.kept.clear()
        _S.counts.clear()
        _S.warned.clear()
        _S.tolerated.clear()


def reset() -> None:
    """Checking as the environment says, every raw-pointer line unwarned (``_state.reset_for_tests``). The
    findings stay until :func:`clear`, so a test harness also sees those a test's teardown made."""
    with _S.lock:
        _S.warned.clear()
        _S.tolerated.clear()
    _S.enabled = _from_environment()


def _emit(finding: Finding) -> None:
    with _S.lock:
        _S.counts[finding.severity] = _S.counts.get(finding.severity, 0) + 1
        if len(_S.kept) < _MAX_KEPT:
            _S.kept.append(finding)
    try:
        sys.stderr.write(f"{finding}\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed (interpreter exit): the findings list still has it
        pass


def report_error(kind: str, call: str, message: str, code: int) -> None:
    """A call failed with ``code`` because of a bug of ``kind``; reported when checking is on."""
    if _S.enabled:
        _emit(Finding(kind, ERROR, call, user_site(), message, code))


def warn_once(call: str, message: str) -> None:
    """An unchecked raw host pointer, reported once per line of the program when checking is on."""
    if not _S.enabled:
        return
    site = user_site()
    with _S.lock:
        if (call, site) in _S.warned:
            return
        _S.warned.add((call, site))
    _emit(Finding(UNKNOWN_POINTER, WARNING, call, site, message, 0))


def tolerate(kind: str, call: str, message: str, how: str) -> None:
    """A bug of ``kind`` that real pyACL cannot see and lets through (``how``: what the simulator does
    instead, e.g. reads zeros past the object): checking off, the call goes ahead and this says so on stderr,
    once per kind and line of the program; checking on, the caller fails the call instead (a finding)."""
    site = user_site()
    with _S.lock:
        if (kind, call, site) in _S.tolerated:
            return
        _S.tolerated.add((kind, call, site))
        _S.counts["tolerated"] = _S.counts.get("tolerated", 0) + 1
    where = f" at {site}" if site.file else ""
    text = (
        f"ge-plugin sim: warning: {kind} in {call}{where} (allowed, as on hardware; --check makes it an error)\n"
        f"  {message}\n  {how}\n"
    )
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def report_leaks(call: str, leaked: Iterable[str], site: Site | None = None) -> None:
    """``leaked`` (one description per allocation) were never freed; ``call`` (made at ``site``, by default
    the program's current line) reclaims them."""
    if not _S.enabled:
        return
    site = user_site() if site is None else site
    for description in leaked:
        _emit(Finding(LEAK, LEAK, call, site, f"never freed: {description}", 0))


def errors() -> int:
    """How many calls failed on a finding since the last :func:`clear`."""
    with _S.lock:
        return _S.counts.get(ERROR, 0)


def summary() -> str:
    """One line for the end of a checked run: errors, warnings and leaks."""
    c = counts()
    return (
        f"ge-plugin sim check: {c.get(ERROR, 0)} errors, {c.get(WARNING, 0)} unchecked raw pointers, "
        f"{c.get(LEAK, 0)} leaked allocations"
    )


def as_report() -> dict[str, Any]:
    """The findings for the counters report."""
    return {"enabled": _S.enabled, "counts": counts(), "findings": [f.as_dict() for f in findings()]}
