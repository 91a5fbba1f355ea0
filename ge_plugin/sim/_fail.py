"""The simulator's one internal exception: an ACL error on its way to becoming a returned code."""

from __future__ import annotations


class Fail(Exception):
    """An ACL error inside the simulator. The API boundary turns it into the returned code and the text
    ``acl.get_recent_err_msg()`` gives; it never reaches the user (pyACL never raises for runtime errors).

    ``kind`` marks a failure that is a bug in the program's use of memory (one of ``sanitizer``'s kinds:
    out-of-bounds, use-after-free, ...), which the sanitizer reports as a finding when checking is on."""

    def __init__(self, code: int, message: str, kind: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.kind = kind
