"""One model instance on one device: everything allocated at start, requests gathered into gears.

``Engine.execute(requests)`` takes what Triton's dynamic batcher grouped (a list of requests, each a
mapping of input name to an array-like) and returns, per request, its outputs or the error that concerns
it alone. ``Engine.submit(requests, ..., put)`` does the same without waiting: it returns once every batch
is on the device, and a completion thread hands each request's outcome to ``put`` when its batch is done,
so that the next batch can be gathered and started on another lane meanwhile (``streams_per_instance``).

Bad requests are refused before anything reaches the device and never take their batch-mates down. A
device failure rebuilds the lane it hit; when the failed execute held several requests they run again in
halves, so that only a request that fails on its own is failed (a bounded search, counted in
``EngineStats.isolation_executes``). A lane that cannot be rebuilt is tried again with a bounded backoff
while the others serve; with none left, requests get UnavailableError until one comes back. After start-up
nothing is allocated per request on the device or in pinned memory.
"""

from __future__ import annotations

import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TypeVar

import numpy as np

from ge_plugin import device
from ge_plugin.engine.binding import Binding
from ge_plugin.engine.completion import Completion
from ge_plugin.engine.config import ServingConfig
from ge_plugin.engine.lane import InFlight, Lane, Put
from ge_plugin.engine.recovery import Recoveries
from ge_plugin.engine.stats import EngineStats, ExecuteTally
from ge_plugin.errors import GePluginError, UnavailableError

log = logging.getLogger("ge_plugin.engine")

#: one request of a chunk: its place in the chunk, and its arrays in the OM's input order
Entry = tuple[int, Sequence[np.ndarray]]


_E = TypeVar("_E", bound=BaseException)


def detached(exc: _E) -> _E:
    """``exc`` without its traceback and chained exceptions.

    Results outlive the call that produced them; a traceback would keep every frame of that call alive, and
    with them the request arrays (views of Triton's shared memory) and the results list itself, in a cycle
    only the garbage collector can break."""
    exc.__traceback__ = None
    exc.__context__ = None
    exc.__cause__ = None
    return exc


def as_error(exc: BaseException) -> GePluginError:
    """What a failed execute hands its requests: the GePluginError itself (an ACL error, say) or one that
    carries the message of anything else (a ValueError from a copy), detached."""
    return detached(exc if isinstance(exc, GePluginError) else GePluginError(str(exc)))


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
        #: lanes a device failure left unusable, with when to try each again
        self.recovering = Recoveries(clock)
        self._next_lane = 0
        self._closed = False
        #: guards lane ownership and the stats between the caller's thread and the completion thread; taken
        #: as the RLock itself on the request path (a Condition's own ``with`` is two Python calls more)
        self._mutex = threading.RLock()
        self._lock = threading.Condition(self._mutex)
        #: threads waiting on ``_lock`` for a lane to be freed (``_release`` notifies only when there are)
        self._waiting = 0
        #: submitted executes on the device, and the lane holding a staged chunk open meanwhile (``_hold``)
        self._running = 0
        self._open: Lane | None = None
        self._completion: Completion | None = None
        device.acquire(config.params.acl_json)
        try:
            self.context = device.Context(device_id)
            for _ in range(config.params.streams_per_instance):
                self.lanes.append(Lane(self.context, self.om_path, self.stats.busy))
            self.binding = Binding(config, self.om_path, self.lanes[0])
            self.gears = self.binding.gears
            #: every execute's bookkeeping (validate, group, gear, gather, split, counting), compiled
            self.planner = self.binding.planner()
            self.stats.tally = ExecuteTally(self.planner.tally, self.gears.gears, self.planner.h2d_bytes())
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
                for position in range(len(self.gears)):
                    lane.launch(*self.planner.launch_of(position))
                    lane.wait()

    # -- serving -------------------------------------------------------------------------------------

    @property
    def input_names(self) -> list[str]:
        return [tensor.name for tensor in self.binding.inputs]

    @property
    def output_names(self) -> list[str]:
        return [tensor.name for tensor in self.binding.outputs]

    def execute(
        self,
        requests: Sequence[Mapping[str, object]],
        requested_outputs: Sequence[Collection[str] | None] | None = None,
        *,
        views: bool = False,
    ) -> list:
        """Per request: a dict of output name -> array, or the GePluginError that concerns it alone.

        ``requested_outputs[i]`` limits request i to those outputs (None: all); an output nobody in an
        execute asked for is not even copied back from the device. Errors come without their tracebacks
        (see ``detached``). With ``views``, outputs may be views of the engine's staging memory, valid until
        the next call or ``close()``: Triton's stub copies responses before it calls ``execute`` again.
        """
        self._check_open()
        if self._completion is not None:  # submitted batches are the completion thread's to finish
            self.wait_idle()
        results: list = [None] * len(requests)
        for lane in self.lanes:  # only this call's thread lends views: no lock
            if lane.lent:
                lane.lent.clear()  # the previous call's responses have been copied by now
        self._run(requests, requested_outputs, results.__setitem__, views, synchronous=True)
        return results

    def submit(
        self,
        requests: Sequence[Mapping[str, object]],
        requested_outputs: Sequence[Collection[str] | None] | None,
        put: Put,
    ) -> None:
        """Start ``requests`` and return once every batch of them is on the device (or refused).

        ``put(i, outcome)`` receives request i's outputs or error: from this thread for a request refused
        before the device, from the completion thread otherwise. Outputs may be views of staging memory,
        valid until ``put`` returns; the caller copies (Triton's response sender does, before ``send``
        returns). The request arrays are not read after this returns: Triton frees them then."""
        context = self._check_open()
        if self._completion is None:
            self._completion = Completion(context, self._finish)
        self._run(requests, requested_outputs, put, True, synchronous=False)

    def device_memory(self) -> tuple[int, int]:
        """(free, total) bytes of this instance's device, every process's use included."""
        return device.memory_info(self.device_id)

    def wait_idle(self) -> None:
        """Until every submitted batch is answered."""
        with self._mutex:
            self._waiting += 1
            try:
                self._lock.wait_for(lambda: all(lane.pending is None for lane in self.lanes))
            finally:
                self._waiting -= 1

    def _check_open(self) -> device.Context:
        """The engine's context, or GePluginError once it is closed."""
        if self._closed or self.context is None:
            raise GePluginError(f"model {self.config.name!r}: the engine is closed")
        return self.context

    def _run(self, requests, requested_outputs, put: Put, views: bool, *, synchronous: bool) -> None:
        """Plan the window (one compiled call), answer the refused requests, run each chunk on a lane."""
        stats = self.stats
        self._check_open().make_current()
        if len(self.recovering):
            for index in self.recovering.due():
                with self._mutex:
                    self._reopen(self.lanes[index])
        chunks, refused = self.planner.plan(requests, requested_outputs)
        stats.requests += len(requests)
        if refused:
            stats.request_errors += len(refused)
            for index, error in refused:
                put(index, error)
        keep_views = views and synchronous
        for chunk in chunks:
            self._dispatch(InFlight(chunk, put, views, keep_views, queued=not synchronous), synchronous)
        if synchronous:
            for lane in self.lanes:
                if lane.pending is not None:
                    self._finish(lane)

    # -- running chunks on lanes ---------------------------------------------------------------------

    def _dispatch(self, job: InFlight, synchronous: bool) -> None:
        """Start ``job`` on the next lane that can run it; its outcomes come from ``_finish``.

        A submitted job (not ``synchronous``) first tries to join the chunk a lane holds open (``_join``);
        if it does not fit, it is staged on a free lane and either launched or, while the device is busy
        with another lane's execute, held open itself (``_hold``) to take the requests that come meanwhile."""
        if not synchronous and self._join(job):
            return
        lane = self._take_lane(job, synchronous)
        if lane is None:
            self._fail_all(job, self._unavailable())
            return
        try:
            lane.reclaim()
            self.planner.stage(job.chunk, lane.in_arrays)
            if synchronous:
                self._launch(lane, job)
            else:
                with self._mutex:
                    if not self._hold(lane, job):
                        self._launch(lane, job)
        except (GePluginError, ValueError) as exc:
            self._failed(lane, job, exc)
            self._release(lane)
            return
        if not synchronous:
            job.chunk.arrays = None  # gathered; Triton frees them once submit() returns

    def _hold(self, lane: Lane, job: InFlight) -> bool:
        """Keep ``job`` (staged on ``lane``) open instead of launching it, while another lane's execute keeps
        the device busy: Triton keeps handing over requests meanwhile (``submit`` returns at once), and those
        that fit join it (``_join``). It is launched when the device has nothing else (``_device_free``) or
        once it is full. Without this, a lane freed by one answered batch takes whatever is queued at that
        instant, before the clients it answered have sent again, and the device runs part-empty batches.
        Called with the mutex held."""
        if not (self._running and self._open is None and self.config.batched):
            return False
        if job.chunk.rows >= self.gears.max_rows:
            return False  # full already: nothing could join it
        self._open = lane
        return True

    def _join(self, job: InFlight) -> bool:
        """Add ``job``'s requests to the chunk held open, when a gear takes them all without moving the rows
        staged already: only theirs are gathered, after those. A full chunk is launched at once."""
        with self._mutex:
            lane = self._open
            if lane is None or lane.pending is None:
                return False
            held = lane.pending
            merged = self.planner.extend(held.chunk, job.chunk)
            if merged is None:
                return False
            try:
                self.planner.stage(merged, lane.in_arrays, len(held.chunk.indices))
            except ValueError as exc:
                # only the newcomers' rows and the padding after the held rows (never read back) were
                # written: the held chunk is as it was, the newcomers fail alone
                self._fail_all(job, as_error(exc))
                return True
            held.absorb(merged, job)
            job.chunk.arrays = None  # gathered; Triton frees them once submit() returns
            if merged.rows >= self.gears.max_rows:
                self._launch_open()
            return True

    def _launch(self, lane: Lane, job: InFlight) -> None:
        """Queue the staged chunk's copies and execute on ``lane``, and count the execute. A submitted job is
        then the completion thread's to finish (called with the mutex held, so that jobs reach it in the
        order they reach the device)."""
        chunk = job.chunk
        gear = self.gears.gears[chunk.gear]
        job.started = time.perf_counter()
        lane.launch(gear, chunk.in_bytes, chunk.out_index, chunk.out_bytes)
        self.planner.count(chunk)
        if job.queued:
            self._running += 1
            assert self._completion is not None  # submit() made it
            self._completion.push(lane)

    def _launch_open(self) -> None:
        """Launch the chunk held open, if any (called with the mutex held)."""
        lane, self._open = self._open, None
        if lane is None or lane.pending is None:
            return
        job = lane.pending
        try:
            self._launch(lane, job)
        except (GePluginError, ValueError) as exc:
            self._failed(lane, job, exc)
            self._release(lane)

    def _device_free(self, job: InFlight) -> None:
        """A submitted execute is done on the device: when no other is in flight, launch the chunk held open,
        which has taken every request that came meanwhile."""
        if not job.queued:
            return
        with self._mutex:
            self._running -= 1
            if not self._running:
                self._launch_open()

    def _take_lane(self, job: InFlight, synchronous: bool) -> Lane | None:
        """The next usable lane, now ``job``'s (``pending``, until ``_release``); None if no lane is usable.

        Synchronously, a lane still running is finished first, in this thread. Otherwise this waits until
        the completion thread frees one."""
        with self._mutex:
            while True:
                for _ in range(len(self.lanes)):
                    lane = self.lanes[self._next_lane]
                    self._next_lane = (self._next_lane + 1) % len(self.lanes)
                    if lane.pending is not None and synchronous:
                        self._finish(lane)
                    if lane.pending is None and lane.usable:
                        lane.pending = job
                        return lane
                if synchronous or all(lane.pending is None for lane in self.lanes):
                    return None  # no lane is usable, and none is about to be freed
                self._waiting += 1
                try:
                    self._lock.wait()
                finally:
                    self._waiting -= 1

    def _start(self, lane: Lane, job: InFlight) -> None:
        """Gather the chunk into the lane's staging (one compiled call) and launch it."""
        lane.reclaim()
        self.planner.stage(job.chunk, lane.in_arrays)
        self._launch(lane, job)

    def _finish(self, lane: Lane) -> None:
        """Wait for the lane's job, answer its requests (or find which fail), then free the lane."""
        job = lane.pending
        if job is None:
            return
        try:
            try:
                lane.wait()
            finally:
                self._device_free(job)
            self._answer(lane, job)
        except (GePluginError, ValueError) as exc:
            self._failed(lane, job, exc)
        finally:
            self._release(lane)

    def _release(self, lane: Lane) -> None:
        """The lane is free for the next job: wake whoever waits for one (``_take_lane``, ``wait_idle``)."""
        with self._mutex:
            lane.pending = None
            if self._waiting:
                self._lock.notify_all()

    def _complete(self, lane: Lane, job: InFlight) -> None:
        """Wait for the execute and answer its requests; raises what failed."""
        lane.wait()
        self._answer(lane, job)

    def _answer(self, lane: Lane, job: InFlight) -> None:
        """Split the execute's outputs to its requests (one compiled call) and hand each its own."""
        micros = (time.perf_counter() - job.started) * 1e6
        with self._mutex:
            self.stats.observe_execute(micros)
        chunk = job.chunk
        answers, lent = self.planner.split(chunk, lane.out_arrays, job.views)
        if job.targets is None:
            put = job.put
            for index, mine in zip(chunk.indices, answers):
                put(index, mine)
        else:
            for (put, index), mine in zip(job.targets, answers):
                put(index, mine)
        if lent and job.keep_views:
            lane.lent.extend(answers)  # the caller keeps them: copied before the staging is written again

    # -- failures ------------------------------------------------------------------------------------

    def _failed(self, lane: Lane, job: InFlight, exc: BaseException) -> None:
        """A job failed on ``lane``: rebuild the lane, then find which of its requests fail on their own.

        The requests' inputs are taken back out of the lane's staging first (gathered there, untouched
        since): in Triton the request memory may already be gone, and rebuilding frees the staging."""
        error = as_error(exc)
        chunk = job.chunk
        log.warning(
            "model %s: an execute of %d request(s) failed (%s); rebuilding the lane",
            self.config.name,
            len(chunk.indices),
            error,
        )
        if len(chunk.indices) == 1:
            self._rebuild(lane)
            self._fail_all(job, error)
            return
        entries: list[Entry]
        if chunk.arrays is not None and all(arrays is not None for arrays in chunk.arrays):
            entries, staged = list(enumerate(chunk.arrays)), chunk.staged
        else:
            entries, staged = self.planner.unstage(chunk, lane.in_arrays), True
        self._rebuild(lane)
        step = 2 * math.ceil(math.log2(len(entries)))
        budget = [step, step]  # executes left, and what each request found failing on its own adds
        self._bisect(lane, job, entries, staged, error, budget)

    def _bisect(
        self,
        lane: Lane,
        job: InFlight,
        group: list[Entry],
        staged: bool,
        error: GePluginError,
        budget: list[int],
    ) -> None:
        """``group`` failed as a whole: run each half again and search a half that fails again, so that a
        request fails only if it fails on its own. A fault that does not come back costs 2 extra executes, a
        single bad request among n 2·ceil(log2 n), k bad ones at most k times that (never more than the
        whole halving tree, 2n - 2). ``budget`` enforces it: spent, what is left fails with the error it
        shared."""
        half = len(group) // 2
        for part in (group[:half], group[half:]):
            failed = self._rerun(lane, job, part, staged, error, budget)
            if failed is None:
                continue
            # not searched further: one request, no lane left, or (``error`` itself) the budget is spent
            if len(part) == 1 or isinstance(failed, UnavailableError) or failed is error:
                self._fail_all(job, failed, [i for i, _ in part])
                if len(part) == 1 and failed is not error:
                    budget[0] += budget[1]
            else:
                self._bisect(lane, job, part, staged, failed, budget)

    def _rerun(
        self,
        lane: Lane,
        job: InFlight,
        group: list[Entry],
        staged: bool,
        error: GePluginError,
        budget: list[int],
    ) -> GePluginError | None:
        """Run ``group`` now on ``lane`` (rebuilt) and wait for it: None when its requests are answered, else
        why it failed (the lane rebuilt again). With the budget spent it is not run and fails with
        ``error``, the failure it shared; with the lane not rebuilt, with UnavailableError."""
        if not lane.usable:
            return self._unavailable()
        if budget[0] <= 0:
            return error
        budget[0] -= 1
        with self._mutex:
            self.stats.isolation_executes += 1
        members = [m for m, _ in group]
        wanted = job.chunk.wanted
        if wanted is not None:
            wanted = [wanted[m] for m in members]
        try:
            part = self.planner.chunk(members, [arrays for _, arrays in group], wanted, staged=staged)
            rerun = InFlight(part, job.deliver, job.views, job.keep_views)
            self._start(lane, rerun)
            self._complete(lane, rerun)
        except (GePluginError, ValueError) as exc:
            self._rebuild(lane)
            return as_error(exc)
        return None

    def _fail_all(self, job: InFlight, error: GePluginError, members: Sequence[int] | None = None) -> None:
        """``error`` to the requests at these places of the job's chunk (all of them by default)."""
        members = range(len(job.chunk.indices)) if members is None else members
        with self._mutex:
            self.stats.device_errors += len(members)
        for member in members:
            job.deliver(member, error)

    # -- recovery ------------------------------------------------------------------------------------

    def _rebuild(self, lane: Lane) -> None:
        """Close the lane a device failure hit and load it again (it stays its job's); see ``_reopen``."""
        try:
            lane.close()
        except GePluginError as exc:
            log.warning("model %s: closing the failed lane: %s", self.config.name, exc)
        with self._mutex:
            self._reopen(lane)

    def _reopen(self, lane: Lane) -> None:
        """Load a closed lane again; a failure is retried with a doubling wait (``recovery``)."""
        index = next(k for k, candidate in enumerate(self.lanes) if candidate is lane)
        stats = self.stats
        try:
            lane.open()
        except GePluginError as exc:
            recovery = self.recovering.failed(index, str(detached(exc)))
            stats.lane_rebuild_failures += 1
            log.error(
                "model %s: lane %d could not be rebuilt (attempt %d: %s); trying again in %.1f s",
                self.config.name,
                index,
                recovery.failures,
                recovery.reason,
                self.recovering.delay(recovery.failures),
            )
        else:
            stats.lane_rebuilds += 1
            was_down = self.recovering.recovered(index)
            if was_down is not None:
                log.warning(
                    "model %s: lane %d is back after %d failed rebuilds",
                    self.config.name,
                    index,
                    was_down.failures,
                )
        stats.lanes_down = len(self.recovering)

    def _unavailable(self) -> UnavailableError:
        """What requests get while no lane can run: why, and when the next attempt is."""
        soonest = self.recovering.soonest()
        if soonest is None:
            return UnavailableError(f"model {self.config.name!r}: no lane of the instance can run requests")
        recovery, wait = soonest
        return UnavailableError(
            f"model {self.config.name!r}: the instance on device {self.device_id} is recovering from a device "
            f"failure: rebuilding its model failed {recovery.failures} time(s), last with: {recovery.reason}; "
            f"the next attempt is in {wait:.1f} s"
        )

    def close(self) -> None:
        """Answer what is in flight, then free everything in the reference's order. A second close is
        harmless."""
        if self._closed:
            return
        self._closed = True
        errors: list[BaseException] = []
        if self._completion is not None:
            self.wait_idle()
            self._completion.stop()
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
