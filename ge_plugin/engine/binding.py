"""How one OM serves one model config: tensors matched, gears read off the OM, limits and sizes worked out.

Everything here happens once, when an instance starts, so that a config that does not fit the OM fails
the load with a message naming the tensor, and the request path only looks things up.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import attrs

from ge_plugin import device, dtypes
from ge_plugin import fastpath as fp
from ge_plugin.engine.config import IOConfig, ServingConfig
from ge_plugin.engine.gear_reading import read_gear_table
from ge_plugin.engine.gear_table import GearTable
from ge_plugin.engine.lane import Lane
from ge_plugin.engine.planner import Planner
from ge_plugin.engine.preprocess import ImageInput
from ge_plugin.engine.tensors import BoundTensor, Tie
from ge_plugin.errors import ConfigError
from ge_plugin.gears import GearSet
from ge_plugin.params import ModelParams

log = logging.getLogger("ge_plugin.engine")


#: the values an int64 request keeps when an int32 OM takes it
INT32_RANGE = (-(2**31), 2**31 - 1)

#: the sim OM's precision (how its float outputs are rounded) as config.pbtxt's ``precision`` says it
PRECISION_OF_OM = {"fp32": "origin", "fp16": "fp16", "bf16": "bf16"}

#: request validation's limit for a dim that must match a gear exactly: the gear choice refuses any other
#: length with the lengths it takes, which says more than "longer than the largest gear"
EXACT_LIMIT = 2**31 - 1


def _native(model: device.OmModel, precision: str) -> bool:
    """The graph's own floats are already ``precision`` (an fp16 model built with ATC's default
    force_fp16): building in it narrowed nothing, so its answers are the model's own. Judged by the graph's
    inputs and outputs, where the OM records them; False where it does not."""
    graph = model.graph_dtypes
    if graph is None:
        return False
    floats = {dtypes.by_acl(code).short for code in graph if dtypes.by_acl(code).is_float}
    return floats <= {precision}


def _can_cast(a: str, b: str) -> bool:
    """Requests of type ``a`` can go to an OM tensor of type ``b`` and its outputs come back (the fast path
    converts both ways, ``fp.CASTS``)."""
    return a == b or ((a, b) in fp.CASTS and (b, a) in fp.CASTS)


class Binding:
    """The config's tensors bound to the OM's (one ``BoundTensor`` each), and the OM's gears.

    ``inputs`` come in the OM's order (the lane's staging), ``outputs`` in the config's; a tie's input is
    a position in ``inputs``. Per flat dim (as ``Gear.flat``), ``exact_at`` marks the dims a gear sets on an
    input the config does not let ge-plugin pad. An image input (``images``: the lane's DVPP stage writes it)
    is bound as the planner sees it, a ticket per row (``engine.preprocess``), at ``image_position``.
    """

    def __init__(self, config: ServingConfig, om_path: str, lane: Lane, images: ImageInput | None = None):
        self.config = config
        self.where = f"model {config.name!r} ({om_path})"
        self.images = images
        #: what the instance's log should say at start-up about a config that works but may surprise
        self.warnings: list[str] = []
        model = lane.loaded_model
        inputs, outputs = self._bind_tensors(model)
        self._check_precision(model)
        self.exact_at = self._exact_dims(inputs, model)
        self.gears = read_gear_table(lane, self.where)
        #: the image input's position in ``inputs`` (-1: none)
        self.image_position = -1
        if images is not None:
            self.image_position = next(k for k, t in enumerate(inputs) if t.name == images.name)
            self.gears = images.planned(self.gears, self.image_position)
        self._check_gears(self.gears, model)
        gears = self.gears.gears
        inputs = [
            attrs.evolve(
                tensor,
                spec=self._input_spec(k, tensor, model),
                nbytes=_sizes(tensor, [gear.input_dims[k] for gear in gears]),
            )
            for k, tensor in enumerate(inputs)
        ]
        outputs = [
            attrs.evolve(tensor, nbytes=_sizes(tensor, [gear.output_dims[tensor.om_index] for gear in gears]))
            for tensor in outputs
        ]
        #: the config's inputs in the OM's order (the order of the lane's staging), its outputs in its own
        self.inputs: tuple[BoundTensor, ...] = tuple(inputs)
        self.outputs: tuple[BoundTensor, ...] = tuple(outputs)
        self._check_trims(model)

    def _bind_tensors(self, model: device.OmModel) -> tuple[list[BoundTensor], list[BoundTensor]]:
        """Match config inputs/outputs to the OM's by name; refuse mismatches now, not per request. The
        inputs come in the OM's order, the outputs in the config's."""
        cfg = self.config
        where = self.where
        extra = 1 if cfg.batched else 0
        by_name = {io.name: io for io in cfg.inputs}
        if self.images is not None and self.images.name in by_name:
            by_name[self.images.name] = self.images.ticket_io(by_name[self.images.name], cfg.batched)
        om_names = [info.name for info in model.inputs]
        missing = [n for n in om_names if n not in by_name]
        unknown = [n for n in by_name if n not in om_names]
        if missing or unknown:
            raise ConfigError(
                f"{where}: config inputs {sorted(by_name)} do not match the OM's inputs {om_names}"
                + (f"; missing {missing}" if missing else "")
                + (f"; not in the OM {unknown}" if unknown else "")
            )
        inputs = []
        for info in self._planned_inputs(model):
            io = by_name[info.name]
            self._check_io(where, "input", io, info, extra)
            self._check_fixed_dims(where, io, info, extra)
            inputs.append(_bound(io, info))
        # Which output dims (full numbering) take their length from which input dim of the request.
        in_pos = {tensor.name: k for k, tensor in enumerate(inputs)}
        ties: dict[str, list[Tie]] = {}
        for tie in cfg.params.output_dim_ties:
            ties.setdefault(tie.output, []).append(
                (tie.output_dim + extra, in_pos[tie.input], tie.input_dim + extra)
            )
        outputs = []
        for io, info in zip(cfg.outputs, self._match_outputs(where, model)):
            self._check_io(where, "output", io, info, extra)
            outputs.append(attrs.evolve(_bound(io, info), ties=tuple(ties.get(io.name, ()))))
        return inputs, outputs

    def _planned_inputs(self, model: device.OmModel) -> list[device.TensorInfo]:
        """The OM's inputs as the planner binds them: the image input as its tickets."""
        images = self.images
        return [
            images.ticket_info(info) if images is not None and info.index == images.om_index else info
            for info in model.inputs
        ]

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

    def _check_io(self, where: str, kind: str, io: IOConfig, info: device.TensorInfo, extra: int) -> None:
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

    def _check_fixed_dims(self, where: str, io: IOConfig, info: device.TensorInfo, extra: int) -> None:
        """A dim the OM fixes must be fixed to the same length in the config: a -1 there would let
        Triton pass shorter requests that the engine would then pad, silently changing the answer."""
        for d, (c, o) in enumerate(zip(io.dims, info.dims[extra:])):
            if c == -1 and o > 0:
                dims = ["batch", *map(str, io.dims)] if extra else list(map(str, io.dims))
                fixed = list(io.dims)
                fixed[d] = o
                raise ConfigError(
                    f"{where}: input {io.name!r} dim {d} is -1 (any length) in the config "
                    f"[{', '.join(dims)}], but the OM fixes it at {o} ({list(info.dims)}); declare "
                    f"dims: {fixed}, or rebuild the OM with gears for that dim"
                )

    def _check_precision(self, model: device.OmModel) -> None:
        """Compare the config's ``precision`` with what the OM was built with, where the OM tells."""
        declared = self.config.params.precision
        built = model.precision
        if built is None:
            return
        om_precision = PRECISION_OF_OM[built]
        if declared is None:
            if om_precision != "origin" and not _native(model, om_precision):
                self.warnings.append(
                    f"{self.where}: the OM computes in {om_precision} (ATC's default --precision_mode="
                    "force_fp16, or a mixed mode), so answers differ from the original model's in about the "
                    "third decimal; declare parameters.precision "
                    f"'{om_precision}' to say that is intended, or rebuild with "
                    "--precision_mode=must_keep_origin_dtype"
                )
            return
        if declared != om_precision:
            raise ConfigError(
                f"{self.where}: parameters.precision is {declared!r} but the OM was built with {om_precision!r} "
                f"precision; rebuild the OM (ATC --precision_mode) or declare precision {om_precision!r}"
            )

    def _exact_dims(self, inputs: Sequence[BoundTensor], model: device.OmModel) -> tuple[bool, ...]:
        """Per flat dim: a dim a gear sets (the OM has -1 there, and it is not the batch rows) on an input
        not in ``pad_inputs``. ConfigError for a listed input that has no such dim: padding it would do
        nothing."""
        cfg = self.config
        pads = set(cfg.params.pad_inputs)
        batch_dim = cfg.batched or model.mode == "batch"
        exact: list[bool] = []
        for tensor, info in zip(inputs, self._planned_inputs(model)):
            io = tensor.io
            gear_dims = [d for d in info.dynamic if not (d == 0 and batch_dim)]
            if io.name in pads and not gear_dims:
                raise ConfigError(
                    f"{self.where}: parameters.pad_inputs lists {io.name!r}, but no gear sets a dim of it "
                    f"(the OM has {list(info.dims)}); only dims that gears set are padded (batch rows always "
                    "are), so leave it out"
                )
            exact.extend(d in gear_dims and io.name not in pads for d in range(len(info.dims)))
        return tuple(exact)

    def _check_gears(self, table: GearTable, model: device.OmModel) -> None:
        """The gears the config declares are the OM's (one comparison of two ``GearSet``), and its batch fits
        the largest gear."""
        cfg = self.config
        declared = cfg.declared_gears()
        if declared is not None and not declared.same_gears(model.gear_set):
            raise ConfigError(
                f"{self.where}: {_declaring(cfg.params, declared)} differ from the OM, which has "
                f"{model.gear_set.against(declared)}; render the config again or rebuild the OM"
                + (f" with --{declared.flag}" if declared.flag else "")
            )
        if cfg.batched and cfg.max_batch_size > table.max_rows:
            raise ConfigError(
                f"{self.where}: max_batch_size {cfg.max_batch_size} exceeds the OM's largest batch gear "
                f"{table.max_rows}"
            )

    def _input_spec(self, k: int, tensor: BoundTensor, model: device.OmModel) -> fp.TensorSpec:
        """What request validation checks for input ``k``: its dims and their limits (the config's fixed
        dims, the gears' largest dynamic ones), its value range and its shape tie."""
        cfg = self.config
        io = tensor.io
        extra = 1 if cfg.batched else 0
        limits = list(self.gears.limits[k])
        full = ([-1] if extra else []) + list(io.dims)
        if extra:
            limits[0] = min(limits[0], cfg.max_batch_size)
        first = sum(len(dims) for dims in self.gears.limits[:k])
        for d, v in enumerate(full):
            exact = self.exact_at[first + d]
            if v > 0:
                if v > limits[d]:
                    raise ConfigError(
                        f"{self.where}: input {io.name!r} dim {d - extra} is {v} in the config, longer than "
                        f"the OM's largest gear for it ({limits[d]})"
                    )
                taken = sorted({g.input_dims[k][d] for g in self.gears.gears})
                if exact and v not in taken:
                    raise ConfigError(
                        f"{self.where}: input {io.name!r} dim {d - extra} is {v} in the config, but the OM's "
                        f"gears take {', '.join(map(str, taken))} there and the input is not padded "
                        f"(parameters.pad_inputs); declare one of those lengths"
                    )
                limits[d] = v
            elif exact:
                limits[d] = EXACT_LIMIT
        return fp.TensorSpec(
            io.name,
            io.dtype.short,
            tuple(full),
            tuple(limits),
            # dim 0 is the OM's batch even when the config leaves batching to the client
            batched=cfg.batched or model.mode == "batch",
            value_range=self._value_range(tensor),
            same_shape_as=next((t.other for t in cfg.params.same_shape if t.input == io.name), None),
        )

    def _check_trims(self, model: device.OmModel) -> None:
        """With padding along gear dims, an output dim that changes with the gear but follows no input comes
        back at the gear's length: worth a warning at start-up, since the config can say (output_dim_ties)."""
        if not self.config.params.pad_inputs:
            return
        extra = 1 if self.config.batched else 0
        for tensor in self.outputs:
            j = tensor.om_index
            tied = {out_d for out_d, _, _ in tensor.ties}
            for d in range(extra, len(model.outputs[j].dims)):
                lengths = sorted({g.output_dims[j][d] for g in self.gears.gears})
                if len(lengths) > 1 and d not in tied:
                    self.warnings.append(
                        f"{self.where}: output {tensor.name!r} dim {d - extra} changes with the gear "
                        f"({', '.join(map(str, lengths))}) but follows no input (parameters.output_dim_ties): "
                        "a request padded up to a gear gets that dim at the gear's length"
                    )

    def planner(self) -> Planner:
        """The planner of this binding's requests: its tensors on its gears."""
        return Planner(
            self.inputs,
            self.outputs,
            self.gears,
            batched=self.config.batched,
            exact=self.exact_at,
            pad_value=self.config.params.pad_value,
        )

    def _value_range(self, tensor: BoundTensor) -> tuple[float, float] | None:
        """The declared range, narrowed to int32's when an int32 OM takes an int64 input: a value that does
        not fit is then the request's error, found in validation, not half-way through a batch's copy."""
        io = tensor.io
        declared = next(
            ((r.low, r.high) for r in self.config.params.input_ranges if r.input == io.name), None
        )
        if not (tensor.type == "int64" and tensor.om_type == "int32"):
            return declared
        low, high = declared or INT32_RANGE
        narrowed = (max(low, INT32_RANGE[0]), min(high, INT32_RANGE[1]))
        if narrowed[0] > narrowed[1]:
            raise ConfigError(
                f"{self.where}: input {io.name!r} range [{low}, {high}] holds no int32 value, and the OM takes "
                "the input as int32"
            )
        return narrowed


def _declaring(params: ModelParams, declared: GearSet) -> str:
    """The parameters that declared ``declared``, as the config has them: ``parameters.image_sizes
    '224,224;448,448'``, ``parameters.gears '1,4' and dims_gears '16;32' (dims gears 1,16;...)``."""
    keys = ("image_sizes",) if declared.kind == "hw" else ("gears", "dims_gears")
    texts = params.to_parameters()
    shown = " and ".join(f"{key} {texts[key]!r}" for key in keys if key in texts)
    grid = f" ({declared.describe()})" if declared.kind == "dims" else ""
    return f"parameters.{shown}{grid}"


def _bound(io: IOConfig, info: device.TensorInfo) -> BoundTensor:
    """The record of a config tensor and the OM tensor it matched (sizes, ties and spec come later)."""
    return BoundTensor(io.name, info.index, io.dtype.short, dtypes.by_acl(info.acl_dtype).short, io)


def _sizes(tensor: BoundTensor, dims_per_gear: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """The tensor's bytes in the OM's type at each gear (in the gear table's order)."""
    itemsize = dtypes.by_name(tensor.om_type).itemsize
    return tuple(math.prod(dims) * itemsize for dims in dims_per_gear)
