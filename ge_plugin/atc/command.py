"""ModelSpec -> the ATC command line that compiles its OM on an Ascend host.

The spec already says everything ATC needs: the ONNX source, the input shapes with -1 where gears apply,
the gears, the chip and the precision. ATC takes one dynamic mode per model, so:

- batch gears only -> ``--dynamic_batch_size=1,4,8`` with the batch dim -1 in ``--input_shape``;
- image sizes -> ``--dynamic_image_size="224,224;448,448"`` with H and W -1 in ``--input_shape`` and the batch
  dim fixed at the spec's one batch gear (ATC takes no batch gears beside image sizes);
- dims gears (with or without batch gears) -> ``--dynamic_dims`` over the grid batch gears x dims gears,
  each ATC gear listing every -1 dim of every input in order, batch dims included, plus
  ``--input_format=ND`` which ``--dynamic_dims`` requires;
- none -> static ``--input_shape``;
- a ``generate:`` section -> its own ``--input_shape`` and ``--dynamic_dims`` (atc/generate.py): the decode
  gears (b, 1) and the prefill gears (1, s).

An input with ``preprocess`` gets a static AIPP (``--insert_op_conf``): the spec's colour order, mean and std
written as an AIPP config file beside the OM's output path (``<output>_aipp.cfg``, ``atc/aipp.py``), which this
writes when it builds the command, so that the command it prints can be run as it is.

Precision uses ``--precision_mode`` (understood by every CANN release; ``--precision_mode_v2`` is not): origin
-> must_keep_origin_dtype, fp16 -> force_fp16, bf16 -> allow_mix_precision_bf16. The spec's ``atc_options``
follow as ``--flag=value`` in the order written.

A spec with ``versions`` compiles one OM per version, each from its own source into its own folder; every
version shares the spec's tensors and gears (a version with other tensors is another model).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Union

import attrs

from ge_plugin._files import write_atomic
from ge_plugin.atc import aipp
from ge_plugin.atc import generate as generate_flags
from ge_plugin.atc.tables import ONNX_FRAMEWORK
from ge_plugin.errors import AtcError
from ge_plugin.precision import ATC_PRECISION_MODE
from ge_plugin.spec import validators
from ge_plugin.spec.load import show_path
from ge_plugin.spec.model import ModelSpec


def atc_args(
    spec: ModelSpec, *, version: Union[int, None] = None, output: Union[str, os.PathLike[str], None] = None
) -> list[str]:
    """ATC's flags for ``spec`` (without the leading ``atc``), for ``version`` (default: ``model``'s files).

    ``output`` is where ATC writes the OM, without ``.om`` (ATC appends it; a trailing ``.om`` given here is
    dropped). Default: the ONNX source's folder and the OM's file name, e.g. ``build/models/llama`` for
    ``source: ../build/models/tiny_llama.onnx`` and ``om: llama.om``; pass ``REPO/<name>/1/llama`` to
    compile straight into a model repository. AtcError when the spec is one ATC would reject or has no such
    version.
    """
    problems = validators.cross_checks(spec)
    if problems:
        raise AtcError(
            f"{spec.path or spec.name}: ATC would reject this model: "
            + "; ".join(f"{show_path(where)}: {message}" for where, message in problems)
        )
    try:
        source = spec.source_path if version is None else spec.source_path_for(version)
        om = spec.om_filename if version is None else spec.om_filename_for(version)
    except ValueError as exc:
        raise AtcError(str(exc)) from None
    target = _output(source, om, output)
    args = [
        f"--model={source}",
        f"--framework={ONNX_FRAMEWORK}",
        f"--output={target}",
    ]
    if spec.generate is not None:
        args.extend(generate_flags.atc_flags(generate_shapes(spec)))  # the gears among them
    else:
        args.append(f"--input_shape={input_shape(spec)}")
        gears = spec.gear_set
        if gears.kind == "dims":
            args.append("--input_format=ND")
        if gears.flag is not None:
            args.append(f"--{gears.flag}={gears.flag_value()}")
    args.append(f"--soc_version={spec.model.soc_version}")
    args.append(f"--precision_mode={ATC_PRECISION_MODE[spec.precision]}")
    config = aipp_config(spec)
    if config is not None:
        path = Path(f"{target}_aipp.cfg")
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text(encoding="utf-8") != config:
            write_atomic(path, config.encode())
        args.append(f"--insert_op_conf={path}")
    for flag, value in spec.atc_options.items():
        if flag == "input_format" and (spec.dims_gears or spec.generate is not None):
            continue  # already --input_format=ND (validated)
        args.append(f"--{flag}={value}")
    return args


def atc_command(
    spec: ModelSpec, *, version: Union[int, None] = None, output: Union[str, os.PathLike[str], None] = None
) -> str:
    """The whole ``atc ...`` line, shell-quoted, to paste on an Ascend host."""
    return shlex.join(["atc", *atc_args(spec, version=version, output=output)])


def aipp_config(spec: ModelSpec) -> str | None:
    """The AIPP config of the spec's ``preprocess`` input (None without one): DVPP's YUV420SP to the
    spec's colour order and ``(x - mean) / std``, for the input's height and width."""
    found = spec.preprocessed
    if found is None:
        return None
    index, tensor = found
    prep = tensor.preprocess
    assert prep is not None
    section = aipp.for_images(
        bgr=prep.colour == "bgr", mean=prep.mean, std=prep.std, height=tensor.dims[1], width=tensor.dims[2]
    )
    header = (
        f"# AIPP for input {tensor.name} of {spec.name}, written by ge-plugin from the spec's preprocess:\n"
        f"# YUV420SP images from DVPP -> {prep.colour.upper()}, (x - mean) / std\n"
    )
    return header + attrs.evolve(section, related_input_rank=index).text()


def generate_shapes(spec: ModelSpec) -> generate_flags.GenerateShapes:
    """What ATC must know of a generating spec."""
    section = spec.generate
    assert section is not None
    return generate_flags.GenerateShapes(
        form=section.form,
        layers=section.cache.layers,
        heads=section.cache.heads,
        head_dim=section.cache.head_dim,
        context=section.context,
        batch_gears=section.batch_gears,
        seq_gears=section.seq_gears,
        input_ids=section.tensors.input_ids,
        attention_mask=section.tensors.attention_mask,
        position_ids=section.tensors.position_ids,
        past=section.past,
    )


def input_shape(spec: ModelSpec) -> str:
    """``--input_shape``: the model's full shapes, -1 for the batch dim (when batching; its one gear, the
    OM's fixed batch, beside image sizes) and gear dims."""
    return ";".join(f"{name}:{','.join(map(str, dims))}" for name, dims in spec.input_shapes)


def dynamic_dims_gears(spec: ModelSpec) -> list[tuple[int, ...]]:
    """The ATC ``--dynamic_dims`` gears: batch gears x dims gears, batch-major, each the values of every -1
    dim of ``input_shape`` in order (for BERT: ``(1, 16, 1, 16), (1, 32, 1, 32), …``; ``ModelSpec.gear_set``)."""
    gears = spec.gear_set
    return list(gears.values) if gears.kind == "dims" else []


def _output(source: Path, om: str, output: Union[str, os.PathLike[str], None]) -> str:
    if output is None:
        return str(source.parent / Path(om).stem)
    text = os.fspath(output)
    return text[: -len(".om")] if text.endswith(".om") else text
