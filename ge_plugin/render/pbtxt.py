"""ModelSpec -> Triton ``ModelConfig`` protobuf -> config.pbtxt text.

The config is built as a ``model_config_pb2.ModelConfig`` (so Triton's own schema checks every field name
and enum) and printed with ``google.protobuf.text_format``, which orders fields by number and map entries
by key: the same spec always gives the same bytes. Everything the ``ge`` backend needs beyond Triton's own
fields travels in ``parameters`` (ge_plugin.params), so a hand-written config works without a spec.
"""

from __future__ import annotations

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from ge_plugin import generate_io
from ge_plugin.params import REQUEST_TENSORS
from ge_plugin.spec.model import ModelSpec
from ge_plugin.text import files as tokenizer_files

BACKEND = "ge"

_TIMEOUT_ACTIONS = {"reject": mc.ModelQueuePolicy.REJECT, "delay": mc.ModelQueuePolicy.DELAY}


def render_config(spec: ModelSpec) -> mc.ModelConfig:
    config = mc.ModelConfig(name=spec.name, backend=BACKEND, max_batch_size=spec.max_batch_size)
    _set_version_policy(config, spec)
    _set_tensors(config, spec)
    _set_dynamic_batching(config, spec)
    _set_instance_groups(config, spec)
    _set_parameters(config, spec)
    return config


def render_text(spec: ModelSpec) -> str:
    """config.pbtxt for ``spec``: deterministic, newline-terminated, ``max_batch_size`` always present.

    text_format prints fields by number, which would put ``backend`` last; the head (name, backend,
    max_batch_size) is printed first on its own, as people write it, and the rest after it. proto3 does not
    print a zero max_batch_size, and Triton fills a missing one in by itself, so that line is written out.
    """
    config = render_config(spec)
    head = mc.ModelConfig(name=config.name, backend=config.backend)
    rest = mc.ModelConfig()
    rest.CopyFrom(config)
    for field in ("name", "backend", "max_batch_size"):
        rest.ClearField(field)
    source = spec.path.name if spec.path is not None else "a ge-plugin spec"
    return (
        f"# Rendered by `ge-plugin render` from {source}: edit the spec, not this file.\n"
        + text_format.MessageToString(head)
        + f"max_batch_size: {config.max_batch_size}\n"
        + text_format.MessageToString(rest, use_short_repeated_primitives=True)
    )


def _set_version_policy(config: mc.ModelConfig, spec: ModelSpec) -> None:
    """Written only when the spec gives one: Triton's default is the latest version alone."""
    policy = spec.version_policy
    if policy is None:
        return
    if policy.all_versions:
        config.version_policy.all.SetInParent()
    elif policy.latest is not None:
        config.version_policy.latest.num_versions = policy.latest
    elif policy.specific is not None:
        config.version_policy.specific.versions.extend(policy.specific)


def _set_tensors(config: mc.ModelConfig, spec: ModelSpec) -> None:
    """Inputs with a -1 dim allow ragged batches when the model batches.

    Triton's dynamic batcher otherwise batches only requests whose tensors have the same shape, so requests
    of different lengths would each run alone. The ge backend receives every request's tensor on its own and
    pads the batch to a sequence gear itself, so raggedness costs it nothing.

    An input with ``preprocess`` is what its requests carry (``params.REQUEST_TENSORS``): an image's bytes as
    TYPE_UINT8 [-1] (ragged: images differ in length) or one TYPE_STRING element per image; the OM's own
    input behind it takes what DVPP writes.

    A generating model has the fixed tensors of generate_io, and is decoupled: it answers each request
    with a stream of responses, as it generates.
    """
    if spec.generate is not None:
        for name, dtype, dims, optional in generate_io.INPUTS:
            config.input.add(name=name, data_type=mc.DataType.Value(dtype), dims=dims, optional=optional)
        for name, dtype, dims in generate_io.OUTPUTS:
            config.output.add(name=name, data_type=mc.DataType.Value(dtype), dims=dims)
        config.model_transaction_policy.decoupled = True
        return
    for tensors, field in ((spec.inputs, config.input), (spec.outputs, config.output)):
        for tensor in tensors:
            dtype, dims = tensor.dtype.triton, tensor.dims
            prep = getattr(tensor, "preprocess", None)
            if prep is not None:
                dtype, dims = REQUEST_TENSORS[prep.request]
            item = field.add(name=tensor.name, data_type=mc.DataType.Value(dtype), dims=dims)
            if field is config.input and spec.batching is not None and -1 in dims:
                item.allow_ragged_batch = True


def _set_dynamic_batching(config: mc.ModelConfig, spec: ModelSpec) -> None:
    """Triton forms batches up to the largest gear; the backend pads whatever comes to the next gear.

    Only the largest gear is preferred by default: Triton sends a pending batch of a preferred size at once,
    so listing gear 1 would send every lone request without waiting max_queue_delay for batch-mates.
    """
    if spec.batching is None:
        return
    batching = config.dynamic_batching
    batching.preferred_batch_size.extend(spec.batching.preferred)
    batching.max_queue_delay_microseconds = spec.batching.max_queue_delay_us
    queue = spec.batching.queue
    if queue.max_size or queue.timeout_us or queue.timeout_action != "reject":
        policy = batching.default_queue_policy
        policy.max_queue_size = queue.max_size
        policy.default_timeout_microseconds = queue.timeout_us
        policy.timeout_action = _TIMEOUT_ACTIONS[queue.timeout_action]


def _set_instance_groups(config: mc.ModelConfig, spec: ModelSpec) -> None:
    """One group per NPU, named after it: the backend reads the device from the instance name (npu3_0)."""
    for device in spec.placement.devices:
        config.instance_group.add(
            name=f"npu{device}",
            kind=mc.ModelInstanceGroup.KIND_CPU,
            count=spec.placement.instances_per_device,
        )


def _set_parameters(config: mc.ModelConfig, spec: ModelSpec) -> None:
    for key, value in spec.to_params().to_parameters().items():
        config.parameters[key].string_value = value
    if spec.tokenizer is not None:  # the copies write_repository puts beside the model
        config.parameters[tokenizer_files.TOKENIZER_JSON].string_value = tokenizer_files.JSON_NAME
        if spec.tokenizer.config is not None:
            config.parameters[tokenizer_files.TOKENIZER_CONFIG].string_value = tokenizer_files.CONFIG_NAME
