"""A GE backend config -> the spec that builds the same model as an OM with gears, on the same devices.

What maps and how (docs/migrate.md has the table):

- tensors, ``max_batch_size``, ``dynamic_batching`` (delay, preferred sizes, queue policy) -> the same spec
  fields; inputs and outputs the config leaves out are read from the model file, as the GE backend does; the ONNX the GE backend compiled on the server (the first ``*.onnx`` under the model folder, as it
  searched) becomes ``model.source``, compiled once by ATC for the chip given on the command line;
- gears: ``graph.ge.inputShape`` + ``graph.ge.dynamicDims`` become batch gears and ``dims_gears``; without
  them the GE backend compiled a dynamic-shape graph, so batch gears are derived (powers of two up to
  ``max_batch_size``, plus the preferred sizes) and other ``-1`` dims need ``--dims-gears``;
- ``device_ids`` -> ``placement.devices`` (renumbered 0..N-1 with ``renumber_devices``, as a pod numbers its
  NPUs); ``instance_group`` counts, ``device_exec_blocks`` and
  ``instance_exec_blocks`` -> instances per device and streams per instance, so each NPU runs as many
  graphs at once as the GE backend's blocks did;
- ``precision_mode(_v2)`` -> ``precision`` where ge-plugin has the same mode.

Launch settings (``tritonserver --backend-config=npu_ge,KEY=VALUE``) count as parameters the config does not
set; GEInitialize's global ``ge.`` options among them are noted. Everything else is listed as a Note with its
reason; nothing is dropped silently.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
from tritonclient.grpc import model_config_pb2 as mc

from ge_plugin import dtypes
from ge_plugin import precision as P
from ge_plugin.errors import MigrateError
from ge_plugin.gears import MAX_GEARS, GearSet
from ge_plugin.migrate import model_io
from ge_plugin.migrate.ge_config import (
    FIXED_KEYS,
    GLOBAL_PREFIX,
    GeConfig,
    parse_dynamic_dims,
    parse_input_shape,
)
from ge_plugin.spec.model import (
    Batching,
    InputDecl,
    ModelFiles,
    ModelSpec,
    OutputDecl,
    Placement,
    QueuePolicy,
)

#: GE option -> what ge-plugin does with it instead (consumed into gears, or set by ge-plugin itself)
GEAR_OPTIONS = ("ge.inputShape", "ge.dynamicDims", "ge.dynamicNodeType")
#: precision_mode(_v2) values ge-plugin has an exact equivalent for
PRECISIONS = {
    f"ge.exec.{flag}": P.precision_of(flag, exact=True) for flag in (P.PRECISION_MODE_V2, P.PRECISION_MODE)
}
#: GE options a GE session or graph needed that an OM served by pyACL has no use for
RUNTIME_OPTIONS = {
    "ge.graphRunMode": "GE's graph (0) or training (1) mode; an OM is an inference model",
    "ge.exec.deviceId": "the GE backend's device choice; ge-plugin places instances by placement.devices",
    "ge.session_device_id": "the GE backend's device choice; ge-plugin places instances by placement.devices",
    "ge.constLifecycle": "GE session memory policy; an OM holds its weights for the life of the loaded model",
}


@attrs.frozen
class Note:
    """One key of the config that did not carry over as is."""

    line: int
    key: str
    carried: bool  #: True: carried with a change (said why); False: not carried (said why)
    reason: str


@attrs.frozen
class Migration:
    """The spec, the fields to write even at their default (what the GE config stated), and every note.

    The spec is built with validators off: ``ge_plugin.spec.load.spec_problems`` says what in it a spec
    refuses (a value the GE config allowed and a spec does not), all at once."""

    spec: ModelSpec
    shown: tuple[str, ...]
    notes: tuple[Note, ...]


#: ``note(line, key, reason, *, carried=False)``: records a Note
Noter = Callable[..., None]


def migrate(
    ge: GeConfig,
    *,
    soc_version: str,
    spec_dir: Path,
    batch_gears: Sequence[int] | None = None,
    dims_gears: Sequence[Sequence[int]] | None = None,
    backend_config: Sequence[tuple[str, str, str]] = (),
    renumber_devices: bool = False,
) -> Migration:
    notes: list[Note] = []

    def note(line: int, key: str, reason: str, *, carried: bool = False) -> None:
        notes.append(Note(line, key, carried, reason))

    ge = _with_launch_settings(ge, backend_config, note)
    source = _model_file(ge, note)
    inputs, outputs = _io(ge, source, note)
    _tensor_notes(ge, note)
    gear_batches, gear_dims = _ge_gears(ge, inputs, note)
    if batch_gears is not None:
        gear_batches = list(batch_gears)
    dynamic = [(t["name"], d) for t in inputs for d, dim in enumerate(t["dims"]) if dim == -1]
    if dims_gears is not None:
        gear_dims = _given_dims_gears(dims_gears, len(dynamic))
    if dynamic and not gear_dims:
        raise _no_dims_gears(ge, dynamic)
    batching_spec, inputs, outputs = _batched(ge, gear_batches, inputs, outputs, note)
    _note_dynamic_outputs(ge, outputs, note)
    files = {
        "om": f"{ge.name}.om" if source.suffix == ".onnx" else f"{source.stem}.om",
        "source": _relative(source.with_suffix(".onnx"), spec_dir),
        "soc_version": soc_version,
    }
    dims_gears = (
        tuple(tuple(g) for g in gear_dims) if gear_dims and _dims_gears_apply(ge, dynamic, note) else ()
    )
    placement = _placement(ge, note, renumber_devices)
    precision = _precision(ge, note)
    _other_parameters(ge, note)
    _other_fields(ge, note)
    named = {n.key.removeprefix("parameters.") for n in notes if n.line == 0}
    for key in sorted(ge.launch - named):
        note(
            0,
            key,
            f"{ge.parameters[key]}: a launch setting of the GE backend, carried as this model's",
            carried=True,
        )
    notes.sort(key=lambda n: (n.line, n.key))
    with (
        attrs.validators.disabled()
    ):  # spec_problems reports every problem at once (not thread-safe; one CLI)
        spec = ModelSpec(
            name=ge.name,
            model=ModelFiles(**files),
            inputs=tuple(InputDecl(t["name"], dtypes.by_name(t["dtype"]), tuple(t["dims"])) for t in inputs),
            outputs=tuple(
                OutputDecl(t["name"], dtypes.by_name(t["dtype"]), tuple(t["dims"])) for t in outputs
            ),
            batching=_batching_spec(batching_spec),
            dims_gears=dims_gears,
            placement=Placement(
                devices=tuple(placement["devices"]),
                instances_per_device=placement["instances_per_device"],
                streams_per_instance=placement["streams_per_instance"],
            ),
            precision=precision,
        )
    shown = ["placement", "precision"]
    shown += [f"batching.{key}" for key in ("max_queue_delay_us", "queue") if key in (batching_spec or {})]
    return Migration(spec=spec, shown=tuple(shown), notes=tuple(notes))


def _batching_spec(batching: dict[str, Any] | None) -> Batching | None:
    """The spec's batching from what ``_batching`` found (validators off, as for the whole spec)."""
    if batching is None:
        return None
    preferred = batching.get("preferred_batch_sizes")
    return Batching(
        gears=tuple(batching["gears"]),
        max_queue_delay_us=batching.get("max_queue_delay_us", 0),
        queue=QueuePolicy(**batching["queue"]) if "queue" in batching else QueuePolicy(),
        preferred_batch_sizes=tuple(preferred) if preferred is not None else None,
    )


def _with_launch_settings(ge: GeConfig, settings: Sequence[tuple[str, str, str]], note: Noter) -> GeConfig:
    """``--backend-config`` settings as the GE backend takes them: its fixed keys and ``session.``/``graph.``/
    ``global.`` options are parameters the config does not set (the config's own value is kept where both
    do); ``ge.`` keys are GEInitialize's global options; other backends' settings are not this model's."""
    parameters = dict(ge.parameters)
    launch = set()
    for backend, key, value in settings:
        shown = f"{backend},{key}"
        if backend != "npu_ge":
            note(0, shown, f"a setting of backend {backend!r}, not of the GE backend (npu_ge)")
        elif key.startswith(GLOBAL_PREFIX):
            note(
                0,
                key,
                f"{value}: a GEInitialize (global) option of the GE backend's online compilation and execution; an "
                "OM runs through pyACL, which takes no GE options (an ATC option of the same effect goes in "
                "atc_options under ATC's name)",
            )
        elif key in ge.parameters and key not in ge.launch:
            note(
                0,
                key,
                f"{value}: config.pbtxt sets it too (line {ge.line_of_parameter(key)}); the spec takes the config's "
                f"value {ge.parameters[key]!r}",
            )
        elif key in FIXED_KEYS or key.startswith(("session.", "graph.", "global.")):
            parameters[key] = value
            launch.add(key)
        else:
            note(0, key, f"{value}: not a setting the GE backend reads")
    if not launch:
        return ge
    return attrs.evolve(ge, parameters=parameters, launch=frozenset(launch | set(ge.launch)))


def _given_dims_gears(dims_gears: Sequence[Sequence[int]], dynamic: int) -> list[list[int]]:
    """``--dims-gears``: one value per -1 dim, or one value that every -1 dim takes (16,32)."""
    gears = [list(g) for g in dims_gears]
    if dynamic and all(len(g) == 1 for g in gears):
        return [g * dynamic for g in gears]
    return gears


def _dims_gears_apply(ge: GeConfig, dynamic: list[tuple[str, int]], note: Noter) -> bool:
    """Whether dims gears go into the spec: only where the config has -1 dims (else a note says why not)."""
    if not dynamic:
        note(
            ge.line_of_parameter(_gear_key(ge)),
            _gear_key(ge),
            "gears over dims the config declares fixed: the config's dims win",
        )
    return bool(dynamic)


def _io(ge: GeConfig, source: Path, note: Noter) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The config's inputs and outputs; those it omits read from the model file, as the GE backend does
    (CANN's resnet example leaves both out)."""
    inputs = _tensors(ge, "input", ge.config.input, note)
    outputs = _tensors(ge, "output", ge.config.output, note)
    if inputs and outputs:
        return inputs, outputs
    missing = " and ".join(kind for kind, found in (("inputs", inputs), ("outputs", outputs)) if not found)
    if not source.is_file():
        raise MigrateError(
            f"{ge.path}: the config lists no {missing} and there is no model file to read them from (the GE "
            f"backend read them from the ONNX model): put {source.name} under {ge.path.parent}, or add input/output "
            "to the config (names, data_type, dims)"
        )
    read_inputs, read_outputs = model_io.read_io(source)
    if not inputs:
        inputs = _from_model(ge, source, "input", read_inputs, note)
    if not outputs:
        outputs = _from_model(ge, source, "output", read_outputs, note)
    return inputs, outputs


def _from_model(
    ge: GeConfig, source: Path, kind: str, tensors: Sequence[model_io.ModelTensor], note: Noter
) -> list[dict[str, Any]]:
    """Model tensors as the spec's: the batch dim dropped under max_batch_size, as the GE backend's
    auto-complete drops it; the types a spec cannot carry refused as in a config."""
    batching = ge.config.max_batch_size > 0
    out = []
    for tensor in tensors:
        if tensor.dtype == "string":
            raise MigrateError(
                f"{source}: {kind} {tensor.name!r} is string in the model: strings cannot go to an OM"
            )
        dims = tensor.dims[1:] if batching else list(tensor.dims)
        if not dims:
            raise MigrateError(
                f"{source}: {kind} {tensor.name!r} has dims {tensor.dims}: "
                + ("nothing is left after the batch dim (max_batch_size > 0)" if batching else "a scalar")
                + f"; list the {kind} in the config"
            )
        out.append({"name": tensor.name, "dtype": tensor.dtype, "dims": dims})
    shown = "; ".join(f"{t['name']} {t['dtype']} {t['dims']}" for t in out)
    batch = f" (dim 0, the batch, dropped: max_batch_size {ge.config.max_batch_size})" if batching else ""
    note(
        1,
        kind,
        f"not in the config: read from {source.name} as the GE backend does: {shown}{batch}",
        carried=True,
    )
    return out


def _no_dims_gears(ge: GeConfig, dynamic: list[tuple[str, int]]) -> MigrateError:
    names = ", ".join(f"{name} dims[{d}]" for name, d in dynamic)
    first = dynamic[0][0]
    return MigrateError(
        f"{ge.path}:{ge.line_of_tensor('input', 0, first)}: {names} {'is' if len(dynamic) == 1 else 'are'} -1 and the config "
        "names no gears for them (graph.ge.inputShape with graph.ge.dynamicDims): the GE backend compiled "
        "a dynamic-shape graph, an OM needs the values; give them with --dims-gears, e.g. --dims-gears 16,32,64"
    )


def _batched(
    ge: GeConfig,
    gear_batches: list[int],
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
    note: Noter,
) -> tuple[dict[str, Any] | None, list[dict[str, Any]], list[dict[str, Any]]]:
    """The spec's batching section, and the tensors (with a leading 1 where max_batch_size 1 becomes a model
    without batching)."""
    if ge.config.max_batch_size > 0:
        batching_spec = _batching(ge, gear_batches, note)
        if batching_spec is None:
            # max_batch_size 1: one batch size is not a gear list (ATC takes 2 to 100); the same requests are a
            # model without batching whose dims start with that batch of 1
            inputs = [{**t, "dims": [1, *t["dims"]]} for t in inputs]
            outputs = [{**t, "dims": [1, *t["dims"]]} for t in outputs]
        return batching_spec, inputs, outputs
    if gear_batches and set(gear_batches) != {1}:
        note(
            ge.line_of_parameter(_gear_key(ge)),
            _gear_key(ge),
            "batch values in the gears of a model without max_batch_size: the spec's dims take them",
        )
    return None, inputs, outputs


def _note_dynamic_outputs(ge: GeConfig, outputs: list[dict[str, Any]], note: Noter) -> None:
    for index, tensor in enumerate(outputs):
        for d, dim in enumerate(tensor["dims"]):
            if dim == -1:
                note(
                    ge.line_of_tensor("output", index, tensor["name"]),
                    f"output[{index}].dims[{d}]",
                    "-1: the GE backend returned what the graph computed; an OM pads to a gear, so add "
                    f"follows: {{{d}: INPUT:DIM}} to {tensor['name']} in the spec to trim it back per request",
                    carried=True,
                )


# --- the model file ------------------------------------------------------------------------------------


def _model_file(ge: GeConfig, note: Noter) -> Path:
    """What the GE backend compiled: the first ``*.onnx`` under the model folder, else the first ``*.pb``."""
    folder = ge.path.resolve().parent
    shown = ge.path.parent  # as the user named it, in messages
    for suffix in (".onnx", ".pb"):
        found = sorted(p for p in folder.rglob(f"*{suffix}") if p.is_file())
        if found:
            if len(found) > 1:
                note(
                    1,
                    "model file",
                    f"{len(found)} {suffix} files under {shown}: the GE backend took the first it found, the "
                    f"spec takes {found[0].name} (sorted first); change model.source if that is not the one",
                    carried=True,
                )
            if suffix == ".pb":
                note(
                    1,
                    "model file",
                    f"{found[0].name} is a TensorFlow frozen graph: ge-plugin compiles ONNX (--framework=5); "
                    f"convert it (tf2onnx) to {found[0].with_suffix('.onnx').name}, which model.source names",
                )
            return found[0]
    expected = folder / f"{ge.name}.onnx"
    note(
        1,
        "model file",
        f"no *.onnx or *.pb under {shown}: model.source names {expected.name}; put the ONNX model there",
    )
    return expected


def _relative(path: Path, spec_dir: Path) -> str:
    return Path(os.path.relpath(path.resolve(), spec_dir.resolve())).as_posix()


# --- tensors -------------------------------------------------------------------------------------------


def _tensors(ge: GeConfig, field: str, tensors: Sequence[Any], note: Noter) -> list[dict[str, Any]]:
    out = []
    for index, tensor in enumerate(tensors):
        line = ge.line_of_tensor(field, index, tensor.name)
        name = mc.DataType.Name(tensor.data_type)
        try:
            dtype = dtypes.by_name(name)
        except KeyError:
            dtype = None
        if dtype is None or dtype.short == "string" or tensor.data_type == mc.TYPE_INVALID:
            why = {
                "TYPE_STRING": "strings cannot go to an OM: send token ids, or bytes as TYPE_UINT8",
            }.get(name, "not a data type an OM tensor can have")
            raise MigrateError(f"{ge.path}:{line}: {field} {tensor.name!r}: {name}: {why}")
        if dtype.short == "bf16":
            note(
                line,
                f"{field}[{index}].data_type",
                "TYPE_BF16, which the GE backend's config parser maps to INVALID (it could not serve this "
                "config); ge-plugin serves TYPE_BF16 as declared (clients send bf16; declare fp32 in the spec "
                "for clients without bf16, and ge-plugin converts)",
                carried=True,
            )
        dims = list(tensor.dims)
        if not dims:
            raise MigrateError(f"{ge.path}:{line}: {field} {tensor.name!r} has no dims")
        out.append({"name": tensor.name, "dtype": dtype.short, "dims": dims})
    return out


def _tensor_notes(ge: GeConfig, note: Noter) -> None:
    for field, tensors in (("input", ge.config.input), ("output", ge.config.output)):
        for index, tensor in enumerate(tensors):
            line = ge.line_of_tensor(field, index, tensor.name)
            for descriptor, _value in tensor.ListFields():
                key = f"{field}[{index}].{descriptor.name}"
                if descriptor.name in ("name", "data_type", "dims"):
                    continue
                if descriptor.name == "allow_ragged_batch":
                    note(
                        line,
                        key,
                        "ge-plugin renders allow_ragged_batch for every input with a -1 dim",
                        carried=True,
                    )
                else:
                    note(
                        line, key, f"{descriptor.name} has no spec field; the rendered config does not set it"
                    )


# --- gears ---------------------------------------------------------------------------------------------


def _gear_key(ge: GeConfig) -> str:
    found = ge.ge_option("ge.dynamicDims")
    return found[0] if found else "graph.ge.dynamicDims"


def _ge_gears(ge: GeConfig, inputs: list[dict[str, Any]], note: Noter) -> tuple[list[int], list[list[int]]]:
    """(batch gears, dims gears) from ``ge.inputShape`` + ``ge.dynamicDims``; ([], []) without them."""
    shape = ge.ge_option("ge.inputShape")
    gears = ge.ge_option("ge.dynamicDims")
    for found in (shape, gears, ge.ge_option("ge.dynamicNodeType")):
        if found is not None:
            note(
                ge.line_of_parameter(found[0]),
                found[0],
                "GE's online gear options become the spec's gears, compiled by ATC into the OM",
                carried=True,
            )
    if shape is None or gears is None:
        given = shape or gears
        if given is not None:
            note(
                ge.line_of_parameter(given[0]),
                given[0],
                "GE uses ge.inputShape and ge.dynamicDims together; one alone set no gears",
            )
        return [], []
    try:
        shapes = parse_input_shape(shape[1])
        values = parse_dynamic_dims(gears[1])
    except ValueError as exc:
        raise MigrateError(
            f"{ge.path}:{ge.line_of_parameter(shape[0])}: {shape[0]}/{gears[0]}: {exc}"
        ) from None
    slots = _ge_slots(ge, shape[0], shapes, inputs)
    if len(values[0]) != len(slots):
        raise MigrateError(
            f"{ge.path}:{ge.line_of_parameter(gears[0])}: {gears[0]}: each gear has {len(values[0])} values but "
            f"{shape[0]} has {len(slots)} -1 dims"
        )
    gear_set = GearSet("dims", tuple(tuple(v) for v in values), tuple(slots))
    batches, dims_gears = _split_gears(ge, (shape[0], gears[0]), gear_set, inputs)
    if batches and dims_gears and len(batches) * len(dims_gears) != len(values):
        note(
            ge.line_of_parameter(gears[0]),
            gears[0],
            f"{len(values)} gears that are not a full grid: ATC compiles batch gears x dims gears, "
            f"{len(batches)} x {len(dims_gears)} = {len(batches) * len(dims_gears)} gears",
            carried=True,
        )
    return batches, dims_gears


def _ge_slots(
    ge: GeConfig, key: str, shapes: Sequence[tuple[str, Sequence[int]]], inputs: list[dict[str, Any]]
) -> list[tuple[str, int]]:
    """(input, full dim index) of every -1 in ``ge.inputShape`` (option ``key``), in order."""
    declared = [t["name"] for t in inputs]
    slots: list[tuple[str, int]] = []
    for name, dims in shapes:
        if name not in declared:
            raise MigrateError(
                f"{ge.path}:{ge.line_of_parameter(key)}: {key} names input {name!r}, which the config "
                f"does not declare ({', '.join(declared)})"
            )
        slots.extend((name, d) for d, dim in enumerate(dims) if dim == -1)
    return slots


def _split_gears(
    ge: GeConfig, keys: tuple[str, str], gears: GearSet, inputs: list[dict[str, Any]]
) -> tuple[list[int], list[list[int]]]:
    """GE's gears (a value per slot each) as the spec's: sorted batch gears, and dims gears over the spec's
    -1 dims (inputs in config order, dims in order, the batch dim excluded when batching)."""
    shape_key, gears_key = keys
    batching = ge.config.max_batch_size > 0
    order = [
        (t["name"], d + (1 if batching else 0))
        for t in inputs
        for d, dim in enumerate(t["dims"])
        if dim == -1
    ]
    missing = [slot for slot in order if slot not in gears.slots]
    if missing:
        name, d = missing[0]
        raise MigrateError(
            f"{ge.path}:{ge.line_of_parameter(shape_key)}: {shape_key} does not make {name} dim {d} dynamic "
            "(-1), but the config's dims do"
        )
    batches: list[int] = []
    for sizes in gears.values_at([slot for slot in gears.slots if slot[1] == 0] if batching else []):
        if len(set(sizes)) > 1:
            raise MigrateError(
                f"{ge.path}:{ge.line_of_parameter(gears_key)}: {gears_key}: a gear gives inputs different batch "
                f"sizes ({sorted(set(sizes))}); Triton batches every input alike"
            )
        if sizes and sizes[0] not in batches:
            batches.append(sizes[0])
    dims_gears: list[list[int]] = []
    for values in gears.values_at(order):
        if values and list(values) not in dims_gears:
            dims_gears.append(list(values))
    return sorted(batches), dims_gears


def _derived_gears(max_batch: int, preferred: Sequence[int]) -> list[int]:
    gears = {max_batch, *preferred}
    power = 1
    while power < max_batch:
        gears.add(power)
        power *= 2
    return sorted(g for g in gears if 1 <= g <= max_batch)


def _batching(ge: GeConfig, gears: list[int], note: Noter) -> dict[str, Any] | None:
    config = ge.config
    line = ge.line_of_field("max_batch_size")
    if config.max_batch_size == 1 and not gears:
        note(
            line,
            "max_batch_size",
            "1: ATC needs 2 to 100 gears, so the spec does not batch and every input's dims start with 1; "
            "clients send the same [1, ...] shapes",
            carried=True,
        )
        return None
    out: dict[str, Any] = {"gears": _batch_gears(ge, gears, note)}
    if not config.HasField("dynamic_batching"):
        note(
            line,
            "dynamic_batching",
            "absent: Triton did not combine requests; a rendered ge config always has dynamic_batching "
            "(max_queue_delay_us 0: no request waits for batch-mates)",
            carried=True,
        )
        return out
    dynamic = config.dynamic_batching
    out["max_queue_delay_us"] = int(dynamic.max_queue_delay_microseconds)
    if dynamic.preferred_batch_size:
        out["preferred_batch_sizes"] = sorted(set(dynamic.preferred_batch_size))
    if dynamic.HasField("default_queue_policy"):
        out["queue"] = _queue(ge, dynamic.default_queue_policy, note)
    for descriptor, _value in dynamic.ListFields():
        if descriptor.name not in (
            "preferred_batch_size",
            "max_queue_delay_microseconds",
            "default_queue_policy",
        ):
            note(
                ge.line_of_field(descriptor.name),
                f"dynamic_batching.{descriptor.name}",
                "no spec field; the rendered config does not set it",
            )
    return out


def _batch_gears(ge: GeConfig, gears: list[int], note: Noter) -> list[int]:
    """The spec's batch gears: GE's (or derived from max_batch_size when GE had none), plus the preferred
    batch sizes, at most MAX_GEARS."""
    max_batch = ge.config.max_batch_size
    line = ge.line_of_field("max_batch_size")
    preferred = list(ge.config.dynamic_batching.preferred_batch_size)
    if not gears:
        gears = _derived_gears(max_batch, preferred)
        static = ge.parameters.get("static_model", "").strip() == "1"
        how = (
            "static_model 1 compiled a batch-1 graph"
            if static
            else "the GE backend compiled a dynamic-shape graph for any batch size"
        )
        note(
            line,
            "max_batch_size",
            f"{max_batch}: {how}; the OM has batch gears {gears} (a batch runs once, padded to the next gear)",
            carried=True,
        )
    elif max(gears) != max_batch:
        note(
            line,
            "max_batch_size",
            f"{max_batch}, but the largest batch gear is {max(gears)}: the spec's max_batch_size is its largest gear",
            carried=True,
        )
    extra = [p for p in preferred if p not in gears]
    if extra:
        gears = sorted({*gears, *extra})
        note(
            ge.line_of_field("preferred_batch_size"),
            "dynamic_batching.preferred_batch_size",
            f"{extra} added to the batch gears: a preferred size must be a gear",
            carried=True,
        )
    if len(gears) > MAX_GEARS:
        raise MigrateError(
            f"{ge.path}:{line}: {len(gears)} batch gears; ATC takes at most {MAX_GEARS} (--batch-gears)"
        )
    return gears


def _queue(ge: GeConfig, policy: Any, note: Noter) -> dict[str, Any]:
    """``dynamic_batching.default_queue_policy`` as the spec's ``queue``."""
    if policy.allow_timeout_override:
        note(
            ge.line_of_field("allow_timeout_override"),
            "dynamic_batching.default_queue_policy.allow_timeout_override",
            "no spec field",
        )
    return {
        "max_size": int(policy.max_queue_size),
        "timeout_us": int(policy.default_timeout_microseconds),
        "timeout_action": "delay" if policy.timeout_action == mc.ModelQueuePolicy.DELAY else "reject",
    }


# --- devices, instances, streams -----------------------------------------------------------------------


def _int_parameter(ge: GeConfig, key: str, minimum: int) -> int | None:
    if key not in ge.parameters:
        return None
    text = ge.parameters[key].strip()
    try:
        value = int(text)
    except ValueError:
        raise MigrateError(
            f"{ge.path}:{ge.line_of_parameter(key)}: parameters.{key}: expected an integer, got {text!r}"
        ) from None
    if value < minimum:
        raise MigrateError(
            f"{ge.path}:{ge.line_of_parameter(key)}: parameters.{key}: must be >= {minimum}, got {value}"
        )
    return value


def _placement(ge: GeConfig, note: Noter, renumber: bool) -> dict[str, Any]:
    devices = _devices(ge, note, renumber)
    groups = ge.config.instance_group
    total = sum(group.count or 1 for group in groups) if groups else 1
    exec_blocks = _int_parameter(ge, "instance_exec_blocks", 1) or 1
    device_blocks = _int_parameter(ge, "device_exec_blocks", 1)
    blocks = device_blocks if device_blocks is not None else math.ceil(total * exec_blocks / len(devices))
    instances = max(1, min(math.ceil(total / len(devices)), blocks))
    streams = math.ceil(blocks / instances)
    if instances * len(devices) != total:
        note(
            ge.line_of_field("instance_group"),
            "instance_group.count",
            f"{total} Triton instances were threads of one process feeding {blocks} graph(s) per NPU; a ge "
            f"instance is a process that loads the OM, so the spec has {instances} per NPU x {streams} stream(s) "
            f"= {blocks} graph(s) running at once per NPU, as before",
            carried=True,
        )
    if device_blocks is not None:
        note(
            ge.line_of_parameter("device_exec_blocks"),
            "parameters.device_exec_blocks",
            f"{device_blocks} graphs per NPU: instances_per_device {instances} x streams_per_instance {streams}",
            carried=True,
        )
    if exec_blocks > 1:
        note(
            ge.line_of_parameter("instance_exec_blocks"),
            "parameters.instance_exec_blocks",
            f"{exec_blocks}: the GE backend split each batch across {exec_blocks} streams in threads; ge-plugin "
            "runs a batch once at its gear and splits only batches beyond the largest gear across an instance's "
            "streams (counted into streams_per_instance above)",
        )
    _note_instance_fields(ge, note)
    return {"devices": devices, "instances_per_device": instances, "streams_per_instance": streams}


def _devices(ge: GeConfig, note: Noter, renumber: bool) -> list[int]:
    """``device_ids`` as a list of NPUs (renumbered 0..N-1 when asked); NPU 0 (with a note) when the config
    leaves it out."""
    if "device_ids" not in ge.parameters:
        note(
            1,
            "parameters.device_ids",
            "unset: the GE backend used every NPU it saw; the spec lists NPU 0 (add the others to placement.devices)",
            carried=True,
        )
        return [0]
    text = ge.parameters["device_ids"]
    line = ge.line_of_parameter("device_ids")
    try:
        devices = [int(d) for d in text.split(",")]
    except ValueError:
        raise MigrateError(
            f"{ge.path}:{line}: parameters.device_ids: expected comma-separated NPU ids, got {text!r}"
        ) from None
    in_a_pod = list(range(len(devices)))
    if devices == in_a_pod:
        return devices
    if renumber:
        note(
            line,
            "parameters.device_ids",
            f"{text}: renumbered {', '.join(map(str, in_a_pod))} (--renumber-devices): a pod sees the N NPUs the "
            f"device plugin gave it as 0..N-1; on a host, ASCEND_RT_VISIBLE_DEVICES={text} makes NPUs "
            f"{text} the process's {', '.join(map(str, in_a_pod))}",
            carried=True,
        )
        return in_a_pod
    note(
        line,
        "parameters.device_ids",
        f"{text}: kept as the host's NPU ids; ge-plugin deploy k8s needs 0..N-1 (a pod numbers its NPUs so): "
        "migrate with --renumber-devices for a cluster",
        carried=True,
    )
    return devices


def _note_instance_fields(ge: GeConfig, note: Noter) -> None:
    """Every instance_group field but count, name and a CPU (or auto) kind: ge-plugin renders its own groups."""
    for index, group in enumerate(ge.config.instance_group):
        for descriptor, value in group.ListFields():
            if descriptor.name in ("count", "name") or (
                descriptor.name == "kind"
                and value in (mc.ModelInstanceGroup.KIND_CPU, mc.ModelInstanceGroup.KIND_AUTO)
            ):
                continue
            note(
                ge.line_of_field(descriptor.name),
                f"instance_group[{index}].{descriptor.name}",
                "ge-plugin renders one KIND_CPU group per NPU, named npuN (the backend places instances by that name)",
            )


# --- precision, other parameters and fields ------------------------------------------------------------


def _precision(ge: GeConfig, note: Noter) -> str:
    for ge_key, table in PRECISIONS.items():
        found = ge.ge_option(ge_key)
        if found is None:
            continue
        key, value = found
        if value in table:
            return table[value]
        note(
            ge.line_of_parameter(key),
            key,
            f"{value!r} has no ge-plugin equivalent (origin, fp16 = force_fp16, bf16 = allow_mix_precision_bf16); "
            "the spec keeps origin",
        )
        return "origin"
    note(
        1,
        "precision",
        "the GE backend set none, so GE's default applied (its docs disagree: fp16 or origin); the spec says origin "
        "(ATC must_keep_origin_dtype): set precision: fp16 to compile as force_fp16",
        carried=True,
    )
    return "origin"


FIXED_REASONS = {
    "dump_graph": "graphs are compiled by ATC now: set DUMP_GE_GRAPH=2 DUMP_GRAPH_LEVEL=2 when running the atc "
    "command (ge-plugin atc SPEC --print)",
    "profiling": "run the server under msprof, or give acl_json a profiler section (CANN's acl.json)",
    "dump_data": "give acl_json a dump section (CANN's acl.json) to dump model data",
}


def _other_parameters(ge: GeConfig, note: Noter) -> None:
    handled = {"device_ids", "device_exec_blocks", "instance_exec_blocks"}
    handled |= {prefix + key for key in GEAR_OPTIONS for prefix in ("session.", "graph.")}
    handled |= {prefix + key for key in PRECISIONS for prefix in ("session.", "graph.")}
    for key in sorted(ge.parameters):
        if key in handled:
            continue
        line = ge.line_of_parameter(key)
        if key == "static_model":
            reason = (
                "a batch of N ran as N batch-1 executes of a batch-1 graph; the OM has batch gears and runs a "
                "batch once, at its gear"
                if ge.config.max_batch_size > 0
                else "a model without batching compiles as one static shape, as before"
            )
            note(line, f"parameters.{key}", reason, carried=True)
            continue
        if key in FIXED_REASONS:
            note(line, f"parameters.{key}", FIXED_REASONS[key])
        elif key.startswith("global."):
            note(line, f"parameters.{key}", "the GE backend stored global. options and never used them")
        elif key.startswith(("session.", "graph.")):
            ge_key = key.split(".", 1)[1]
            reason = RUNTIME_OPTIONS.get(
                ge_key,
                "a GE option of online compilation; if ATC has the same option, add it to atc_options (ATC's "
                "flags are not GE option names)",
            )
            note(line, f"parameters.{key}", reason)
        elif key.startswith("ge."):
            note(
                line,
                f"parameters.{key}",
                "had no effect in the GE backend (no prefix: no code read it from config.pbtxt)",
            )
        else:
            note(line, f"parameters.{key}", "not a key the GE backend reads")


CARRIED_FIELDS = {
    "name",
    "backend",
    "max_batch_size",
    "input",
    "output",
    "dynamic_batching",
    "instance_group",
    "parameters",
}


def _other_fields(ge: GeConfig, note: Noter) -> None:
    for descriptor, _value in ge.config.ListFields():
        if descriptor.name in CARRIED_FIELDS:
            continue
        reason = {
            "model_warmup": "the ge backend warms every gear itself (spec warmup: executes per gear)",
            "default_model_filename": "the ge backend serves model.om (om_model_path)",
        }.get(descriptor.name, "no spec field; the rendered config does not set it")
        note(ge.line_of_field(descriptor.name), descriptor.name, reason)
