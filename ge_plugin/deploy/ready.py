"""``python -m ge_plugin.deploy.ready --port 8000 MODEL...``: the readiness probe of a pod serving several models.

A Kubernetes probe has a single handler, and Triton answers readiness per model
(``GET /v2/models/NAME/ready``: 200 when ready). This asks for each model in turn and exits 0 only when
every one said 200; otherwise it prints which model is not ready and why, for ``kubectl describe pod``.
Standard library only: it runs every few seconds in the container.
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence


def not_ready(host: str, port: int, models: Sequence[str], timeout: float) -> list[str]:
    """One line per model that is not ready; empty when all are."""
    problems = []
    for model in models:
        url = f"http://{host}:{port}/v2/models/{urllib.parse.quote(model, safe='')}/ready"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        except (urllib.error.URLError, OSError) as exc:
            problems.append(f"{model}: {url}: {getattr(exc, 'reason', exc)}")
            continue
        if status != 200:
            problems.append(f"{model}: not ready (HTTP {status} from {url})")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ge_plugin.deploy.ready",
        description="Exit 0 when Triton says every MODEL is ready (GET /v2/models/MODEL/ready).",
    )
    parser.add_argument("models", nargs="+", metavar="MODEL")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds per request (default: 2)")
    args = parser.parse_args(argv)
    problems = not_ready(args.host, args.port, args.models, args.timeout)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
