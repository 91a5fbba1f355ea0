"""The spec language: what a user writes in ``specs/*.yaml``, as attrs classes.

Field names are the YAML keys: cattrs structures them one to one and rejects unknown keys. Dims follow
config.pbtxt: when the model batches they exclude the batch dim, so ``input_ids`` with dims ``[-1]`` is
``[batch, seq]`` on the model. Field checks live in validators.py; rules spanning fields run after
structuring (``validators.cross_checks``). docs/spec.md describes every field.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NewType, Optional, Union

import attrs

from ge_plugin.dtypes import DType
from ge_plugin.gears import GearSet
from ge_plugin.params import (
    IMAGE_FORMATS,
    IMAGE_SIDES,
    MAX_IMAGE_BYTES,
    REQUEST_TENSORS,
    RESIZES,
    DimTie,
    InputRange,
    ModelParams,
    Preprocessing,
    ShapeTie,
)
from ge_plugin.precision import PRECISIONS
from ge_plugin.spec import validators as v

#: field metadata key: the field is not read from YAML (cattrs omits it; the loader fills it in)
NOT_IN_YAML = "ge_plugin.not_in_yaml"

#: an ATC flag value as written in YAML (a string or a number), kept as the string ATC will see
AtcValue = NewType("AtcValue", str)

#: ``dims_gears`` as written: a flat list of ints (shorthand) or a list of lists; normalised after init
DimsGearsInput = tuple[Union[int, tuple[int, ...]], ...]


@attrs.frozen
class ModelFiles:
    """The ``model`` section: the OM file served and what ATC compiles it from."""

    #: OM file name inside the version folder ``<repo>/<name>/1/``; becomes ``om_model_path``
    om: str = attrs.field(validator=v.om_filename)
    #: the ONNX model, relative to the spec file
    source: str = attrs.field(validator=v.onnx_path)
    #: ATC ``--soc_version``
    soc_version: str = attrs.field(validator=v.soc_version)


@attrs.frozen
class VersionFiles:
    """One entry of ``versions``: this version's OM and source, where they differ from ``model``'s.

    Every version lives in its own folder ``<repo>/<name>/<version>/``. Keeping ``om`` the same in every
    version (the default) keeps config.pbtxt the same when a version is added, so Triton loads only the new
    version; a version with its own ``om`` name puts a per-version path in the config.
    """

    #: OM file name inside ``<repo>/<name>/<version>/``; default ``model.om``
    om: Optional[str] = attrs.field(default=None, validator=attrs.validators.optional(v.om_filename))
    #: the ONNX model ATC compiles for this version, relative to the spec file; default ``model.source``
    source: Optional[str] = attrs.field(default=None, validator=attrs.validators.optional(v.onnx_path))


@attrs.frozen
class VersionPolicy:
    """Triton's ``version_policy``: which versions found in the model's folder are served.

    YAML: ``all``, ``{latest: N}`` (the N highest) or ``{specific: [1, 3]}``.
    """

    latest: Optional[int] = attrs.field(default=None, validator=attrs.validators.optional(v.latest_versions))
    specific: Optional[tuple[int, ...]] = attrs.field(
        default=None, validator=attrs.validators.optional(v.version_list)
    )
    #: ``version_policy: all``; written as that word, so not a YAML key
    all_versions: bool = attrs.field(default=False, metadata={NOT_IN_YAML: True})


@attrs.frozen
class DimRef:
    """``input_ids:0``: dim 0 of input ``input_ids`` (counted like config dims)."""

    input: str
    dim: int

    def __str__(self) -> str:
        return f"{self.input}:{self.dim}"


@attrs.frozen
class TensorDecl:
    """One entry of a spec's ``inputs`` or ``outputs``: a tensor as the model's author declares it. (The fast
    path's ``TensorSpec`` is what the engine builds from the config to check requests against.)"""

    name: str = attrs.field(validator=v.tensor_name)
    #: ``fp32``, ``TYPE_FP32``, ``float32``, ``bf16``... (``ge_plugin.dtypes.by_name``); not string
    dtype: DType = attrs.field(validator=v.tensor_dtype)
    #: config dims: -1 for dynamic; without the batch dim when the model batches
    dims: tuple[int, ...] = attrs.field(validator=v.dims)


@attrs.frozen
class Preprocess:
    """``preprocess:`` of an image input: requests send encoded images instead of the tensor; the backend
    decodes and resizes them on the device with DVPP into the input's height and width, and the AIPP that
    ``ge-plugin atc`` compiles into the OM converts them to the model's colours and normalisation. The input's
    own ``dtype`` and ``dims`` stay the model's ([3, H, W] floats): they are what ATC compiles."""

    #: what requests send: jpeg (DVPP's JPEGD decodes baseline JPEGs)
    format: str = attrs.field(default="jpeg", validator=v.one_of(IMAGE_FORMATS))
    #: how: uint8 (TYPE_UINT8 [-1]: an image's bytes per row) or bytes (TYPE_STRING [1]: one image per element)
    request: str = attrs.field(default="uint8", validator=v.one_of(tuple(REQUEST_TENSORS)))
    #: stretch: resized to H x W; letterbox: scaled to fit with its aspect kept, centred on black
    resize: str = attrs.field(default="stretch", validator=v.one_of(RESIZES))
    #: the channel order the model takes
    colour: str = attrs.field(default="rgb", validator=v.one_of(("rgb", "bgr")))
    #: per channel, subtracted from the 0..255 pixel values (in ``colour``'s order)
    mean: tuple[float, ...] = attrs.field(default=(0.0, 0.0, 0.0), validator=v.channel_means)
    #: per channel, what the pixel minus the mean is divided by
    std: tuple[float, ...] = attrs.field(default=(1.0, 1.0, 1.0), validator=v.channel_stds)
    #: the largest encoded image a request may send, in bytes (each lane holds a batch of them, allocated once)
    max_bytes: int = attrs.field(
        default=4 << 20,
        validator=v.between(
            1, MAX_IMAGE_BYTES, "every lane allocates pinned and DVPP memory for a batch of them"
        ),
    )
    #: the longest side (pixels) of an image a request may send: each lane's decode buffer is sized for it
    max_side: int = attrs.field(
        default=4096,
        validator=v.between(IMAGE_SIDES[0], IMAGE_SIDES[1], "JPEGD decodes 32 to 8192 pixels a side"),
    )


@attrs.frozen
class InputDecl(TensorDecl):
    #: [low, high], inclusive: the values a request may hold (token ids within the vocabulary, a 0/1 mask);
    #: anything else is refused with 400 before it reaches the device
    range: Optional[tuple[Any, Any]] = attrs.field(default=None, validator=v.value_range)
    #: another input whose shape this one's must equal (``attention_mask`` with ``same_as: input_ids``)
    same_as: Optional[str] = None
    #: a request may be shorter than a gear along this input's -1 dims, and is padded with ``pad_value``
    #: (right for token ids with a mask, or a causal model; wrong for pixels); false: it must match a gear
    pad: bool = False
    #: requests send encoded images for this input, decoded and resized on the device (docs/spec.md)
    preprocess: Optional[Preprocess] = None


@attrs.frozen
class OutputDecl(TensorDecl):
    #: output dim -> the input dim whose length it has, so padded outputs can be trimmed back per request
    follows: dict[int, DimRef] = attrs.field(factory=dict)


@attrs.frozen
class QueuePolicy:
    """Triton's ``default_queue_policy``: what happens to requests that wait too long."""

    #: requests waiting beyond this are rejected (0 = no limit)
    max_size: int = attrs.field(default=0, validator=v.uint_field(32, "max_queue_size"))
    #: a request still queued after this long gets timeout_action (0 = no timeout)
    timeout_us: int = attrs.field(default=0, validator=v.uint_field(64, "default_timeout_microseconds"))
    timeout_action: str = attrs.field(default="reject", validator=v.one_of(("reject", "delay")))


@attrs.frozen
class Batching:
    """Triton dynamic batching over the model's batch gears (ATC ``--dynamic_batch_size``)."""

    #: batch sizes the OM is compiled for, strictly ascending; the largest is max_batch_size
    gears: tuple[int, ...] = attrs.field(validator=v.batch_gears)
    max_queue_delay_us: int = attrs.field(
        default=0, validator=v.uint_field(64, "max_queue_delay_microseconds")
    )
    queue: QueuePolicy = attrs.field(factory=QueuePolicy)
    #: Triton's preferred_batch_size; None: the largest gear only. Triton sends a pending batch of a preferred
    #: size at once, so a small gear listed here (1, say) means a lone request never waits for batch-mates.
    preferred_batch_sizes: Optional[tuple[int, ...]] = None

    @property
    def preferred(self) -> tuple[int, ...]:
        return self.preferred_batch_sizes if self.preferred_batch_sizes is not None else self.gears[-1:]


@attrs.frozen
class Placement:
    """Where instances run: ``instances_per_device`` Triton instances on each NPU."""

    devices: tuple[int, ...] = attrs.field(default=(0,), validator=v.device_ids)
    instances_per_device: int = attrs.field(
        default=1,
        validator=v.between(
            1,
            v.MAX_INSTANCES_PER_DEVICE,
            f"each instance takes at least two of a device's {v.DEVICE_STREAMS} streams (its context's default "
            "stream and one to run requests on)",
        ),
    )
    streams_per_instance: int = attrs.field(
        default=1,
        validator=v.between(
            1,
            v.MAX_STREAMS_PER_INSTANCE,
            f"a device has {v.DEVICE_STREAMS} streams ({v.DEVICE_STREAMS_WHY}) and the instance's context takes "
            "one as its default stream",
        ),
    )


@attrs.frozen
class TokenizerFiles:
    """The ``tokenizer`` section: a Hugging Face checkpoint's tokenizer files, relative to the spec file.
    ``ge-plugin render`` copies them beside the model; the front encodes and decodes text with them."""

    #: the checkpoint's ``tokenizer.json``
    file: str = attrs.field(validator=v.json_file)
    #: its ``tokenizer_config.json`` (special tokens, chat template); None: the checkpoint has none
    config: Optional[str] = attrs.field(default=None, validator=attrs.validators.optional(v.json_file))


@attrs.frozen
class GenerateTensors:
    """The OM tensor of each role in generation (docs/generate.md); Hugging Face's names by default."""

    input_ids: str = attrs.field(default="input_ids", validator=v.tensor_name)
    attention_mask: str = attrs.field(default="attention_mask", validator=v.tensor_name)
    position_ids: str = attrs.field(default="position_ids", validator=v.tensor_name)
    logits: str = attrs.field(default="logits", validator=v.tensor_name)
    #: stacked: the tensor; per_layer: a pattern with {layer} and {kind} (default past_key_values.{layer}.{kind})
    past: Optional[str] = attrs.field(default=None, validator=attrs.validators.optional(v.tensor_name))
    #: stacked: default present_key_values; per_layer: default present.{layer}.{kind}
    present: Optional[str] = attrs.field(default=None, validator=attrs.validators.optional(v.tensor_name))


@attrs.frozen
class CacheShape:
    """The past key/values' fixed dims: layers, heads (key/value heads) and head size."""

    layers: int = attrs.field(validator=v.between(1, 4096, "no exported LLM has more layers"))
    heads: int = attrs.field(validator=v.between(1, 4096, "no exported LLM has more key/value heads"))
    head_dim: int = attrs.field(validator=v.between(1, 4096, "no exported LLM has larger heads"))


@attrs.frozen
class GenerateSection:
    """``generate:``: the model generates tokens; the backend batches sequences step by step itself."""

    #: tokens a sequence can hold (prompt + generated): the past key/values' kv_len
    context: int = attrs.field(validator=v.between(1, 1 << 20, "a context beyond 1M tokens is no OM's"))
    cache: CacheShape
    #: logits' last dim
    vocab: int = attrs.field(validator=v.between(1, 1 << 22, "no tokenizer has more ids"))
    #: decode batch sizes (b, 1); the largest is how many sequences generate at once (the slots)
    batch_gears: tuple[int, ...] = attrs.field(validator=v.batch_gears)
    #: prefill chunk lengths (1, s)
    seq_gears: tuple[int, ...] = attrs.field(validator=v.seq_gears)
    form: str = attrs.field(default="stacked", validator=v.one_of(("stacked", "per_layer")))
    tensors: GenerateTensors = attrs.field(factory=GenerateTensors)
    eos_ids: tuple[int, ...] = (2,)
    #: generated tokens when a request does not say
    max_tokens: int = attrs.field(default=16, validator=v.between(1, 1 << 20, "the context bounds it anyway"))
    #: a streamed response carries this many tokens (the last one fewer)
    tokens_per_response: int = attrs.field(
        default=1, validator=v.between(1, 4096, "beyond that, stream: false")
    )
    #: requests waiting for a slot before one more is refused UNAVAILABLE
    max_queue: int = attrs.field(
        default=64, validator=v.between(0, 1 << 20, "a queue that long never drains")
    )
    #: prompt tokens prefilled per step at most (at least one chunk); bounds how long decode waits for prefill
    prefill_tokens_per_step: int = attrs.field(
        default=256, validator=v.between(1, 1 << 20, "a step would stall every sequence")
    )

    @property
    def past(self) -> str:
        default = "past_key_values" if self.form == "stacked" else "past_key_values.{layer}.{kind}"
        return self.tensors.past or default

    @property
    def present(self) -> str:
        default = "present_key_values" if self.form == "stacked" else "present.{layer}.{kind}"
        return self.tensors.present or default

    def engine_json(self) -> str:
        """The ``generate`` config parameter: what the backend's generation engine is told."""
        return json.dumps(
            {
                "form": self.form,
                "input_ids": self.tensors.input_ids,
                "attention_mask": self.tensors.attention_mask,
                "position_ids": self.tensors.position_ids,
                "logits": self.tensors.logits,
                "past": self.past,
                "present": self.present,
                "eos_ids": list(self.eos_ids),
                "max_tokens": self.max_tokens,
                "prefill_tokens_per_step": self.prefill_tokens_per_step,
                "max_queue": self.max_queue,
                "tokens_per_response": self.tokens_per_response,
            },
            sort_keys=True,
            separators=(",", ":"),
        )


@attrs.frozen
class ModelSpec:
    """One model: what Triton serves, how ATC compiles it, how the ``ge`` backend runs it."""

    #: Triton model name (its directory in the repository)
    name: str = attrs.field(validator=v.model_name)
    model: ModelFiles
    #: none with ``generate`` (its Triton tensors are fixed, docs/generate.md); else at least one each
    inputs: tuple[InputDecl, ...] = ()
    outputs: tuple[OutputDecl, ...] = ()
    #: None: no Triton batching, max_batch_size 0, dims are the model's full dims
    batching: Optional[Batching] = None
    #: per gear, the value of every -1 input dim (not the batch dim), in input order; ATC ``--dynamic_dims``
    dims_gears: DimsGearsInput = attrs.field(default=(), validator=v.dims_gears)
    #: (height, width) gears of the -1 H and W of NCHW inputs; ATC ``--dynamic_image_size``
    image_sizes: tuple[tuple[int, ...], ...] = attrs.field(default=(), validator=v.image_sizes)
    placement: Placement = attrs.field(factory=Placement)
    precision: str = attrs.field(default="origin", validator=v.one_of(PRECISIONS))
    #: extra ATC flags, without dashes (``log: error`` -> ``--log=error``)
    atc_options: dict[str, AtcValue] = attrs.field(factory=dict, validator=v.atc_options)
    #: runtime options for acl.init, as the acl.json file would hold them
    acl_json: dict[str, Any] = attrs.field(factory=dict, validator=v.json_object)
    #: executes per gear at start-up (0 = off)
    warmup: int = attrs.field(
        default=1,
        validator=v.between(
            0,
            v.MAX_WARMUP,
            "warm-up runs every gear this many times on every stream before Triton marks the model ready, and "
            "first-run costs are paid by the first run",
        ),
    )
    #: the value padding fills inputs with, up to a gear
    pad_value: float = attrs.field(default=0.0, validator=v.finite)
    metrics_interval_ms: int = attrs.field(
        default=1000,
        validator=v.between(
            1,
            v.MAX_METRICS_INTERVAL_MS,
            "the backend publishes its counters this often, so a longer interval only hides them",
        ),
    )
    #: Triton versions: number -> its OM and source where they differ from ``model``; empty: version 1 only
    versions: dict[int, VersionFiles] = attrs.field(factory=dict, validator=v.version_numbers)
    #: None: Triton's default, the latest version only
    version_policy: Optional[VersionPolicy] = None
    #: None: no text in or out (a client sends token ids)
    tokenizer: Optional[TokenizerFiles] = None
    #: the model generates: prompt ids in, tokens streamed out (docs/generate.md)
    generate: Optional[GenerateSection] = None
    #: the spec file, as given; relative paths in the spec are relative to its folder
    path: Optional[Path] = attrs.field(default=None, eq=False, metadata={NOT_IN_YAML: True})

    @property
    def preprocessed(self) -> tuple[int, InputDecl] | None:
        """The input whose requests send encoded images, with its index; None without one."""
        return next(((k, i) for k, i in enumerate(self.inputs) if i.preprocess is not None), None)

    def __attrs_post_init__(self) -> None:
        # The shorthand [16, 32] means "every -1 dim takes this value"; expand it to one value per -1 dim so
        # that everything downstream (params, ATC) sees one form.
        gears = self.dims_gears
        slots = len(self.dynamic_dims)
        if gears and slots and all(isinstance(gear, int) for gear in gears):
            object.__setattr__(self, "dims_gears", tuple((gear,) * slots for gear in gears))

    @property
    def dims_gear_values(self) -> tuple[tuple[int, ...], ...]:
        """``dims_gears`` as tuples, one value per -1 dim (a lone int is left only where no input has a -1
        dim, which the cross checks refuse)."""
        return tuple((gear,) if isinstance(gear, int) else gear for gear in self.dims_gears)

    @property
    def gear_set(self) -> GearSet:
        """The gears ATC compiles for this spec: its batch gears, image sizes, or the grid of batch gears x
        dims gears (``ge_plugin.gears``). A generating model's are its ``generate`` section's
        (``ge_plugin.atc.generate``)."""
        return GearSet.compose(
            batch=self.gears,
            dims=self.dims_gear_values,
            image_sizes=self.image_sizes,
            inputs=[(t.name, t.dims) for t in self.inputs],
            batched=self.batching is not None,
        )

    @property
    def input_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        """Each input's name and full dims as ATC's ``--input_shape`` gives them: the batch first when the
        model batches (-1, or beside image sizes the OM's one fixed batch), -1 where a gear sets the length."""
        batch: tuple[int, ...] = ()
        if self.batching is not None:
            batch = (self.batching.gears[0],) if self.image_sizes else (-1,)
        return [(t.name, (*batch, *t.dims)) for t in self.inputs]

    @property
    def max_batch_size(self) -> int:
        return max(self.batching.gears, default=0) if self.batching is not None else 0

    @property
    def gears(self) -> tuple[int, ...]:
        """Batch gears; empty when the model does not batch."""
        return self.batching.gears if self.batching is not None else ()

    @property
    def om_filename(self) -> str:
        """The OM file name of ``model``: every version's unless the version names its own."""
        return self.model.om

    @property
    def source_path(self) -> Path:
        """The ONNX model of ``model``, relative to the spec file's folder (normalised, not made absolute)."""
        return self._relative(self.model.source)

    @property
    def version_numbers(self) -> tuple[int, ...]:
        """The versions this spec compiles and renders a folder for, ascending; (1,) without ``versions``."""
        return tuple(sorted(self.versions)) or (1,)

    def version_files(self, version: int) -> VersionFiles:
        """``versions[version]``; ValueError naming the spec's versions for one it does not have."""
        if version not in self.version_numbers:
            shown = ", ".join(map(str, self.version_numbers))
            raise ValueError(f"model {self.name!r} has no version {version} (its versions: {shown})")
        return self.versions.get(version, VersionFiles())

    def om_filename_for(self, version: int) -> str:
        return self.version_files(version).om or self.model.om

    def source_path_for(self, version: int) -> Path:
        return self._relative(self.version_files(version).source or self.model.source)

    def tokenizer_sources(self) -> tuple[Path, Path | None] | None:
        """The tokenizer files, relative to the spec file's folder; None without a ``tokenizer`` section."""
        if self.tokenizer is None:
            return None
        config = self.tokenizer.config
        return self._relative(self.tokenizer.file), self._relative(config) if config is not None else None

    def _relative(self, path: str) -> Path:
        base = self.path.parent if self.path is not None else Path()
        return Path(os.path.normpath(base / path))

    @property
    def dynamic_dims(self) -> tuple[tuple[int, int], ...]:
        """(input index, dim index) of every -1 input dim, in order: the slots a dims gear fills."""
        return tuple(
            (i, d) for i, tensor in enumerate(self.inputs) for d, dim in enumerate(tensor.dims) if dim == -1
        )

    @property
    def dim_ties(self) -> tuple[DimTie, ...]:
        return tuple(
            DimTie(output.name, dim, ref.input, ref.dim)
            for output in self.outputs
            for dim, ref in sorted(output.follows.items())
        )

    def to_params(self) -> ModelParams:
        """The ``parameters`` the ``ge`` backend reads (see ge_plugin.params and docs/config.md)."""
        return ModelParams(
            om_model_path=self.model.om,
            device_ids=self.placement.devices,
            gears=self.gears,
            dims_gears=self.dims_gear_values,
            image_sizes=tuple((size[0], size[1]) for size in self.image_sizes),
            output_dim_ties=self.dim_ties,
            pad_inputs=tuple(i.name for i in self.inputs if i.pad),
            input_ranges=tuple(InputRange(i.name, *i.range) for i in self.inputs if i.range is not None),
            same_shape=tuple(ShapeTie(i.name, i.same_as) for i in self.inputs if i.same_as is not None),
            pad_value=float(self.pad_value),
            precision=self.precision,
            streams_per_instance=self.placement.streams_per_instance,
            acl_json=json.dumps(self.acl_json, sort_keys=True, separators=(",", ":"))
            if self.acl_json
            else "",
            warmup=self.warmup,
            metrics_interval_ms=self.metrics_interval_ms,
            generate=self.generate.engine_json() if self.generate is not None else "",
            preprocess=next(
                (
                    Preprocessing(
                        i.name,
                        i.preprocess.format,
                        i.preprocess.request,
                        i.preprocess.resize,
                        i.preprocess.max_bytes,
                        i.preprocess.max_side,
                    )
                    for i in self.inputs
                    if i.preprocess is not None
                ),
                None,
            ),
            version_om_model_paths=tuple(
                (version, files.om)
                for version, files in sorted(self.versions.items())
                if files.om is not None and files.om != self.model.om
            ),
        )
