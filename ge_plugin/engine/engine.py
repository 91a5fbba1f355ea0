"""One model instance on one device: everything allocated at start, requests gathered into gears.

``Engine.execute(requests)`` takes what Triton's dynamic batcher grouped (a list of requests, each a
mapping of input name to an array-like) and returns, per request, its outputs or the error that concerns
it alone. Bad requests are refused before anything reaches the device and never take their batch-mates
down; a device failure fails the requests of the execute it hit, and the lane it broke is rebuilt. After
start-up nothing is allocated per request on the device or in pinned memory.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Collection, Mapping, Sequence

from ge_plugin import device
from ge_plugin import fastpath as fp
from ge_plugin.engine.binding import Binding
from ge_plugin.engine.config import ServingConfig
from ge_plugin.engine.gears import Gear
from ge_plugin.engine.lane import Lane
from ge_plugin.engine.stats import EngineStats
from ge_plugin.errors import AclError, GePluginError, RequestError

log = logging.getLogger("ge_plugin.engine")


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

    def __init__(self, config: ServingConfig, *, om_path: str | os.PathLike, device_id: int = 0):
        self.config = config
        self.om_path = os.fspath(om_path)
        self.device_id = device_id
        self.stats = EngineStats()
        self.lanes: list[Lane] = []
        self.context: device.Context | None = None
        self._broken: GePluginError | None = None
        self._next_lane = 0
        self._closed = False
        device.acquire(config.params.acl_json)
        try:
            self.context = device.Context(device_id)
            for _ in range(config.params.streams_per_instance):
                self.lanes.append(Lane(self.context, self.om_path))
            self.binding = Binding(config, self.om_path, self.lanes[0])
            self.gears = self.binding.gears
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
        execute asked for is not even copied back from the device.
        """
        if self._closed:
            raise GePluginError(f"model {self.config.name!r}: the engine is closed")
        n = len(requests)
        stats = self.stats
        stats.requests += n
        results: list = [None] * n
        if self._broken is not None:
            stats.device_errors += n
            return [self._broken] * n
        self.context.make_current()
        wanted = self._wanted(requested_outputs, n)
        validate = fp.validate
        specs = self.binding.specs
        chunk: list[tuple[int, list]] = []
        need: tuple[int, ...] | None = None
        for i, request in enumerate(requests):
            try:
                arrays = validate(specs, request)
            except RequestError as exc:
                results[i] = exc
                stats.request_errors += 1
                continue
            own = self._need(arrays)
            if need is None:
                if self.gears.choose(own) is None:
                    results[i] = self._uncovered(arrays)
                    stats.request_errors += 1
                    continue
                chunk, need = [(i, arrays)], own
                continue
            merged = self._merge(need, own) if self.config.batched else None
            if merged is not None and self.gears.choose(merged) is not None:
                chunk.append((i, arrays))
                need = merged
                continue
            if self.gears.choose(own) is None:
                results[i] = self._uncovered(arrays)
                stats.request_errors += 1
                continue
            self._dispatch(chunk, need, wanted, results)
            chunk, need = [(i, arrays)], own
        if chunk:
            self._dispatch(chunk, need, wanted, results)
        for lane in self.lanes:
            if lane.pending is not None:
                self._finish(lane, results)
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

    def _need(self, arrays: list) -> tuple[int, ...]:
        """Flat minimum dims (all inputs) for one request alone."""
        return tuple(d for a in arrays for d in a.shape)

    def _merge(self, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
        """Two requests' needs together: rows add up, every other dim takes the longer."""
        rows_at = self.binding.rows_at
        return tuple((x + y) if row else (x if x >= y else y) for x, y, row in zip(a, b, rows_at))

    def _uncovered(self, arrays: list) -> RequestError:
        b = self.binding
        shapes = ", ".join(f"{io.name} {list(a.shape)}" for io, a in zip(b.in_cfg, arrays))
        gears = "; ".join(g.label for g in self.gears.gears)
        return RequestError(f"no gear of the model fits this request ({shapes}); the model's gears: {gears}")

    def _dispatch(self, chunk, need, wanted, results) -> None:
        b = self.binding
        if self._broken is not None:
            for i, _ in chunk:
                results[i] = self._broken
            self.stats.device_errors += len(chunk)
            return
        lane = self.lanes[self._next_lane]
        self._next_lane = (self._next_lane + 1) % len(self.lanes)
        if lane.pending is not None:
            self._finish(lane, results)
        gear = self.gears.choose(need)
        if wanted is None:
            out_sel = list(range(len(b.out_cfg)))
        else:
            out_sel = sorted({k for i, _ in chunk for k in wanted[i]})
        try:
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
            out_bytes = self._d2h_bytes(gear, need, out_sel)
            started = time.perf_counter()
            lane.launch(gear, in_bytes, [b.out_index[k] for k in out_sel], out_bytes)
        except (GePluginError, ValueError) as exc:
            self._fail(lane, chunk, exc, results)
            return
        lane.pending = (chunk, gear, out_sel, wanted, started)
        stats = self.stats
        stats.executes += 1
        stats.executes_by_gear[gear.label] = stats.executes_by_gear.get(gear.label, 0) + 1
        rows = need[0] if self.config.batched else gear.rows
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
        b = self.binding
        chunk, gear, out_sel, wanted, started = lane.pending
        lane.pending = None
        try:
            lane.wait()
        except AclError as exc:
            self._fail(lane, chunk, exc, results)
            return
        self.stats.observe_execute((time.perf_counter() - started) * 1e6)
        batched = self.config.batched
        for i, _ in chunk:
            results[i] = {}
        for k in out_sel:
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
                    lane.out_host[j].array,
                    gear_dims,
                    b.out_om_type[k],
                    b.out_type[k],
                    rows,
                    shapes,
                )
            except ValueError as exc:
                self._fail(lane, chunk, GePluginError(f"output {b.out_cfg[k].name!r}: {exc}"), results)
                return
            name = b.out_cfg[k].name
            for (i, _), out in zip(chunk, outs):
                if wanted is None or k in wanted[i]:
                    results[i][name] = out

    def _fail(self, lane: Lane, chunk, exc: BaseException, results: list) -> None:
        """The requests of this execute get the error; the lane is rebuilt so the instance stays usable."""
        error = exc if isinstance(exc, GePluginError) else GePluginError(str(exc))
        for i, _ in chunk:
            results[i] = error
        self.stats.device_errors += len(chunk)
        log.warning("model %s: execute failed (%s); rebuilding lane", self.config.name, error)
        index = self.lanes.index(lane)
        try:
            lane.close()
        except GePluginError as close_exc:
            log.warning("model %s: closing the failed lane: %s", self.config.name, close_exc)
        try:
            self.lanes[index] = Lane(self.context, self.om_path)
        except GePluginError as reopen_exc:
            self._broken = GePluginError(
                f"model {self.config.name!r}: the instance is unusable after a device failure: {reopen_exc}"
            )
            log.error("%s", self._broken)

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
