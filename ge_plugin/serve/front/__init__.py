"""ge-plugin's HTTP front for tritonserver 2.51: every request parsed once, checked, and re-encoded.

tritonserver 2.51 aborts, for every client, on some JSON inference requests (a declared shape far larger than
its data: ``std::bad_alloc``; deeply nested JSON inside a gzip body: SIGSEGV). ``ge-plugin serve`` listens on
the HTTP port with this front and runs tritonserver's own HTTP endpoint on a loopback port behind it. The
front parses each request with llhttp (``transport``), decodes its body (``encoding``), parses its JSON
strictly (``strict_json``), applies the rule both fronts share (``serve.policy``) and sends tritonserver a
request it wrote itself (``forward``) over a pool of connections (``upstream``). Whatever tritonserver could read differently from
the front is refused with Triton's own ``{"error": ...}`` body.
"""

from ge_plugin.serve.front.forward import Rules
from ge_plugin.serve.front.server import MAX_CONNECTIONS, Front
from ge_plugin.serve.policy import MAX_BODY_BYTES, MAX_INPUT_BYTES, Refused, check_infer_header

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_CONNECTIONS",
    "MAX_INPUT_BYTES",
    "Front",
    "Refused",
    "Rules",
    "check_infer_header",
]
