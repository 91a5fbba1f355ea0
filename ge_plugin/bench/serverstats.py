"""What the server saw during one perf_analyzer run: rows per ``execute`` call, their sizes, ge's stream time.

perf_analyzer's breakdown stops at "compute infer", the whole ``execute`` of the Python stub. Two counters
split it further, read before and after each run: Triton's statistics extension (rows and executions per
model, and executions per batch size, exact), and the ``ge`` backend's metrics (``ge_execute_duration_us_sum/_count``: H2D, execute and
D2H on the simulated stream, per engine execute). The backend flushes its metrics once a second, so the
device time is a mean over roughly the run's span, which is all it is used for.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

from ge_plugin.bench.records import Counters, Window
from ge_plugin.errors import BenchError

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)\{([^}]*)\}\s+(\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def get_json(url: str) -> dict:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read().decode())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise BenchError(f"GET {url}: {exc}") from None


def get_text(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read().decode()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise BenchError(f"GET {url}: {exc}") from None


def metric_sums(text: str, model: str, names: tuple[str, ...]) -> dict[str, float]:
    """Sum of every sample of each metric in ``names`` whose ``model`` label is ``model``."""
    sums = dict.fromkeys(names, 0.0)
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match or match.group(1) not in sums:
            continue
        labels = dict(_LABEL.findall(match.group(2)))
        if labels.get("model") == model:
            sums[match.group(1)] += float(match.group(3))
    return sums


def read(http_url: str, metrics_url: str, model: str) -> Counters:
    stats = get_json(f"http://{http_url}/v2/models/{model}/stats").get("model_stats", [])
    sums = metric_sums(
        get_text(metrics_url), model, ("ge_execute_duration_us_count", "ge_execute_duration_us_sum")
    )
    batches: dict[int, int] = {}
    for s in stats:
        for entry in s.get("batch_stats", []):
            size = int(entry.get("batch_size", 0))
            batches[size] = batches.get(size, 0) + int(entry.get("compute_infer", {}).get("count", 0))
    return Counters(
        inferences=sum(int(s.get("inference_count", 0)) for s in stats),
        executions=sum(int(s.get("execution_count", 0)) for s in stats),
        engine_executes=sums["ge_execute_duration_us_count"],
        engine_us=sums["ge_execute_duration_us_sum"],
        batches=batches,
    )


def window(before: Counters, after: Counters) -> Window:
    executions = after.executions - before.executions
    engine = after.engine_executes - before.engine_executes
    sizes = {
        str(size): count - before.batches.get(size, 0)
        for size, count in sorted(after.batches.items())
        if count > before.batches.get(size, 0)
    }
    return Window(
        rows_per_execute=(after.inferences - before.inferences) / executions if executions > 0 else None,
        engine_ms_per_execute=(after.engine_us - before.engine_us) / engine / 1e3 if engine > 0 else None,
        batch_sizes=sizes or None,
    )
