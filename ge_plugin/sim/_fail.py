"""The simulator's one internal exception: an ACL error on its way to becoming a returned code."""

from __future__ import annotations


class Fail(Exception):
    """An ACL error inside the simulator. The API boundary turns it into the returned code and the text
    ``acl.get_recent_err_msg()`` gives; it never reaches the user (pyACL never raises for runtime errors)."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message
