"""Process-wide pyACL initialisation and the one place ACL return codes become exceptions.

``acl.init`` may run once per process (a second call returns 100002) and ``acl.finalize`` must not run from
destructors (the CANN docs warn of crashes from singleton teardown order). So initialisation is shared by
every model instance in the process, and finalisation is an explicit call made by whoever owns the process
(the backend's ``finalize`` when its last model goes, a CLI command at exit).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading

from ge_plugin import acl_constants as C
from ge_plugin.device.aclapi import acl
from ge_plugin.errors import ConfigError, acl_error

_lock = threading.Lock()
_config_json = ""
_users = 0


def check(ret: int, call: str) -> None:
    """Raise the most specific AclError when a pyACL call returned a non-zero code."""
    if ret != C.ACL_SUCCESS:
        raise acl_error(ret, call, recent_error_message())


def recent_error_message() -> str:
    try:
        return (acl().get_recent_err_msg() or "").strip()
    except Exception:  # the message is a courtesy; never let it hide the real error
        return ""


def acquire(config_json: str = "") -> None:
    """Make sure pyACL is initialised for this process, with ``config_json`` as the acl.json content.

    The first user initialises (a pyACL that someone else already initialised, 100002, is shared). Later
    users with a different configuration get a ConfigError instead of a silently ignored config, because
    acl.init cannot run twice in one process.
    """
    global _config_json, _users
    with _lock:
        if _users == 0:
            _init(config_json)
            _config_json = config_json
        elif config_json and _canonical(config_json) != _canonical(_config_json):
            raise ConfigError(
                "acl_json differs from the configuration pyACL was initialised with in this process "
                f"({_config_json or 'defaults'!r}); acl.init runs once per process"
            )
        _users += 1


def release() -> None:
    """One user fewer; pyACL stays initialised until :func:`finalize`."""
    global _users
    with _lock:
        _users = max(0, _users - 1)


def users() -> int:
    return _users


def finalize() -> None:
    """acl.finalize() once no user is left; a pyACL that is not initialised is left alone."""
    with _lock:
        if _users:
            return
        ret = acl().finalize()
        if ret not in (C.ACL_SUCCESS, C.ACL_ERROR_REPEAT_FINALIZE, C.ACL_ERROR_UNINITIALIZE):
            check(ret, "acl.finalize")


def _init(config_json: str) -> None:
    if not config_json:
        ret = acl().init()
    else:
        fd, path = tempfile.mkstemp(prefix="ge-plugin-acl-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(config_json)
            ret = acl().init(path)
        finally:
            os.unlink(path)
    if ret == C.ACL_ERROR_REPEAT_INITIALIZE:
        return  # someone else in this process (a user's own code) initialised pyACL: share it
    check(ret, "acl.init")


def _canonical(config_json: str) -> str:
    try:
        return json.dumps(json.loads(config_json), sort_keys=True)
    except ValueError:
        return config_json


def reset_for_tests() -> None:
    """Forget every user, as in a fresh process (tests reset the simulator between cases)."""
    global _config_json, _users
    with _lock:
        _config_json, _users = "", 0


def physical_id(device_id: int) -> int | None:
    """The physical chip behind ``device_id`` (the id npu-smi and the cluster's NPU exporter use), or None.

    In a container the device plugin hands a pod N NPUs that its processes number 0..N-1, so the pod-local
    id cannot be joined with node-level NPU metrics; ``acl.rt.get_phy_dev_id_by_logic_dev_id`` (CANN 8, which
    takes the id a process passes to ``set_device``) says which chip it is. A CANN without the call, or a
    runtime that refuses it, leaves the answer unknown rather than guessed.
    """
    get = getattr(acl().rt, "get_phy_dev_id_by_logic_dev_id", None)
    if get is None:
        return None
    phy, ret = get(device_id)
    if ret != C.ACL_SUCCESS:
        recent_error_message()  # keep the refusal out of later errors' messages
        return None
    return int(phy)
