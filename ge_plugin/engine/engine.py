"""One model instance on one device: everything allocated at start, requests gathered into gears.

``Engine.execute(requests)`` takes what Triton's dynamic batcher grouped (per request, input name -> array)
and returns, per request, its outputs or the error that concerns it alone; ``Engine.submit(requests, ...,
put)`` returns once every batch is on the device and a completion thread hands each answer to ``put``, so the
next batch is gathered meanwhile (``Engine.answers_later()`` says which to call). Bad requests are refused
before the device and never take their batch-mates down; a device failure fails only the requests that fail
on their own (``failures``); a lane that cannot be rebuilt is retried while the others serve (``recovery``).
Nothing is allocated per request after start-up. This module is the bookkeeping between the planner (requests
into chunks), the scheduler (which lane) and the image stage (``preprocess``: JPEGs admitted before planning,
decoded per lane, an image DVPP fails on failing its request alone): it stages, launches, waits and answers.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import cast

from ge_plugin import device
from ge_plugin import fastpath as fp
from ge_plugin.engine.binding import Binding
from ge_plugin.engine.completion import Completion
from ge_plugin.engine.config import ServingConfig, device_for_instance
from ge_plugin.engine.failures import Failures, as_error
from ge_plugin.engine.lane import Answer, InFlight, Lane, Put
from ge_plugin.engine.modes import Answering, Lifetime, Mode
from ge_plugin.engine.planner import Planner
from ge_plugin.engine.preprocess import Images
from ge_plugin.engine.recovery import Rebuilder
from ge_plugin.engine.scheduler import Scheduler
from ge_plugin.engine.stats import EngineStats, ExecuteTally
from ge_plugin.errors import GePluginError

log = logging.getLogger("ge_plugin.engine")

_UNTIL_PUT_RETURNS = Lifetime.UNTIL_PUT_RETURNS


class Engine:
    """Serves one OM model on one device with ``streams_per_instance`` lanes."""

    def __init__(
        self,
        config: ServingConfig,
        *,
        om_path: str | os.PathLike[str],
        device_id: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.config = config
        self.om_path = os.fspath(om_path)
        self.device_id = device_id
        self.stats = EngineStats()
        self.scheduler = Scheduler()
        #: the scheduler's lanes (the same list)
        self.lanes: list[Lane] = self.scheduler.lanes
        #: guards lane ownership and the stats between the caller's thread and the completion thread
        self._mutex = self.scheduler.mutex
        self.rebuilder = Rebuilder(config.name, device_id, self.lanes, self.stats, self._mutex, clock)
        #: lanes a device failure left unusable, with when to try each again
        self.recovering = self.rebuilder.down
        #: submitted batches when there is more than one lane to pipeline them on, else executed
        self.mode = Mode.PIPELINED if config.params.streams_per_instance > 1 else Mode.SYNCHRONOUS
        #: whether the next batch is submitted or executed (``answers_later``)
        self.answering = Answering(self.mode, self.stats)
        self.context: device.Context | None = None
        self._closed = False
        self._completion: Completion | None = None
        prep = config.params.preprocess
        #: the input whose requests carry encoded images, when the model has one
        self.images = Images(prep, batched=config.batched) if prep is not None else None
        device.acquire(config.params.acl_json)
        try:
            self.context = device.Context(device_id)
            for _ in range(config.params.streams_per_instance):
                self.lanes.append(Lane(self.context, self.om_path, self.stats.busy, self.images))
            self.binding = Binding(
                config, self.om_path, self.lanes[0], self.images.bound if self.images is not None else None
            )
            self.gears = self.binding.gears
            #: every execute's bookkeeping (validate, group, gear, gather, split, counting), compiled
            self.planner: Planner = self.binding.planner()
            self.failures = Failures(
                config.name, self.planner, self.rebuilder, self.stats, self._mutex, self._run
            )
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
        model_config: Mapping[str, object],
        *,
        version_dir: str | os.PathLike[str],
        instance_name: str = "",
        device_id: int | None = None,
    ) -> Engine:
        """Build from Triton's model config mapping; a relative OM path is under ``version_dir``.

        ``version_dir`` is Triton's ``<model>/<version>``: its name picks the version's own OM when
        ``version_om_model_paths`` lists one, else ``om_model_path``.
        """
        config = ServingConfig.from_model_config(model_config)
        if device_id is None:
            device_id = device_for_instance(instance_name, config.params.device_ids)
        return cls(config, om_path=config.om_path_in(version_dir), device_id=device_id)

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
        lifetime: Lifetime = Lifetime.OWNED,
    ) -> list[Answer]:
        """Per request: a dict of output name -> array, or the GePluginError that concerns it alone.

        ``requested_outputs[i]`` limits request i to those outputs (None: all); an output nobody in an
        execute asked for is not even copied back from the device. Errors come without their tracebacks
        (see ``detached``). With ``Lifetime.UNTIL_NEXT_CALL``, outputs may be views of the engine's staging
        memory, valid until the next call or ``close()``: Triton's stub copies responses before it calls
        ``execute`` again."""
        if lifetime is _UNTIL_PUT_RETURNS:
            raise ValueError("execute() returns its outputs: they outlive any put; use submit() for that")
        self._check_open()
        if self._completion is not None:  # submitted batches are the completion thread's to finish
            self.wait_idle()
        results: list[Answer | None] = [None] * len(requests)  # every entry is put before the return
        lanes = self.lanes
        for lane in lanes:  # only this call's thread lends views: no lock
            if lane.lent:
                lane.lent.clear()  # the previous call's responses have been copied by now
        finish = self._finish
        chunks, put = self._plan(requests, requested_outputs, results.__setitem__)
        for chunk in chunks:
            self._start(InFlight(chunk, put, lifetime), finish)
        for lane in lanes:
            if lane.pending is not None:
                finish(lane)
        return cast(list[Answer], results)

    def answers_later(self) -> bool:
        """Whether the caller should ``submit`` its next batch (answered from the completion thread) rather
        than ``execute`` it: always when pipelined, and with one lane while its executes are slow
        (``modes.Answering``)."""
        return self.answering.later()

    def submit(
        self,
        requests: Sequence[Mapping[str, object]],
        requested_outputs: Sequence[Collection[str] | None] | None,
        put: Put,
    ) -> None:
        """Start ``requests`` and return once every batch of them is on the device (or refused).

        ``put(i, outcome)`` receives request i's outputs or error: from this thread for a request refused
        before the device, from the completion thread otherwise. Outputs live as
        ``Lifetime.UNTIL_PUT_RETURNS`` says; the caller copies (Triton's response sender does, before
        ``send`` returns). The request arrays are not read after this returns: Triton frees them then."""
        context = self._check_open()
        if self._completion is None:
            self._completion = Completion(context, self._finish)
        chunks, put = self._plan(requests, requested_outputs, put)
        for chunk in chunks:
            self._start(InFlight(chunk, put, _UNTIL_PUT_RETURNS, queued=True), None)

    def device_memory(self) -> tuple[int, int]:
        """(free, total) bytes of this instance's device, every process's use included."""
        return device.memory_info(self.device_id)

    def wait_idle(self) -> None:
        """Until every submitted batch is answered."""
        self.scheduler.wait_idle()

    def _check_open(self) -> device.Context:
        """The engine's context, or GePluginError once it is closed."""
        if self._closed or self.context is None:
            raise GePluginError(f"model {self.config.name!r}: the engine is closed")
        return self.context

    def _plan(
        self,
        requests: Sequence[Mapping[str, object]],
        requested_outputs: Sequence[Collection[str] | None] | None,
        put: Put,
    ) -> tuple[list[fp.Chunk], Put]:
        """Plan the window (one compiled call) and answer the refused requests: the chunks to run, and the
        ``put`` that answers their requests (``put`` itself, or the image stage's, which knows the requests
        it let through by their place in the window)."""
        stats = self.stats
        self._check_open().make_current()
        if len(self.recovering):
            self.rebuilder.reopen_due()
        stats.requests += len(requests)
        if self.images is not None:
            admitted = self.images.admit(requests, requested_outputs, put)
            requests, requested_outputs, put = admitted.requests, admitted.requested, admitted.put
            stats.request_errors += admitted.refused
        chunks, refused = self.planner.plan(requests, requested_outputs)
        if refused:
            stats.request_errors += len(refused)
            for index, error in refused:
                put(index, error)
        return chunks, put

    # -- running chunks on lanes ---------------------------------------------------------------------

    def _start(self, job: InFlight, finish: Callable[[Lane], None] | None) -> None:
        """Stage ``job`` on the next lane (one compiled gather) and launch it; its outcomes come from
        ``_finish``. An executed job (``finish``: ``_finish``, bound once per call) finishes a lane still
        running first, here. A submitted one (``finish`` None, answered on the completion thread) first tries
        to join the chunk a lane holds open (``_join``); if it does not fit, it is launched or, while the
        device is busy with another lane's execute, held open itself (``Scheduler.hold``) to take the
        requests Triton hands over meanwhile (``submit`` returns at once); a held chunk is launched when the
        device has nothing else (``_landed``) or once it is full."""
        queued = finish is None
        if queued and self._join(job):
            return
        scheduler = self.scheduler
        lane = scheduler.take(job, finish)
        if lane is None:
            self.failures.fail_all(job, self.rebuilder.unavailable())
            return
        try:
            lane.reclaim()
            self.planner.stage(job.chunk, lane.in_arrays)
            if not queued:
                self._launch(lane, job)
            else:
                with self._mutex:
                    if not (self.config.batched and scheduler.hold(lane, job, self.gears.max_rows)):
                        self._launch(lane, job)
                job.chunk.arrays = None  # gathered; Triton frees them once submit() returns
        except (GePluginError, ValueError) as exc:
            self.failures.failed(lane, job, exc)
            scheduler.release(lane)

    def _join(self, job: InFlight) -> bool:
        """Add ``job``'s requests to the chunk held open, when a gear takes them all without moving the rows
        staged already: only theirs are gathered, after those. A full chunk is launched at once."""
        with self._mutex:
            held = self.scheduler.held()
            if held is None:
                return False
            merged = self.planner.extend(held.chunk, job.chunk)
            if merged is None:
                return False
            lane = self.scheduler.open
            assert lane is not None  # held() found its job
            try:
                self.planner.stage(merged, lane.in_arrays, len(held.chunk.indices))
            except ValueError as exc:
                # only the newcomers' rows and the padding after the held rows (never read back) were
                # written: the held chunk is as it was, the newcomers fail alone
                self.failures.fail_all(job, as_error(exc))
                return True
            held.absorb(merged, job)
            job.chunk.arrays = None  # gathered; Triton frees them once submit() returns
            if merged.rows >= self.gears.max_rows:
                self._launch_open(self.scheduler.unhold())
            return True

    def _run(self, lane: Lane, job: InFlight) -> None:
        """Gather the chunk into the lane's staging (one compiled call), launch it, wait and answer it: a
        failed execute's requests run again (``failures``)."""
        lane.reclaim()
        self.planner.stage(job.chunk, lane.in_arrays)
        self._launch(lane, job)
        lane.wait()
        self._answer(lane, job)

    def _launch(self, lane: Lane, job: InFlight) -> None:
        """Queue the staged chunk's copies and execute on ``lane`` and count it; a submitted job is then the
        completion thread's (called with the mutex held: jobs reach it in the order they reach the device)."""
        job.started = time.perf_counter()
        lane.launch(*self.planner.launch_args(job.chunk))
        self.planner.count(job.chunk)
        if job.queued:
            self.scheduler.launched()
            assert self._completion is not None  # submit() made it
            self._completion.push(lane)

    def _launch_open(self, lane: Lane | None) -> None:
        """Launch the chunk ``lane`` held open, if it still holds one (called with the mutex held)."""
        if lane is None or lane.pending is None:
            return
        job = lane.pending
        try:
            self._launch(lane, job)
        except (GePluginError, ValueError) as exc:
            self.failures.failed(lane, job, exc)
            self.scheduler.release(lane)

    def _landed(self, job: InFlight) -> None:
        """A submitted execute is done on the device: when no other is in flight, launch the chunk held open,
        which has taken every request that came meanwhile."""
        if not job.queued:
            return
        with self._mutex:
            self._launch_open(self.scheduler.landed())

    def _finish(self, lane: Lane) -> None:
        """Wait for the lane's job, answer its requests (or find which fail), then free the lane."""
        job = lane.pending
        if job is None:
            return
        try:
            try:
                lane.wait()
            finally:
                self._landed(job)
            self._answer(lane, job)
        except (GePluginError, ValueError) as exc:
            self.failures.failed(lane, job, exc)
        finally:
            self.scheduler.release(lane)

    def _answer(self, lane: Lane, job: InFlight) -> None:
        """Split the execute's outputs to its requests (one compiled call) and hand each its own."""
        micros = (time.perf_counter() - job.started) * 1e6
        with self._mutex:
            self.stats.observe_execute(micros)
        chunk = job.chunk
        lifetime = job.lifetime
        split, lent = self.planner.split(chunk, lane.out_arrays, lifetime.views)
        answers = cast(list[Answer], split)  # the same list: an image DVPP failed on puts its error in it
        if lane.dvpp is not None and lane.dvpp.failed and self.images is not None:
            refused = self.images.refuse(lane.dvpp, chunk, self.binding.image_position, answers)
            with self._mutex:
                self.stats.request_errors += refused
        if job.targets is None:
            put = job.put
            for index, mine in zip(chunk.indices, answers):
                put(index, mine)
        else:
            for (put, index), mine in zip(job.targets, answers):
                put(index, mine)
        if lent and lifetime.kept:  # the caller keeps them: copied before the staging is written again
            lane.lent.extend(answer for answer in answers if type(answer) is dict)

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
        self.lanes.clear()
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
