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

import numpy as np

from ge_plugin import device, dtypes
from ge_plugin import fastpath as fp
from ge_plugin.engine.config import ServingConfig
from ge_plugin.engine.gears import Gear, GearTable
from ge_plugin.engine.lane import Lane
from ge_plugin.engine.stats import EngineStats
from ge_plugin.errors import AclError, ConfigError, GePluginError, RequestError

log = logging.getLogger("ge_plugin.engine")

#: Triton dtype -> OM dtype pairs the fast path converts (both directions); equal types always work
CASTS = frozenset({("fp32", "fp16"), ("fp32", "bf16"), ("fp16", "bf16"), ("int64", "int32")})

Outcome = "dict[str, np.ndarray] | GePluginError"


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


def _can_cast(a: str, b: str) -> bool:
    return a == b or (a, b) in CASTS or (b, a) in CASTS


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
            self._bind(self.lanes[0].model)
            self.gears = self._gear_table(self.lanes[0])
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
        """Build from Triton's model config mapping; a relative om_model_path is under ``version_dir``."""
        config = ServingConfig.from_model_config(model_config)
        om_path = os.path.join(os.fspath(version_dir), os.path.expanduser(config.params.om_model_path))
        if device_id is None:
            device_id = device_for_instance(instance_name, config.params.device_ids)
        return cls(config, om_path=om_path, device_id=device_id)

    # -- start-up ------------------------------------------------------------------------------------

    def _bind(self, model: device.OmModel) -> None:
        """Match config inputs/outputs to the OM's by name; refuse mismatches now, not per request."""
        cfg = self.config
        where = f"model {cfg.name!r} ({self.om_path})"
        extra = 1 if cfg.batched else 0
        by_name = {io.name: io for io in cfg.inputs}
        om_names = [info.name for info in model.inputs]
        missing = [n for n in om_names if n not in by_name]
        unknown = [n for n in by_name if n not in om_names]
        if missing or unknown:
            raise ConfigError(
                f"{where}: config inputs {sorted(by_name)} do not match the OM's inputs {om_names}"
                + (f"; missing {missing}" if missing else "")
                + (f"; not in the OM {unknown}" if unknown else "")
            )
        self._in_cfg = [by_name[n] for n in om_names]  # OM order
        self._in_om_type = []
        for io, info in zip(self._in_cfg, model.inputs):
            self._check_io(where, "input", io, info, extra)
            self._in_om_type.append(dtypes.by_acl(info.acl_dtype).short)
        self._in_type = [io.dtype.short for io in self._in_cfg]
        self._out_cfg = []
        self._out_index = []
        self._out_om_type = []
        for io, info in zip(cfg.outputs, self._match_outputs(where, model)):
            self._check_io(where, "output", io, info, extra)
            self._out_cfg.append(io)
            self._out_index.append(info.index)
            self._out_om_type.append(dtypes.by_acl(info.acl_dtype).short)
        self._out_type = [io.dtype.short for io in self._out_cfg]
        self._out_pos = {io.name: k for k, io in enumerate(self._out_cfg)}
        # Which output dims (full numbering) take their length from which input dim of the request.
        in_pos = {io.name: k for k, io in enumerate(self._in_cfg)}
        self._ties: list[list[tuple[int, int, int]]] = [[] for _ in self._out_cfg]
        for tie in cfg.params.output_dim_ties:
            k = self._out_pos[tie.output]
            self._ties[k].append((tie.output_dim + extra, in_pos[tie.input], tie.input_dim + extra))

    def _match_outputs(self, where: str, model: device.OmModel) -> list[device.TensorInfo]:
        """The OM output behind each config output: by name, or by position when no name matches.

        ATC may rename outputs (an OM built from ONNX can report node-based names such as
        ``PartitionedCall_12:0``), so when none of the config's names is an OM name and the counts agree, the
        config's order is taken as the OM's index order — that is what the OM's output order means.
        """
        om_out = {info.name: info for info in model.outputs}
        names = [io.name for io in self.config.outputs]
        if all(name in om_out for name in names):
            return [om_out[name] for name in names]
        if not any(name in om_out for name in names) and len(names) == len(model.outputs):
            log.info("%s: OM outputs %s taken as config outputs %s, by position", where, list(om_out), names)
            return list(model.outputs)
        missing = next(name for name in names if name not in om_out)
        raise ConfigError(f"{where}: output {missing!r} is not an output of the OM {sorted(om_out)}")

    def _check_io(self, where: str, kind: str, io, info: device.TensorInfo, extra: int) -> None:
        om_dims = info.dims
        if len(io.dims) + extra != len(om_dims):
            shown = f"[batch, {', '.join(map(str, io.dims))}]" if extra else str(list(io.dims))
            raise ConfigError(
                f"{where}: {kind} {io.name!r} has dims {shown} in the config but {list(om_dims)} in the OM"
            )
        for d, (c, o) in enumerate(zip(io.dims, om_dims[extra:])):
            if c > 0 and o > 0 and c != o:
                raise ConfigError(
                    f"{where}: {kind} {io.name!r} dim {d} is {c} in the config but {o} in the OM ({list(om_dims)})"
                )
        om_type = dtypes.by_acl(info.acl_dtype)
        if not _can_cast(io.dtype.short, om_type.short):
            raise ConfigError(
                f"{where}: {kind} {io.name!r} is {io.dtype.triton} in the config but {om_type.short} in the OM, "
                "and ge-plugin cannot convert between them"
            )

    def _gear_table(self, lane: Lane) -> GearTable:
        model = lane.model
        cfg = self.config
        where = f"model {cfg.name!r} ({self.om_path})"
        ranks = [len(info.dims) for info in model.inputs]
        settings: list[tuple[str, object, list[tuple[int, ...]]]] = []
        if model.mode == "batch":
            for b in model.batch_gears:
                dims = [
                    tuple(b if (d == 0 and n < 0) else n for d, n in enumerate(info.dims))
                    for info in model.inputs
                ]
                settings.append((str(b), b, dims))
        elif model.mode == "dims":
            dynamic = [(k, d) for k, info in enumerate(model.inputs) for d in info.dynamic]
            for flat in model.dims_gears:
                dims = [list(info.dims) for info in model.inputs]
                if len(flat) == sum(ranks):
                    it = iter(flat)
                    dims = [[next(it) for _ in range(r)] for r in ranks]
                elif len(flat) == len(dynamic):
                    for (k, d), v in zip(dynamic, flat):
                        dims[k][d] = v
                else:
                    raise ConfigError(
                        f"{where}: the OM reports a dims gear {list(flat)} that fits no input layout"
                    )
                full = tuple(v for ds in dims for v in ds)
                per_input = {
                    tuple(dims[k][d] for k2, d in dynamic if k2 == k) for k in {k for k, _ in dynamic}
                }
                shown = per_input.pop() if len(per_input) == 1 else tuple(dims[k][d] for k, d in dynamic)
                label = "x".join(map(str, shown))
                settings.append((label, full, [tuple(ds) for ds in dims]))
        else:
            dims = [info.dims for info in model.inputs]
            if any(d < 0 for ds in dims for d in ds):
                raise ConfigError(
                    f"{where}: the OM has dynamic dims but no gears (shape-range OMs are not supported)"
                )
            settings.append(("static", None, [tuple(ds) for ds in dims]))
        gears = []
        for index, (label, setting, in_dims) in enumerate(settings):
            probe = Gear(index, tuple(in_dims), (), setting, label)
            lane.select(probe)
            out_dims = tuple(model.cur_output_dims(info.index) for info in model.outputs)
            gears.append(Gear(index, tuple(in_dims), out_dims, setting, label))
        table = GearTable(gears)
        if cfg.params.gears and model.mode == "batch" and tuple(cfg.params.gears) != model.batch_gears:
            raise ConfigError(
                f"{where}: parameters.gears {list(cfg.params.gears)} differ from the OM's batch gears "
                f"{list(model.batch_gears)}; render the config again or rebuild the OM"
            )
        if cfg.batched and cfg.max_batch_size > table.max_rows:
            raise ConfigError(
                f"{where}: max_batch_size {cfg.max_batch_size} exceeds the OM's largest batch gear {table.max_rows}"
            )
        extra = 1 if cfg.batched else 0
        self._specs = []
        for k, io in enumerate(self._in_cfg):
            limits = list(table.limits[k])
            full = ([-1] if extra else []) + list(io.dims)
            if extra:
                limits[0] = min(limits[0], cfg.max_batch_size)
            for d, v in enumerate(full):
                if v > 0:
                    limits[d] = v
            self._specs.append(
                fp.TensorSpec(io.name, io.dtype.short, tuple(full), tuple(limits), batched=cfg.batched)
            )
        self._rows_at = tuple(
            extra and d == 0 for k in range(len(self._in_cfg)) for d in range(len(table.limits[k]))
        )
        self._in_bytes = {}
        self._out_bytes = {}
        for g in table.gears:
            self._in_bytes[g.index] = [
                int(np.prod(dims)) * dtypes.by_name(t).itemsize
                for dims, t in zip(g.input_dims, self._in_om_type)
            ]
            self._out_bytes[g.index] = [
                int(np.prod(g.output_dims[self._out_index[k]])) * dtypes.by_name(t).itemsize
                for k, t in enumerate(self._out_om_type)
            ]
        self._need_cache: dict = {}
        return table

    def _warm_up(self) -> None:
        """Run every gear ``warmup`` times on zeros, so first-run costs are not paid by a request."""
        for lane in self.lanes:
            for _ in range(self.config.params.warmup):
                for gear in self.gears.gears:
                    lane.launch(
                        gear, self._in_bytes[gear.index], self._out_index, self._out_bytes[gear.index]
                    )
                    lane.wait()

    # -- serving -------------------------------------------------------------------------------------

    @property
    def input_names(self) -> list[str]:
        return [io.name for io in self._in_cfg]

    @property
    def output_names(self) -> list[str]:
        return [io.name for io in self._out_cfg]

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
        specs = self._specs
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
        if requested_outputs is None:
            return None
        everything = list(range(len(self._out_cfg)))
        out = []
        for i in range(n):
            names = requested_outputs[i] if i < len(requested_outputs) else None
            if names is None:
                out.append(everything)
            else:
                out.append(sorted(self._out_pos[name] for name in names if name in self._out_pos))
        return out

    def _need(self, arrays: list) -> tuple[int, ...]:
        """Flat minimum dims (all inputs) for one request alone."""
        return tuple(d for a in arrays for d in a.shape)

    def _merge(self, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
        return tuple((x + y) if row else (x if x >= y else y) for x, y, row in zip(a, b, self._rows_at))

    def _uncovered(self, arrays: list) -> RequestError:
        shapes = ", ".join(f"{io.name} {list(a.shape)}" for io, a in zip(self._in_cfg, arrays))
        gears = "; ".join(g.label for g in self.gears.gears)
        return RequestError(f"no gear of the model fits this request ({shapes}); the model's gears: {gears}")

    def _dispatch(self, chunk, need, wanted, results) -> None:
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
            out_sel = list(range(len(self._out_cfg)))
        else:
            out_sel = sorted({k for i, _ in chunk for k in wanted[i]})
        try:
            in_bytes = self._in_bytes[gear.index]
            pad = self.config.params.pad_value
            for k, host in enumerate(lane.in_host):
                fp.gather(
                    host.array,
                    gear.input_dims[k],
                    self._in_om_type[k],
                    [a[k] for _, a in chunk],
                    self._in_type[k],
                    pad,
                )
            out_bytes = self._d2h_bytes(gear, need, out_sel)
            started = time.perf_counter()
            lane.launch(gear, in_bytes, [self._out_index[k] for k in out_sel], out_bytes)
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
        full = self._out_bytes[gear.index]
        if not self.config.batched or need[0] >= gear.rows:
            return [full[k] for k in out_sel]
        rows = [gear.output_dims[self._out_index[k]][0] for k in out_sel]
        return [full[k] // gear.rows * need[0] if n == gear.rows else full[k] for k, n in zip(out_sel, rows)]

    def _finish(self, lane: Lane, results: list) -> None:
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
            j = self._out_index[k]
            gear_dims = gear.output_dims[j]
            ties = self._ties[k]
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
                    lane.out_host[j].array, gear_dims, self._out_om_type[k], self._out_type[k], rows, shapes
                )
            except ValueError as exc:
                self._fail(lane, chunk, GePluginError(f"output {self._out_cfg[k].name!r}: {exc}"), results)
                return
            name = self._out_cfg[k].name
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
