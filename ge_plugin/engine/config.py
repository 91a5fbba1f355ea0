"""The model configuration one engine serves, read from Triton's model config (JSON form) or a config.pbtxt.

The engine knows neither Triton nor YAML: it takes the model config as the plain mapping Triton hands to
``initialize`` (``json.loads(args["model_config"])``), which is also what ``read_config_pbtxt`` returns for a
file on disk, so the direct (no Triton) path and the served path share one parser.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ge_plugin import dtypes
from ge_plugin.errors import ConfigError
from ge_plugin.gears import GearSet
from ge_plugin.params import ModelParams


@attrs.frozen
class IOConfig:
    """One config input or output. ``dims`` exclude the batch dim when the model batches."""

    name: str
    dtype: dtypes.DType
    dims: tuple[int, ...]


@attrs.frozen
class ServingConfig:
    name: str
    max_batch_size: int
    inputs: tuple[IOConfig, ...]
    outputs: tuple[IOConfig, ...]
    params: ModelParams

    @property
    def batched(self) -> bool:
        return self.max_batch_size > 0

    def declared_gears(self) -> GearSet | None:
        """The gears the parameters ``gears``, ``dims_gears`` and ``image_sizes`` say the OM has, as ATC
        compiles them over the config's inputs (``GearSet.compose``, as from a spec); None when none is set.
        ConfigError for dims gears that do not give each -1 dim of the inputs a value."""
        p = self.params
        if not (p.gears or p.dims_gears or p.image_sizes):
            return None
        inputs = [(io.name, io.dims) for io in self.inputs]
        try:
            return GearSet.compose(
                batch=p.gears,
                dims=p.dims_gears,
                image_sizes=p.image_sizes,
                inputs=inputs,
                batched=self.batched,
            )
        except ValueError:
            slots = sum(1 for io in self.inputs for d in io.dims if d < 0)
            raise ConfigError(
                f"model {self.name!r}: parameters.dims_gears lists {len(p.dims_gears[0])} values per gear, but "
                f"the inputs have {slots} -1 dims (besides the batch) for them to set"
            ) from None

    @classmethod
    def from_model_config(cls, config: Mapping[str, Any]) -> ServingConfig:
        """Parse Triton's model config mapping; ConfigError names the field that is wrong."""
        name = str(config.get("name", "") or "model")
        backend = config.get("backend", "ge")
        if backend and backend != "ge":
            raise ConfigError(f"model {name!r}: backend is {backend!r}, expected 'ge'")
        try:
            max_batch_size = int(config.get("max_batch_size", 0) or 0)
        except (TypeError, ValueError):
            raise ConfigError(f"model {name!r}: max_batch_size must be an integer") from None
        if max_batch_size < 0:
            raise ConfigError(f"model {name!r}: max_batch_size must be >= 0, got {max_batch_size}")
        try:
            params = ModelParams.from_parameters(config.get("parameters", {}) or {})
        except ConfigError as exc:
            raise ConfigError(f"model {name!r}: {exc}") from None
        images = params.preprocess.input if params.preprocess is not None else None
        inputs = tuple(
            _io(name, "input", item, images=item.get("name") == images)
            for item in config.get("input", ()) or ()
        )
        outputs = tuple(_io(name, "output", item) for item in config.get("output", ()) or ())
        if not inputs:
            raise ConfigError(f"model {name!r}: the config declares no input")
        if not outputs:
            raise ConfigError(f"model {name!r}: the config declares no output")
        for kind, items in (("input", inputs), ("output", outputs)):
            seen = set()
            for io in items:
                if io.name in seen:
                    raise ConfigError(f"model {name!r}: {kind} {io.name!r} is declared twice")
                seen.add(io.name)
        config_ = cls(name, max_batch_size, inputs, outputs, params)
        config_._check_ties()
        return config_

    def om_path_in(self, version_dir: str | os.PathLike[str]) -> str:
        """The OM of Triton's ``<model>/<version>`` directory: the version's own when
        ``version_om_model_paths`` lists one, else ``om_model_path``; a relative path is under it."""
        version = os.path.basename(os.path.normpath(os.fspath(version_dir)))
        return os.path.join(
            os.fspath(version_dir), os.path.expanduser(self.params.om_model_path_for(version))
        )

    def _check_preprocess(self, ins: Mapping[str, IOConfig]) -> None:
        """The image input is there and is the Triton tensor its requests' form says (params.REQUEST_TENSORS)."""
        prep = self.params.preprocess
        if prep is None:
            return
        where = f"model {self.name!r}: parameters.preprocess"
        io = ins.get(prep.input)
        if io is None:
            raise ConfigError(f"{where} names input {prep.input!r}, which the config does not declare")
        dtype, dims = prep.triton_tensor
        if io.dtype.triton != dtype or io.dims != dims:
            raise ConfigError(
                f"{where}: input {prep.input!r} carries {prep.request} images, so the config declares it "
                f"{dtype} dims {list(dims)}, not {io.dtype.triton} {list(io.dims)}"
            )

    def _check_ties(self) -> None:
        ins = {io.name: io for io in self.inputs}
        outs = {io.name: io for io in self.outputs}
        for tie in self.params.output_dim_ties:
            where = f"model {self.name!r}: parameters.output_dim_ties {tie.encode()!r}"
            if tie.output not in outs:
                raise ConfigError(f"{where}: no output named {tie.output!r}")
            if tie.input not in ins:
                raise ConfigError(f"{where}: no input named {tie.input!r}")
            if tie.output_dim >= len(outs[tie.output].dims):
                raise ConfigError(
                    f"{where}: output {tie.output!r} has only {len(outs[tie.output].dims)} dims"
                )
            if tie.input_dim >= len(ins[tie.input].dims):
                raise ConfigError(f"{where}: input {tie.input!r} has only {len(ins[tie.input].dims)} dims")
        for bound in self.params.input_ranges:
            where = f"model {self.name!r}: parameters.input_ranges {bound.encode()!r}"
            if bound.input not in ins:
                raise ConfigError(f"{where}: no input named {bound.input!r}")
            if not ins[bound.input].dtype.is_float and not (
                float(bound.low).is_integer() and float(bound.high).is_integer()
            ):
                raise ConfigError(f"{where}: input {bound.input!r} holds integers; give integer bounds")
        self._check_preprocess(ins)
        for name in self.params.pad_inputs:
            if name not in ins:
                raise ConfigError(
                    f"model {self.name!r}: parameters.pad_inputs names {name!r}, which is not an input "
                    f"(the inputs are {', '.join(ins)})"
                )
        for same in self.params.same_shape:
            where = f"model {self.name!r}: parameters.same_shape {same.encode()!r}"
            for name in (same.input, same.other):
                if name not in ins:
                    raise ConfigError(f"{where}: no input named {name!r}")
            a, b = ins[same.input].dims, ins[same.other].dims
            if len(a) != len(b) or any(x > 0 and y > 0 and x != y for x, y in zip(a, b)):
                raise ConfigError(f"{where}: their dims {list(a)} and {list(b)} can never be equal")


def _io(model: str, kind: str, item: Mapping[str, Any], *, images: bool = False) -> IOConfig:
    name = item.get("name")
    if not name:
        raise ConfigError(f"model {model!r}: an {kind} has no name")
    dtype_name = item.get("data_type", "")
    try:
        dtype = dtypes.by_name(str(dtype_name))
    except KeyError as exc:
        raise ConfigError(f"model {model!r}: {kind} {name!r}: {exc.args[0]}") from None
    if dtype.short == "string" and not images:
        raise ConfigError(f"model {model!r}: {kind} {name!r}: TYPE_STRING tensors cannot go to an OM model")
    try:
        dims = tuple(int(d) for d in item.get("dims", ()) or ())
    except (TypeError, ValueError):
        raise ConfigError(f"model {model!r}: {kind} {name!r}: dims must be integers") from None
    if any(d < -1 or d == 0 for d in dims):
        raise ConfigError(f"model {model!r}: {kind} {name!r}: dims must be positive or -1, got {list(dims)}")
    if item.get("reshape"):
        raise ConfigError(f"model {model!r}: {kind} {name!r}: reshape is not supported by the ge backend")
    return IOConfig(str(name), dtype, dims)


def read_config_pbtxt(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A config.pbtxt as the mapping Triton would pass to ``initialize`` (field names as in the proto)."""
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    with open(path, encoding="utf-8") as fh:
        try:
            message = text_format.Parse(fh.read(), model_config_pb2.ModelConfig())
        except text_format.ParseError as exc:
            raise ConfigError(f"{os.fspath(path)}: {exc}") from None
    config = json_format.MessageToDict(message, preserving_proto_field_name=True)
    config.setdefault("max_batch_size", 0)
    return config


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
