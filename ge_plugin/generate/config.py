"""What the generation engine is told (``GenerateConfig``) and what it reads from the OM (``Layout``).

The config names each tensor's role; the OM says the rest: layers, heads, head size and context from the
past key/values' fixed dims, the vocabulary from logits, and the gears. ``describe`` checks the two against
each other and answers with every mismatch at once, each naming the tensor, so that the spec layer can put
them under the ``generate:`` section's lines.

The two OM forms:

- ``stacked``: ``past [layers, 2, b, heads, context, head_dim]`` in, ``present [layers, 2, b, heads, s,
  head_dim]`` out;
- ``per_layer``: ``past.format(layer=N, kind="key"|"value")`` ``[b, heads, context, head_dim]`` in, and
  ``present.format(...)`` ``[b, heads, s, head_dim]`` out (Hugging Face's ``past_key_values.N.key`` /
  ``present.N.key``).

Gears: ATC ``--dynamic_dims`` over ``(b, s)``. Decode runs at ``s = 1`` on the batch gears ``(b, 1)``;
prefill at ``b = 1`` on the seq gears ``(1, s)``. Both need ``(1, 1)``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs

from ge_plugin import acl_constants as C
from ge_plugin.device.om import OmModel, TensorInfo
from ge_plugin.errors import ConfigError, ModelFileError

FORMS = ("stacked", "per_layer")
KINDS = ("key", "value")


@attrs.frozen
class GenerateConfig:
    """The roles of the OM's tensors and the serving limits; defaults fit a Hugging Face export."""

    form: str = attrs.field(default="stacked", validator=attrs.validators.in_(FORMS))
    input_ids: str = "input_ids"
    attention_mask: str = "attention_mask"
    position_ids: str = "position_ids"
    logits: str = "logits"
    #: stacked: the tensor's name; per_layer: a pattern with ``{layer}`` and ``{kind}`` (key, value)
    past: str = "past_key_values"
    present: str = "present_key_values"
    eos_ids: tuple[int, ...] = (2,)
    max_tokens: int = 16
    #: prompt tokens prefilled per step at most (a prompt longer than this still gets one chunk a step)
    prefill_tokens_per_step: int = 256
    #: requests waiting for a slot; one more is refused (UNAVAILABLE)
    max_queue: int = 64

    #: responses stream this many tokens each (the Triton adapter's concern, carried with the rest)
    tokens_per_response: int = 1

    @classmethod
    def from_json(cls, text: str) -> GenerateConfig:
        """The ``generate`` config parameter; ConfigError naming what is wrong."""
        try:
            raw = json.loads(text)
            if not isinstance(raw, dict):
                raise ValueError("not a JSON object")
            if "eos_ids" in raw:
                raw["eos_ids"] = tuple(int(i) for i in raw["eos_ids"])
            return cls(**raw)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"parameters.generate: {exc}") from None

    def past_names(self, layers: int) -> list[str]:
        if self.form == "stacked":
            return [self.past]
        return [self.past.format(layer=n, kind=k) for n in range(layers) for k in KINDS]

    def present_names(self, layers: int) -> list[str]:
        if self.form == "stacked":
            return [self.present]
        return [self.present.format(layer=n, kind=k) for n in range(layers) for k in KINDS]


@attrs.frozen
class Layout:
    """The OM's generation geometry, checked against the config."""

    layers: int
    heads: int
    head_dim: int
    context: int
    vocab: int
    batch_gears: tuple[int, ...]
    seq_gears: tuple[int, ...]
    #: data inputs in the OM's index order (without ascend_mbatch_shape_data) and outputs likewise
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]

    @property
    def slots(self) -> int:
        return self.batch_gears[-1]

    @property
    def block(self) -> int:
        """Elements of one sequence's keys (or values) of one layer: heads x context x head_dim."""
        return self.heads * self.context * self.head_dim


class LayoutError(ModelFileError):
    """The OM does not fit the generation contract; ``problems`` lists ``(tensor or role, message)``."""

    def __init__(self, path: str, problems: Sequence[tuple[str, str]]):
        self.problems = list(problems)
        super().__init__(f"{path}: " + "; ".join(f"{where}: {message}" for where, message in problems))


def describe(om: OmModel, config: GenerateConfig) -> Layout:
    """The layout of ``om`` for ``config``; LayoutError naming every mismatch."""
    problems: list[tuple[str, str]] = []
    inputs = {t.name: t for t in om.inputs}
    outputs = {t.name: t for t in om.outputs}

    def find(table: dict[str, TensorInfo], name: str, role: str, kind: str) -> TensorInfo | None:
        info = table.get(name)
        if info is None:
            problems.append((role, f"the OM has no {kind} {name!r} (its {kind}s: {', '.join(table)})"))
        return info

    def expect(info: TensorInfo | None, rank: int, dtypes: Sequence[int], dtype_text: str) -> None:
        if info is None:
            return
        if info.acl_dtype not in dtypes:
            problems.append(
                (info.name, f"dtype must be {dtype_text}, the OM has aclDataType {info.acl_dtype}")
            )
        if len(info.dims) != rank:
            problems.append((info.name, f"must have {rank} dims, the OM has {list(info.dims)}"))

    ints = (C.ACL_INT64,)
    ids = find(inputs, config.input_ids, "input_ids", "input")
    mask = find(inputs, config.attention_mask, "attention_mask", "input")
    positions = find(inputs, config.position_ids, "position_ids", "input")
    logits = find(outputs, config.logits, "logits", "output")
    for info in (ids, mask, positions):
        expect(info, 2, ints, "int64")
    expect(logits, 3, (C.ACL_FLOAT,), "fp32")
    probe = find(inputs, config.past_names(1)[0], "past", "input")
    rank = 6 if config.form == "stacked" else 4
    expect(probe, rank, (C.ACL_FLOAT,), "fp32")
    if problems or probe is None or logits is None:
        raise LayoutError(om.path, problems)
    dims = probe.dims
    if config.form == "stacked":
        layers, heads, context, head_dim = dims[0], dims[3], dims[4], dims[5]
        batch_at = [2]
    else:
        layers = sum(1 for name in inputs if _is_layer_key(config, name))
        heads, context, head_dim = dims[1], dims[2], dims[3]
        batch_at = [0]
    for what, value in (("layers", layers), ("heads", heads), ("context", context), ("head_dim", head_dim)):
        if value <= 0:
            problems.append((probe.name, f"its {what} dim must be fixed, the OM has {list(dims)}"))
    if [i for i, d in enumerate(dims) if d < 0] != batch_at:
        problems.append(
            (probe.name, f"only the batch dim (dim {batch_at[0]}) may be a gear dim, the OM has {list(dims)}")
        )
    vocab = logits.dims[2]
    if vocab <= 0:
        problems.append((logits.name, f"the vocabulary dim must be fixed, the OM has {list(logits.dims)}"))
    past_names = config.past_names(max(layers, 1))
    present_names = config.present_names(max(layers, 1))
    for name in past_names[1:]:
        expect(find(inputs, name, "past", "input"), rank, (C.ACL_FLOAT,), "fp32")
    for name in present_names:
        expect(find(outputs, name, "present", "output"), rank, (C.ACL_FLOAT,), "fp32")
    known = {config.input_ids, config.attention_mask, config.position_ids, *past_names}
    for name in inputs:
        if name not in known:
            problems.append((name, "the OM has this input, which the generate section gives no role"))
    if problems:
        raise LayoutError(om.path, problems)
    batch_gears, seq_gears = _gears(om, config, context, past_names, problems)
    if problems:
        raise LayoutError(om.path, problems)
    return Layout(
        layers=layers,
        heads=heads,
        head_dim=head_dim,
        context=context,
        vocab=vocab,
        batch_gears=batch_gears,
        seq_gears=seq_gears,
        input_names=tuple(t.name for t in om.inputs),
        output_names=tuple(t.name for t in om.outputs),
    )


def _is_layer_key(config: GenerateConfig, name: str) -> bool:
    prefix, _, suffix = config.past.partition("{layer}")
    if not (name.startswith(prefix) and name.endswith(suffix.replace("{kind}", "key"))):
        return False
    middle = name[len(prefix) : len(name) - len(suffix.replace("{kind}", "key"))]
    return middle.isdigit()


def gear_dims(om: OmModel, config: GenerateConfig, context: int, batch: int, seq: int) -> tuple[int, ...]:
    """The concatenated input dims ``set_input_dynamic_dims`` takes for gear ``(batch, seq)``."""
    role = {config.input_ids: (batch, seq), config.position_ids: (batch, seq)}
    role[config.attention_mask] = (batch, context + seq)
    full: list[int] = []
    for info in om.inputs:
        if info.name in role:
            full.extend(role[info.name])
        else:
            full.extend(batch if d < 0 else d for d in info.dims)
    return tuple(full)


def _gears(
    om: OmModel, config: GenerateConfig, context: int, past: Sequence[str], problems: list[tuple[str, str]]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if om.mode != "dims":
        problems.append(
            ("gears", f"the OM must be compiled with --dynamic_dims over (batch, seq); it is {om.mode}")
        )
        return (), ()
    shapes = om.gear_set.shapes([(info.name, info.dims) for info in om.inputs])
    have = {tuple(d for dims in shape for d in dims) for shape in shapes}
    largest = max(max(g) for g in om.gear_set.values)
    batch = tuple(b for b in range(1, largest + 1) if gear_dims(om, config, context, b, 1) in have)
    seq = tuple(s for s in range(1, largest + 1) if gear_dims(om, config, context, 1, s) in have)
    if 1 not in batch:
        problems.append(("gears", "the OM has no gear (batch 1, seq 1), which decode and prefill both need"))
    if len(batch) + len(seq) - 1 < len(have):
        problems.append(
            ("gears", "every gear must be a decode gear (b, 1) or a prefill gear (1, s); the OM has others")
        )
    return batch, seq
