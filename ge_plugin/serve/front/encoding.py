"""Request bodies as tritonserver 2.51 reads them: ``Content-Encoding`` gzip or deflate (zlib), or none.

tritonclient.http compresses request bodies on request (``request_compression_algorithm``) and tritonserver
inflates them; the front inflates them itself, so that the JSON it checks is the JSON Triton would read, and
forwards the inflated body with no ``Content-Encoding``. Inflation stops at a limit (a 1 KiB gzip member can
hold gigabytes of zeros), and a stream that is cut short or followed by more bytes is refused: another
decoder could read those differently.
"""

from __future__ import annotations

import zlib

from ge_plugin.errors import Refused

#: zlib window bits of each encoding tritonserver 2.51 accepts: gzip with its header, deflate with zlib's
WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def content_coding(value: bytes | None) -> str | None:
    """The coding a ``Content-Encoding`` value names (None for identity); Refused (415) for any other,
    a list of codings among them, in Triton's words."""
    if value is None:
        return None
    name = value.strip().lower().decode("latin-1")
    if name in ("", "identity"):
        return None
    if name not in WBITS:
        raise Refused(
            f"unsupported Content-Encoding '{name}': only 'gzip', 'deflate' and 'identity' are supported",
            415,
        )
    return name


def inflate(body: bytes, coding: str, limit: int) -> bytes:
    """``body`` decoded; Refused (413) past ``limit`` decoded bytes, 400 for a stream that is not one."""
    decoder = zlib.decompressobj(WBITS[coding])
    try:
        data = decoder.decompress(body, limit + 1)
    except zlib.error as exc:
        raise Refused(f"{coding} body does not decode: {exc}") from None
    if len(data) > limit or decoder.unconsumed_tail:
        raise Refused(f"{coding} body decodes to more than {limit} bytes", 413)
    if not decoder.eof:
        raise Refused(f"{coding} body is cut short")
    if decoder.unused_data:
        raise Refused(f"{coding} body has {len(decoder.unused_data)} bytes after its end")
    return data
