"""One model instance on one device: everything allocated at start, requests gathered into gears.

``Engine.execute(requests)`` takes what Triton's dynamic batcher grouped (a list of requests, each a
mapping of input name to an array-like) and returns, per request, its outputs or the error that concerns
it alone. Bad requests are refused before anything reaches the device and never take their batch-mates
down. A device failure rebuilds the lane it hit; when the failed execute held several requests they run
again in halves, so that only a request that fails on its own is failed (a bounded search, counted in
``EngineStats.isolation_executes``). A lane that cannot be rebuilt is tried again with a bounded backoff
while the others serve; with none left, requests get UnavailableError until one comes back. After start-up
nothing is allocated per request on the device or in pinned memory.
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence

import attrs

from ge_plugin import device
from ge_plugin import fastpath as fp
from ge_plugin.engine.binding import Binding
from ge_plugin.engine.config import ServingConfig
from ge_plugin.engine.gears import Gear
from ge_plugin.engine.lane import InFlight, Lane
from ge_plugin.engine.stats import EngineStats
from ge_plugin.errors import GePluginError, RequestError, UnavailableError

log = logging.getLogger("ge_plugin.engine")

#: a lane that could not be rebuilt is tried again after this long, doubling with every failure up to the cap
RECOVERY_FIRST_S = 0.1
RECOVERY_MAX_S = 10.0

#: one request's place in a chunk: its index in execute()'s batch, and its arrays in the OM's input order
Entry = tuple[int, Sequence]


def detached(exc: BaseException) -> BaseException:
    """``exc`` without its traceback and chained exceptions.

    Results outlive the call that produced them; a traceback would keep every frame of that call alive, and
    with them the request arrays (views of Triton's shared memory) and the results list itself, in a cycle
    only the garbage collector can break."""
    exc.__traceback__ = None
    exc.__context__ = None
    exc.__cause__ = None
    return exc


@attrs.define
class Recovery:
    """A lane that could not be rebuilt: how often it failed, why last, and when to try again."""

    failures: int
    reason: str
    retry_at: float


def device_for_instance(instance_name: str, device_ids: Sequence[int]) -> int:
    """The device an instance runs on.

    The renderer names one instance group per device (``npu0``, ``npu1``…), and Triton names its instances
    ``<group>_<n>``; an unnamed group's instances are ``<model>_<group index>_<n>`` and are spread over
    ``device_ids`` by group index.
    """
    ids = list(device_ids) or [0]
    match = re.fullmatch(r"npu(\d+)_\d+", instance_name or "")
    if match:
        return int(match.group(1))
    match = re.fullmatch(r".*_(\d+)_\d+", instance_name or "")
    if match:
        return ids[int(match.group(1)) % len(ids)]
    return ids[0]


class Engine:
    """Serves one OM model on one device with ``streams_per_instance`` lanes."""

    def __init__(
        self,
        config: ServingConfig,
        *,
        om_path: str | os.PathLike,
        device_id: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.config = config
        self.om_path = os.fspath(om_path)
        self.device_id = device_id
        self.stats = EngineStats()
        self.lanes: list[Lane] = []
        self.context: device.Context | None = None
        #: lane index -> its recovery, for lanes that could not be rebuilt yet
        self.recovering: dict[int, Recovery] = {}
        self._clock = clock
        self._next_lane = 0
        self._closed = False
        device.acquire(config.params.acl_json)
        try:
            self.context = device.Context(device_id)
            for _ in range(config.params.streams_per_instance):
                self.lanes.append(Lane(self.context, self.om_path))
            self.binding = Binding(config, self.om_path, self.lanes[0])
            self.gears = self.binding.gears
            #: start-up warnings about a config that serves but may surprise (the backend logs them)
            self.warnings = list(self.binding.warnings)
            for warning in self.warnings:
                log.warning("%s", warning)
            self.stats.device_bytes = sum(lane.device_bytes for lane in self.lanes)
            self.stats.pinned_bytes = sum(lane.pinned_bytes for lane in self.lanes)
            self._warm_up()
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_model_config(
        cls,
        model_config: Mapping,
        *,
        version_dir: str | os.PathLike,
        instance_name: str = "",
        device_id: int | None = None,
    ) -> Engine:
        """Build from Triton's model config mapping; a relative OM path is under ``version_dir``.

        ``version_dir`` is Triton's ``<model>/<version>``: its name picks the version's own OM when
        ``version_om_model_paths`` lists one, else ``om_model_path``.
        """
        config = ServingConfig.from_model_config(model_config)
        version = os.path.basename(os.path.normpath(os.fspath(version_dir)))
        om_path = os.path.join(
            os.fspath(version_dir), os.path.expanduser(config.params.om_model_path_for(version))
        )
        if device_id is None:
            device_id = device_for_instance(instance_name, config.params.device_ids)
        return cls(config, om_path=om_path, device_id=device_id)

    def _warm_up(self) -> None:
        """Run every gear ``warmup`` times on zeros, so first-run costs are not paid by a request."""
        for lane in self.lanes:
            for _ in range(self.config.params.warmup):
                for gear in self.gears.gears:
                    lane.launch(
                        gear,
                        self.binding.in_bytes[gear.index],
                        self.binding.out_index,
                        self.binding.out_bytes[gear.index],
                    )
                    lane.wait()

    # -- serving -------------------------------------------------------------------------------------

    @property
    def input_names(self) -> list[str]:
        return [io.name for io in self.binding.in_cfg]

    @property
    def output_names(self) -> list[str]:
        return [io.name for io in self.binding.out_cfg]

    def execute(
        self,
        requests: Sequence[Mapping[str, object]],
        requested_outputs: Sequence[Collection[str] | None] | None = None,
    ) -> list:
        """Per request: a dict of output name -> array, or the GePluginError that concerns it alone.

        ``requested_outputs[i]`` limits request i to those outputs (None: all); an output nobody in an
        execute asked for is not even copied back from the device. Errors come without their tracebacks
        (see ``detached``).
        """
        if self._closed:
            raise GePluginError(f"model {self.config.name!r}: the engine is closed")
        n = len(requests)
        stats = self.stats
        stats.requests += n
        results: list = [None] * n
        self.context.make_current()
        if self.recovering:
            self._recover_due()
        wanted = self._wanted(requested_outputs, n)
        validate = fp.validate
        specs = self.binding.specs
        chunk: list[Entry] = []
        need: tuple[int, ...] = ()
        for i, request in enumerate(requests):
            try:
                arrays = validate(specs, request)
            except RequestError as exc:
                results[i] = detached(exc)
                stats.request_errors += 1
                continue
            own = self._need(arrays)
            if chunk:
                merged = self._merge(need, own) if self.config.batched else None
                if merged is not None and self.gears.choose(merged) is not None:
                    chunk.append((i, arrays))
                    need = merged
                    continue
            if self.gears.choose(own) is None:
                results[i] = self._uncovered(arrays)
                stats.request_errors += 1
                continue
            if chunk:
                self._dispatch(chunk, need, wanted, results)
            chunk, need = [(i, arrays)], own
        if chunk:
            self._dispatch(chunk, need, wanted, results)
        self._drain(results)
        return results

    def _wanted(self, requested_outputs, n: int) -> list[list[int]] | None:
        b = self.binding
        if requested_outputs is None:
            return None
        everything = list(range(len(b.out_cfg)))
        out = []
        for i in range(n):
            names = requested_outputs[i] if i < len(requested_outputs) else None
            if names is None:
                out.append(everything)
            else:
                out.append(sorted(b.out_pos[name] for name in names if name in b.out_pos))
        return out

    def _need(self, arrays: Sequence) -> tuple[int, ...]:
        """Flat minimum dims (all inputs) for one request alone."""
        return tuple(d for a in arrays for d in a.shape)

    def _merge(self, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
        """Two requests' needs together: rows add up, every other dim takes the longer."""
        rows_at = self.binding.rows_at
        return tuple((x + y) if row else (x if x >= y else y) for x, y, row in zip(a, b, rows_at))

    def _uncovered(self, arrays: Sequence) -> RequestError:
        b = self.binding
        shapes = ", ".join(f"{io.name} {list(a.shape)}" for io, a in zip(b.in_cfg, arrays))
        gears = "; ".join(g.label for g in self.gears.gears)
        return RequestError(f"no gear of the model fits this request ({shapes}); the model's gears: {gears}")

    # -- running chunks on lanes ---------------------------------------------------------------------

    def _dispatch(self, chunk: list[Entry], need: tuple[int, ...], wanted, results: list) -> None:
        """Start ``chunk`` on the next lane that can run it; its results come in ``_finish``."""
        lane = self._take_lane(results)
        if lane is None:
            self._fail_all(chunk, self._unavailable(), results)
            return
        job = self._job(chunk, need, wanted)
        try:
            self._start(lane, job)
        except (GePluginError, ValueError) as exc:
            self._failed(lane, job, exc, wanted, results)
            return
        lane.pending = job

    def _take_lane(self, results: list) -> Lane | None:
        """The next usable lane in turn, with whatever it was running finished first; None if no lane is
        usable. Finishing may rebuild the lane (the same object), so the lane is looked at only after."""
        for _ in range(len(self.lanes)):
            lane = self.lanes[self._next_lane]
            self._next_lane = (self._next_lane + 1) % len(self.lanes)
            if lane.pending is not None:
                self._finish(lane, results)
            if lane.usable:
                return lane
        return None

    def _drain(self, results: list) -> None:
        for lane in self.lanes:
            if lane.pending is not None:
                self._finish(lane, results)

    def _job(self, chunk: list[Entry], need: tuple[int, ...], wanted) -> InFlight:
        gear = self.gears.choose(need)
        if wanted is None:
            out_sel = list(range(len(self.binding.out_cfg)))
        else:
            out_sel = sorted({k for i, _ in chunk for k in wanted[i]})
        return InFlight(chunk, need, gear, out_sel, wanted)

    def _start(self, lane: Lane, job: InFlight) -> None:
        """Gather the chunk into the lane's staging and queue copies and the execute."""
        b = self.binding
        gear = job.gear
        chunk = job.chunk
        in_bytes = b.in_bytes[gear.index]
        pad = self.config.params.pad_value
        for k, host in enumerate(lane.in_host):
            fp.gather(
                host.array,
                gear.input_dims[k],
                b.in_om_type[k],
                [a[k] for _, a in chunk],
                b.in_type[k],
                pad,
            )
        out_bytes = self._d2h_bytes(gear, job.need, job.out_sel)
        job.started = time.perf_counter()
        lane.launch(gear, in_bytes, [b.out_index[k] for k in job.out_sel], out_bytes)
        stats = self.stats
        stats.executes += 1
        stats.executes_by_gear[gear.label] = stats.executes_by_gear.get(gear.label, 0) + 1
        rows = job.need[0] if self.config.batched else gear.rows
        stats.rows += rows
        stats.padded_rows += gear.rows - rows
        stats.padded_elements += gear.cost - sum(a.size for _, arrays in chunk for a in arrays)
        stats.h2d_bytes += sum(in_bytes)
        stats.d2h_bytes += sum(out_bytes)

    def _d2h_bytes(self, gear: Gear, need: tuple[int, ...], out_sel: list[int]) -> list[int]:
        """Bytes to copy back per selected output: only the rows requests brought, not the batch padding
        (batch is dim 0 and outputs are row-major, so those rows are a prefix of the device buffer)."""
        b = self.binding
        full = b.out_bytes[gear.index]
        if not self.config.batched or need[0] >= gear.rows:
            return [full[k] for k in out_sel]
        rows = [gear.output_dims[b.out_index[k]][0] for k in out_sel]
        return [full[k] // gear.rows * need[0] if n == gear.rows else full[k] for k, n in zip(out_sel, rows)]

    def _finish(self, lane: Lane, results: list) -> None:
        job = lane.pending
        lane.pending = None
        try:
            self._complete(lane, job, results)
        except (GePluginError, ValueError) as exc:
            self._failed(lane, job, exc, job.wanted, results)

    def _complete(self, lane: Lane, job: InFlight, results: list) -> None:
        """Wait for the execute and split its outputs to the requests; raises what failed."""
        lane.wait()
        self.stats.observe_execute((time.perf_counter() - job.started) * 1e6)
        b = self.binding
        batched = self.config.batched
        chunk = job.chunk
        gear = job.gear
        wanted = job.wanted
        outputs: list[dict] = [{} for _ in chunk]
        for k in job.out_sel:
            j = b.out_index[k]
            gear_dims = gear.output_dims[j]
            ties = b.ties[k]
            rows = []
            shapes = []
            for _, arrays in chunk:
                dims = list(gear_dims)
                for out_d, in_k, in_d in ties:
                    dims[out_d] = arrays[in_k].shape[in_d]
                rows.append(arrays[0].shape[0] if batched else dims[0])
                shapes.append(tuple(dims[1:]))
            try:
                outs = fp.scatter(
                    lane.out_host[j].array, gear_dims, b.out_om_type[k], b.out_type[k], rows, shapes
                )
            except ValueError as exc:
                raise GePluginError(f"output {b.out_cfg[k].name!r}: {exc}") from None
            name = b.out_cfg[k].name
            for (i, _), mine, out in zip(chunk, outputs, outs):
                if wanted is None or k in wanted[i]:
                    mine[name] = out
        for (i, _), mine in zip(chunk, outputs):
            results[i] = mine

    # -- failures ------------------------------------------------------------------------------------

    def _failed(self, lane: Lane, job: InFlight, exc: BaseException, wanted, results: list) -> None:
        """A chunk failed on ``lane``: rebuild the lane, then find which of its requests fail on their own."""
        error = detached(exc if isinstance(exc, GePluginError) else GePluginError(str(exc)))
        log.warning(
            "model %s: an execute of %d request(s) failed (%s); rebuilding the lane",
            self.config.name,
            len(job.chunk),
            error,
        )
        self._rebuild(lane)
        if len(job.chunk) == 1:
            self._fail_all(job.chunk, error, results)
            return
        step = 2 * math.ceil(math.log2(len(job.chunk)))
        budget = [step, step]  # executes left, and what each request found failing on its own adds
        self._drain(results)
        self._bisect(job.chunk, error, wanted, results, budget)

    def _bisect(self, group: list[Entry], error: GePluginError, wanted, results: list, budget: list[int]):
        """``group`` failed as a whole: run each half again and search a half that fails again, so that a
        request fails only if it fails on its own. A fault that does not come back costs 2 extra executes, a
        single bad request among n 2·ceil(log2 n), k bad ones at most k times that (never more than the
        whole halving tree, 2n - 2). ``budget`` enforces it: spent, what is left fails with the error it
        shared."""
        half = len(group) // 2
        for part in (group[:half], group[half:]):
            failed = self._rerun(part, error, wanted, results, budget)
            if failed is None:
                continue
            # not searched further: one request, no lane left, or (``error`` itself) the budget is spent
            if len(part) == 1 or isinstance(failed, UnavailableError) or failed is error:
                self._fail_all(part, failed, results)
                if len(part) == 1 and failed is not error:
                    budget[0] += budget[1]
            else:
                self._bisect(part, failed, wanted, results, budget)

    def _rerun(
        self, group: list[Entry], error: GePluginError, wanted, results: list, budget: list[int]
    ) -> GePluginError | None:
        """Run ``group`` now and wait for it: None when its results are filled, else why it failed (its lane
        rebuilt). With the budget spent it is not run and fails with ``error``, the failure it shared;
        with no usable lane left, with UnavailableError."""
        lane = next((lane for lane in self.lanes if lane.usable), None)
        if lane is None:
            return self._unavailable()
        if budget[0] <= 0:
            return error
        budget[0] -= 1
        self.stats.isolation_executes += 1
        need = self._need(group[0][1])
        for _, arrays in group[1:]:
            need = self._merge(need, self._need(arrays))
        job = self._job(group, need, wanted)
        try:
            self._start(lane, job)
            self._complete(lane, job, results)
        except (GePluginError, ValueError) as exc:
            error = detached(exc if isinstance(exc, GePluginError) else GePluginError(str(exc)))
            self._rebuild(lane)
            return error
        return None

    def _fail_all(self, chunk: Sequence[Entry], error: GePluginError, results: list) -> None:
        for i, _ in chunk:
            results[i] = error
        self.stats.device_errors += len(chunk)

    # -- recovery ------------------------------------------------------------------------------------

    def _rebuild(self, lane: Lane) -> None:
        """Close the lane a device failure hit and load it again; see ``_reopen`` for a failed load."""
        try:
            lane.close()
        except GePluginError as exc:
            log.warning("model %s: closing the failed lane: %s", self.config.name, exc)
        self._reopen(lane)

    def _reopen(self, lane: Lane) -> None:
        index = next(k for k, candidate in enumerate(self.lanes) if candidate is lane)
        stats = self.stats
        try:
            lane.open()
        except GePluginError as exc:
            recovery = self.recovering.get(index) or Recovery(0, "", 0.0)
            recovery.failures += 1
            recovery.reason = str(detached(exc))
            delay = min(RECOVERY_MAX_S, RECOVERY_FIRST_S * 2 ** (recovery.failures - 1))
            recovery.retry_at = self._clock() + delay
            self.recovering[index] = recovery
            stats.lane_rebuild_failures += 1
            log.error(
                "model %s: lane %d could not be rebuilt (attempt %d: %s); trying again in %.1f s",
                self.config.name,
                index,
                recovery.failures,
                recovery.reason,
                delay,
            )
        else:
            stats.lane_rebuilds += 1
            recovery = self.recovering.pop(index, None)
            if recovery is not None:
                log.warning(
                    "model %s: lane %d is back after %d failed rebuilds",
                    self.config.name,
                    index,
                    recovery.failures,
                )
        stats.lanes_down = len(self.recovering)

    def _recover_due(self) -> None:
        """Try again every lane whose backoff has passed; called at the start of an execute."""
        now = self._clock()
        for index, recovery in list(self.recovering.items()):
            if now >= recovery.retry_at:
                self._reopen(self.lanes[index])

    def _unavailable(self) -> UnavailableError:
        """What requests get while no lane can run: why, and when the next attempt is."""
        soonest = min(self.recovering.values(), key=lambda r: r.retry_at)
        wait = max(0.0, soonest.retry_at - self._clock())
        return UnavailableError(
            f"model {self.config.name!r}: the instance on device {self.device_id} is recovering from a device "
            f"failure: rebuilding its model failed {soonest.failures} time(s), last with: {soonest.reason}; "
            f"the next attempt is in {wait:.1f} s"
        )

    def close(self) -> None:
        """Free everything in the reference's order. A second close is harmless."""
        if self._closed:
            return
        self._closed = True
        errors: list[BaseException] = []
        for lane in self.lanes:
            try:
                lane.close()
            except BaseException as exc:
                errors.append(exc)
        self.lanes = []
        if self.context is not None:
            try:
                self.context.close()
            except BaseException as exc:
                errors.append(exc)
            self.context = None
        device.release()
        if errors:
            raise errors[0]

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
