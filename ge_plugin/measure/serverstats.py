"""What the server saw during one perf_analyzer run: rows per ``execute`` call, their sizes, ge's stream time.

perf_analyzer's breakdown stops at "compute infer", the whole ``execute`` of the Python stub. Two counters
split it further, read before and after each run: Triton's statistics extension (rows and executions per
model, and executions per batch size, exact), read with tritonclient's ``get_inference_statistics``, and the
``ge`` backend's metrics (``ge_execute_duration_us_sum/_count``: H2D, execute and D2H on the simulated
stream, per engine execute), read with ge_plugin.promtext like every other reader of that page. The backend
flushes its metrics once a second, so the device time is a mean over roughly the run's span, which is all
it is used for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from ge_plugin.errors import BenchError
from ge_plugin.measure.records import Counters, Window
from ge_plugin.promtext import Metrics, scrape

ENGINE_EXECUTES = "ge_execute_duration_us_count"
ENGINE_US = "ge_execute_duration_us_sum"
GEAR_EXECUTES = "ge_executes_total"
#: seconds a statistics request or a scrape may take
TIMEOUT_S = 10.0


class ServerStats:
    """Triton's statistics and the ge metrics of one running server; one HTTP client for the whole run."""

    def __init__(self, http_url: str, metrics_url: str):
        import tritonclient.http as httpclient

        self.http_url = http_url
        self.metrics_url = metrics_url
        self._client = httpclient.InferenceServerClient(
            http_url, connection_timeout=TIMEOUT_S, network_timeout=TIMEOUT_S
        )

    def __enter__(self) -> ServerStats:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    def version(self) -> str:
        """The server's own version (``2.51.0``), from its metadata."""
        return str(self._call("metadata", self._client.get_server_metadata).get("version", "unknown"))

    def read(self, model: str) -> Counters:
        """``model``'s counters now."""
        statistics = self._call(
            f"statistics of model {model!r}", self._client.get_inference_statistics, model_name=model
        )
        try:
            metrics = scrape(self.metrics_url, timeout=TIMEOUT_S)
        except (OSError, ValueError) as exc:  # URLError is an OSError; ValueError: not a metrics page
            raise BenchError(f"GET {self.metrics_url}: {exc}") from None
        return counters(statistics, metrics, model)

    def _call(self, what: str, method: Callable[..., dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        from tritonclient.utils import InferenceServerException

        try:
            return method(**kwargs)
        except (InferenceServerException, OSError) as exc:
            raise BenchError(f"{what} from tritonserver at {self.http_url}: {exc}") from None


def counters(statistics: Mapping[str, Any], metrics: Metrics, model: str) -> Counters:
    """``model``'s Counters from Triton's statistics response (every version it lists) and a metrics scrape
    (every instance's samples)."""
    stats = statistics.get("model_stats", [])
    batches: dict[int, int] = {}
    for s in stats:
        for entry in s.get("batch_stats", []):
            size = int(entry.get("batch_size", 0))
            batches[size] = batches.get(size, 0) + int(entry.get("compute_infer", {}).get("count", 0))
    gears: dict[str, int] = {}
    for labels, value in metrics.select(GEAR_EXECUTES, model=model):
        gear = labels.get("gear", "")
        gears[gear] = gears.get(gear, 0) + int(value)
    return Counters(
        inferences=sum(int(s.get("inference_count", 0)) for s in stats),
        executions=sum(int(s.get("execution_count", 0)) for s in stats),
        engine_executes=metrics.total(ENGINE_EXECUTES, model=model),
        engine_us=metrics.total(ENGINE_US, model=model),
        batches=batches,
        gears=gears,
    )


def window(before: Counters, after: Counters) -> Window:
    executions = after.executions - before.executions
    engine = after.engine_executes - before.engine_executes
    sizes = {
        str(size): count - before.batches.get(size, 0)
        for size, count in sorted(after.batches.items())
        if count > before.batches.get(size, 0)
    }
    gears = {
        gear: count - before.gears.get(gear, 0)
        for gear, count in sorted(after.gears.items())
        if count > before.gears.get(gear, 0)
    }
    device_executes = sum(gears.values())
    rows = after.inferences - before.inferences
    return Window(
        rows_per_execute=rows / executions if executions > 0 else None,
        engine_ms_per_execute=(after.engine_us - before.engine_us) / engine / 1e3 if engine > 0 else None,
        batch_sizes=sizes or None,
        gear_executes=gears or None,
        rows_per_device_execute=rows / device_executes if device_executes else None,
    )
