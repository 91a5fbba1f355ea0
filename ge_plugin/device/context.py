"""A device's context and its streams, as small objects with explicit ``close()``.

pyACL ties everything to a *current context per thread*: load, execute and unload of a model must happen
in the same context, and each thread that calls ACL must make the context current first. ``Context``
remembers which thread made it current so that the hot path pays for ``acl.rt.set_context`` only when the
calling thread changes.
"""

from __future__ import annotations

import threading

from ge_plugin.device.aclapi import acl
from ge_plugin.device.runtime import check


class Context:
    """``acl.rt.set_device`` + ``acl.rt.create_context`` for one device; closes in the reverse order."""

    def __init__(self, device_id: int):
        self.device_id = device_id
        self.handle = 0
        self._current_thread = 0
        check(acl().rt.set_device(device_id), f"acl.rt.set_device({device_id})")
        try:
            handle, ret = acl().rt.create_context(device_id)
            check(ret, f"acl.rt.create_context({device_id})")
        except BaseException:
            acl().rt.reset_device(device_id)
            raise
        self.handle = handle
        self._current_thread = threading.get_ident()

    def make_current(self) -> None:
        """Make this context current on the calling thread (a no-op when it already is)."""
        ident = threading.get_ident()
        if ident != self._current_thread:
            check(acl().rt.set_context(self.handle), "acl.rt.set_context")
            self._current_thread = ident

    def close(self) -> None:
        """destroy_context, then reset_device: the reference's teardown order. A second close is harmless."""
        if not self.handle:
            return
        self.make_current()
        handle, self.handle = self.handle, 0
        try:
            check(acl().rt.destroy_context(handle), "acl.rt.destroy_context")
        finally:
            check(acl().rt.reset_device(self.device_id), f"acl.rt.reset_device({self.device_id})")

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Stream:
    """A stream of the current context. ``synchronize()`` releases the GIL while the device works."""

    def __init__(self, context: Context):
        context.make_current()
        self.context = context
        handle, ret = acl().rt.create_stream()
        check(ret, "acl.rt.create_stream")
        self.handle = handle

    def synchronize(self) -> None:
        check(acl().rt.synchronize_stream(self.handle), "acl.rt.synchronize_stream")

    def close(self) -> None:
        """Waits for pending work (destroy_stream does), then destroys. A second close is harmless."""
        if not self.handle:
            return
        self.context.make_current()
        handle, self.handle = self.handle, 0
        check(acl().rt.destroy_stream(handle), "acl.rt.destroy_stream")

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
