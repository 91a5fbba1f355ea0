"""Checked ATC options + the ONNX model -> a sim OM, with everything a real OM would know.

What ATC does with the model, and so what this does: every ``--input_shape`` name must be a model input
(E10016), its rank must match (E10049), fixed dims must agree; inputs it does not name must have fully known
shapes; each gear turns the -1 dims into concrete dims (in ``--input_shape`` order for ``--dynamic_dims``);
the output dims of every gear are computed now (onnx shape inference on the concrete shapes, or one
onnxruntime run per gear when inference cannot tell), because an OM is static per gear. ``--out_nodes``
selects outputs (ONNX output names, or ``node:index``), ``--output_type`` changes their dtypes and
``--input_fp16_nodes`` makes inputs float16; ``--insert_op_conf`` puts a static AIPP in front of inputs
(``ge_plugin.atc.aipp``): such an input takes uint8 images (YUV420SP_U8: n, h x 1.5, w, 1 bytes) and the header
says how the simulator converts them for the graph. The ONNX graph goes into the file unchanged unless
``--out_nodes`` changed its outputs.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from ge_plugin import __version__, dtypes
from ge_plugin import acl_constants as C
from ge_plugin.atc import aipp as aipp_conf
from ge_plugin.atc import simom
from ge_plugin.atc.flags import AtcOptions, invalid
from ge_plugin.errors import AtcError
from ge_plugin.precision import DEFAULT_MODE

#: ONNX TensorProto element types the simulator carries (every one but string) -> aclDataType
ONNX_TO_ACL = {code: d.acl for code, d in dtypes.BY_ONNX.items() if d.short != "string"}
#: ATC's --output_type names -> aclDataType
OUTPUT_TYPE_TO_ACL = {name: d.acl for name, d in dtypes.BY_ATC_OUTPUT_TYPE.items()}
_FORMATS = {"NCHW": C.ACL_FORMAT_NCHW, "NCDHW": C.ACL_FORMAT_NCDHW, "ND": C.ACL_FORMAT_ND}
#: initializers with more elements than this become shape-only inputs of the skeleton used for inference
_SKELETON_LIMIT = 64


@attrs.frozen
class BuildResult:
    path: Path
    header: dict[str, Any]


@attrs.frozen
class _GearDims:
    """One gear: its label, the values it was given, and every input's concrete dims at it."""

    label: str
    values: tuple[int, ...]
    inputs: tuple[tuple[int, ...], ...]


@attrs.frozen
class _Input:
    name: str
    elem_type: int
    dims: tuple[int, ...]  #: -1 where a gear chooses


@attrs.frozen
class _Outputs:
    """The OM's outputs: names, each one's dims per gear, and their ONNX element types."""

    names: list[str]
    per_gear: list[list[tuple[int, ...]]]
    types: list[int]


def build(options: AtcOptions, *, echo: Callable[[str], None] | None = None) -> BuildResult:
    """Write ``options.output + ".om"``; AtcError (with ATC's message code) for what ATC would reject."""
    sections = _aipp_sections(options)
    model = _load(options.model)
    initialized = {t.name for t in model.graph.initializer}
    inputs = _inputs(options, [vi for vi in model.graph.input if vi.name not in initialized])
    gears = _gear_dims(options, inputs)
    output_names, runnable = _outputs(options, model)
    outputs = _output_shapes(runnable, inputs, gears, output_names)
    header = _header(options, inputs, gears, outputs, _output_dtypes(options, model, outputs))
    _insert_aipp(options, sections, inputs, header)
    path = Path(options.om_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # the ONNX file as given, unless --out_nodes changed the graph's outputs
    onnx_bytes = runnable.SerializeToString() if runnable is not model else Path(options.model).read_bytes()
    simom.write(path, header, onnx_bytes)
    if echo is not None and options.log in ("debug", "info"):
        echo(
            f"sim OM {path}: {options.dynamic_mode} model, {len(inputs)} inputs, {len(output_names)} outputs"
        )
        for gear in gears:
            echo(f"  gear {gear.label}: inputs {[list(d) for d in gear.inputs]}")
    return BuildResult(path, header)


def _header(
    options: AtcOptions,
    inputs: Sequence[_Input],
    gears: Sequence[_GearDims],
    outputs: _Outputs,
    out_dtypes: Sequence[int],
) -> dict[str, Any]:
    """The sim OM header (ge_plugin.atc.simom describes its fields)."""
    return {
        "format": "ge-plugin sim OM",
        "built_by": f"ge-plugin {__version__}",
        "soc_version": options.soc_version,
        "framework": options.framework,
        "precision": options.precision,
        "precision_mode": options.precision_mode_v2 or options.precision_mode or DEFAULT_MODE,
        "atc_options": dict(options.given),
        "atc_command": options.command(),
        "inputs": [_header_input(options, item) for item in inputs],
        "outputs": _header_outputs(outputs, out_dtypes),
        "dynamic": {
            "mode": options.dynamic_mode,
            "gears": [
                {
                    "values": list(gear.values),
                    "inputs": [list(d) for d in gear.inputs],
                    "outputs": [list(d) for d in outputs.per_gear[n]],
                }
                for n, gear in enumerate(gears)
            ]
            if options.dynamic_mode != "static"
            else [],
        },
    }


def _aipp_sections(options: AtcOptions) -> list[aipp_conf.Aipp]:
    """The sections of ``--insert_op_conf``, read and checked before the model is (none without it)."""
    if options.insert_op_conf is None:
        return []
    path = Path(options.insert_op_conf)
    if not path.is_file():
        raise invalid(options.insert_op_conf, "insert_op_conf", "the file does not exist")
    sections = aipp_conf.parse(path.read_text(encoding="utf-8", errors="replace"), options.insert_op_conf)
    if options.dynamic_mode not in ("static", "batch"):
        raise invalid(
            options.insert_op_conf,
            "insert_op_conf",
            f"static AIPP with --dynamic_{'image_size' if options.dynamic_mode == 'hw' else 'dims'} is not simulated "
            "(with --dynamic_batch_size or a static model it is)",
        )
    return sections


def _insert_aipp(
    options: AtcOptions, sections: Sequence[aipp_conf.Aipp], inputs: Sequence[_Input], header: dict[str, Any]
) -> None:
    """Put each AIPP section in front of its input: the header's input takes uint8 images (NHWC dims as pyACL
    reports them, ``dims_v2`` and every gear's dims in bytes' shape) and records the section for the
    simulator."""
    for section in sections:
        n = section.related_input_rank
        if n >= len(inputs):
            raise invalid(
                options.insert_op_conf,
                "insert_op_conf",
                f"related_input_rank {n} names no input: the model has {len(inputs)}",
            )
        item = inputs[n]
        graph = [1 if d == -1 and k == 0 else d for k, d in enumerate(item.dims)]
        height, width = aipp_conf.input_dims(section, graph, item.name)
        dims, dims_v2 = aipp_conf.om_dims(section, item.dims[0], height, width)
        entry = header["inputs"][n]
        entry.update(
            dtype=C.ACL_UINT8,
            format=C.ACL_FORMAT_NHWC,
            dims=list(dims),
            dims_v2=list(dims_v2),
            aipp=section.to_header(),
        )
        for gear in header["dynamic"]["gears"]:
            batch = gear["inputs"][n][0]
            gear["inputs"][n] = list(aipp_conf.om_dims(section, batch, height, width)[1])


def _header_input(options: AtcOptions, item: _Input) -> dict[str, Any]:
    graph_dtype = _acl_dtype(item.elem_type, f"input {item.name}")
    fmt = options.input_format
    return {
        "name": item.name,
        "dtype": C.ACL_FLOAT16 if item.name in options.input_fp16_nodes else graph_dtype,
        "graph_dtype": graph_dtype,
        "format": _FORMATS[fmt] if fmt else (C.ACL_FORMAT_NCHW if len(item.dims) == 4 else C.ACL_FORMAT_ND),
        "dims": list(item.dims),
    }


def _header_outputs(outputs: _Outputs, out_dtypes: Sequence[int]) -> list[dict[str, Any]]:
    """Each output, with -1 in the dims that differ between gears."""
    first = outputs.per_gear[0]
    return [
        {
            "name": name,
            "onnx_name": name,
            "dtype": out_dtypes[n],
            "graph_dtype": _acl_dtype(outputs.types[n], f"output {name}"),
            "format": C.ACL_FORMAT_ND,
            "dims": [
                d if all(g[n][k] == d for g in outputs.per_gear) else -1 for k, d in enumerate(first[n])
            ],
        }
        for n, name in enumerate(outputs.names)
    ]


def _load(path: str) -> Any:
    import onnx

    if not os.path.isfile(path):
        raise invalid(path, "model", "the file does not exist")
    try:
        return onnx.load(path)
    except Exception as exc:  # onnx raises DecodeError, ValueError, ... for files that are not ONNX
        raise AtcError(
            f"E10041: Failed to load the model from [{path}]. Reason: not a readable ONNX model ({exc})"
        ) from None


def _acl_dtype(elem_type: int, what: str) -> int:
    try:
        return ONNX_TO_ACL[elem_type]
    except KeyError:
        import onnx

        name = (
            onnx.TensorProto.DataType.Name(elem_type)
            if elem_type in onnx.TensorProto.DataType.values()
            else elem_type
        )
        raise AtcError(
            f"E10001: Value [{name}] for the type of {what} is invalid. Reason: the ge-plugin simulator carries "
            f"{', '.join(onnx.TensorProto.DataType.Name(t) for t in ONNX_TO_ACL)} tensors only"
        ) from None


def _graph_dims(vi: Any) -> list[int | None] | None:
    """A graph input's dims (None for unknown dims), or None when the model gives no shape at all."""
    ttype = vi.type.tensor_type
    if not ttype.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in ttype.shape.dim]


def _inputs(options: AtcOptions, graph_inputs: Sequence[Any]) -> list[_Input]:
    given = dict(options.input_shape)
    names = [vi.name for vi in graph_inputs]
    _check_named(given, "input_shape", names)
    _check_named(options.input_fp16_nodes, "input_fp16_nodes", names)
    inputs = []
    for vi in graph_inputs:
        elem_type = vi.type.tensor_type.elem_type
        _acl_dtype(elem_type, f"input {vi.name}")
        if vi.name in options.input_fp16_nodes and elem_type not in (1, 10, 11):
            raise invalid(
                options.input_fp16_nodes, "input_fp16_nodes", f"input {vi.name} is not a float input"
            )
        graph = _graph_dims(vi)
        if vi.name in given:
            dims = _given_dims(vi.name, given[vi.name], graph)
        else:
            dims = _model_dims(vi.name, graph)
        inputs.append(_Input(vi.name, elem_type, dims))
    return inputs


def _check_named(listed: Iterable[str], flag: str, names: Sequence[str]) -> None:
    """Every input ``flag`` names is an input of the model (E10016 otherwise)."""
    for name in listed:
        if name not in names:
            raise AtcError(
                f"E10016: Opname [{name}] specified in [--{flag}] is not found in the model; its inputs are "
                f"{', '.join(names)}."
            )


def _given_dims(name: str, dims: tuple[int, ...], graph: list[int | None] | None) -> tuple[int, ...]:
    """``--input_shape``'s dims of input ``name``, checked against the model's: same rank, the same fixed
    dims, -1 only where the model's dim is dynamic."""
    if graph is not None and len(graph) != len(dims):
        raise AtcError(
            f"E10049: Dimension count {len(dims)} configured in --input_shape does not match dimension count "
            f"{len(graph)} of the node {name}."
        )
    value = f"{name}:{','.join(map(str, dims))}"
    for k, (want, have) in enumerate(zip(dims, graph or dims)):
        if have is None:
            continue
        if want != have and want != -1:
            raise invalid(value, "input_shape", f"dim {k} of input {name} is fixed at {have} in the model")
        if want == -1 and graph is not None:
            raise invalid(
                value,
                "input_shape",
                f"dim {k} of input {name} is fixed at {have} in the model; only its dynamic dims can be -1",
            )
    return tuple(dims)


def _model_dims(name: str, graph: list[int | None] | None) -> tuple[int, ...]:
    """The model's own dims of an input ``--input_shape`` leaves out, which must all be known (E11005)."""
    known = [] if graph is None else [d for d in graph if d is not None]
    if graph is None or len(known) != len(graph):
        shown = (
            "unknown" if graph is None else "[" + ",".join("?" if d is None else str(d) for d in graph) + "]"
        )
        raise AtcError(
            f"E11005: The shape of input {name} is not fully defined in the model ({shown}); give it "
            "with --input_shape (and -1 plus a gear flag for dims that vary)."
        )
    return tuple(known)


def _gear_dims(options: AtcOptions, inputs: Sequence[_Input]) -> list[_GearDims]:
    """Per gear: the values it was given and every input's concrete dims (``GearSet.shapes``). Static
    models: one entry."""
    gears = options.gear_set
    shapes = gears.shapes([(i.name, i.dims) for i in inputs])
    return [
        _GearDims(label, values, dims)
        for label, values, dims in zip(gears.labels, gears.values or ((),), shapes)
    ]


def _outputs(options: AtcOptions, model: Any) -> tuple[list[str], Any]:
    """The OM's output tensor names and the graph that produces exactly them."""
    import onnx

    graph = model.graph
    if not options.out_nodes:
        return [o.name for o in graph.output], model
    resolve = _Resolver(model)
    names = []
    for item in options.out_nodes:
        name = resolve(item)
        if name is None:
            raise AtcError(
                f"E10016: Opname [{item}] specified in [--out_nodes] is not found in the model. Give ONNX output "
                "names (out1;out2) or node:index (node1:0;node2:1)."
            )
        names.append(name)
    if names == [o.name for o in graph.output]:
        return names, model
    runnable = copy.deepcopy(model)
    existing = {o.name: o for o in graph.output}
    del runnable.graph.output[:]
    for name in names:
        runnable.graph.output.append(existing[name] if name in existing else onnx.ValueInfoProto(name=name))
    return names, runnable


class _Resolver:
    """``resolve(item)``: the tensor an ``--out_nodes`` / ``--output_type`` item names, an ONNX tensor name or
    ``node:index``; None when the model has no such tensor."""

    def __init__(self, model: Any):
        graph = model.graph
        self.produced = {name for node in graph.node for name in node.output} | {o.name for o in graph.output}
        self.nodes = {node.name: node for node in graph.node if node.name}

    def __call__(self, item: str) -> str | None:
        if item in self.produced:
            return item
        node_name, sep, index = item.rpartition(":")
        if (
            sep
            and index.isascii()
            and index.isdigit()
            and node_name in self.nodes
            and int(index) < len(self.nodes[node_name].output)
        ):
            return str(self.nodes[node_name].output[int(index)])
        return None


def _skeleton(model: Any) -> Any:
    """The model with big initializers turned into shape-only inputs: cheap to copy and infer per gear."""
    import onnx

    skeleton = onnx.ModelProto()
    skeleton.ir_version = model.ir_version
    skeleton.opset_import.extend(model.opset_import)
    graph = skeleton.graph
    graph.name = model.graph.name
    graph.node.extend(model.graph.node)
    graph.input.extend(model.graph.input)
    graph.output.extend(model.graph.output)
    declared = {vi.name for vi in model.graph.input}
    for init in model.graph.initializer:
        if math.prod(init.dims) > _SKELETON_LIMIT and init.name not in declared:
            graph.input.append(onnx.helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
        else:
            graph.initializer.append(init)
    for function in model.functions:
        skeleton.functions.append(function)
    return skeleton


def _inferred(
    skeleton: Any, inputs: Sequence[_Input], dims: Sequence[tuple[int, ...]], names: Sequence[str]
) -> list[tuple[tuple[int, ...], int] | None]:
    """(dims, elem_type) of each output at these input dims, or None where inference cannot tell."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(
            _at_dims(skeleton, inputs, dims), strict_mode=False, data_prop=True
        )
    except Exception:  # onnx raises InferenceError and friends; fall back to running the model
        return [None] * len(names)
    infos = {vi.name: vi for vi in (*inferred.graph.value_info, *inferred.graph.output)}
    return [_known_shape(infos.get(name)) for name in names]


def _at_dims(skeleton: Any, inputs: Sequence[_Input], dims: Sequence[tuple[int, ...]]) -> Any:
    """A copy of ``skeleton`` whose inputs have these dims and whose outputs and values have none yet."""
    import onnx

    trial = onnx.ModelProto()
    trial.CopyFrom(skeleton)
    by_name = {vi.name: vi for vi in trial.graph.input}
    for item, shape in zip(inputs, dims):
        vi = by_name[item.name]
        vi.type.tensor_type.ClearField("shape")
        vi.type.tensor_type.shape.dim.extend(onnx.TensorShapeProto.Dimension(dim_value=d) for d in shape)
    for vi in trial.graph.output:
        vi.type.tensor_type.ClearField("shape")
    del trial.graph.value_info[:]
    return trial


def _known_shape(vi: Any) -> tuple[tuple[int, ...], int] | None:
    """(dims, elem_type) of an inferred value, or None unless inference found its type and every dim."""
    ttype = vi.type.tensor_type if vi is not None else None
    if ttype is None or not ttype.HasField("shape") or not ttype.elem_type:
        return None
    dims = [d.dim_value for d in ttype.shape.dim if d.HasField("dim_value")]
    return (tuple(dims), ttype.elem_type) if len(dims) == len(ttype.shape.dim) else None


def _output_shapes(
    runnable: Any, inputs: Sequence[_Input], gears: Sequence[_GearDims], names: list[str]
) -> _Outputs:
    """Per gear, each output's dims; and each output's ONNX elem type."""
    skeleton = _skeleton(runnable)
    shapes: list[list[tuple[int, ...]]] = []
    types: list[int] = [0] * len(names)
    session = None
    for gear in gears:
        inferred = _inferred(skeleton, inputs, gear.inputs, names)
        found = [f for f in inferred if f is not None]
        if len(found) < len(names):
            session = session or _session(runnable)
            found = _run_once(session, inputs, gear, names)
        shapes.append([f[0] for f in found])
        for n, f in enumerate(found):
            types[n] = types[n] or f[1]
    return _Outputs(names, shapes, types)


def _session(model: Any) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's own exception types
        raise AtcError(
            f"E10041: Failed to load the model. Reason: onnxruntime cannot run it ({exc})"
        ) from None


def _ort_onnx() -> dict[str, int]:
    """onnxruntime's names of the element types (``OrtValue.data_type()``, ``tensor(float)``: ONNX's own
    names, lower-cased) -> ONNX TensorProto types."""
    import onnx

    return {f"tensor({onnx.TensorProto.DataType.Name(code).lower()})": code for code in ONNX_TO_ACL}


def _run_once(
    session: Any, inputs: Sequence[_Input], gear: _GearDims, names: Sequence[str]
) -> list[tuple[tuple[int, ...], int]]:
    """Each output's (dims, ONNX type) from one run on zeros; bfloat16 (which numpy lacks) as OrtValues of
    uint16 words."""
    import onnxruntime as ort

    feeds = {
        i.name: ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            np.zeros(d, dtype=dtypes.BY_ONNX[i.elem_type].numpy), i.elem_type
        )
        for i, d in zip(inputs, gear.inputs)
    }
    try:
        outs = session.run_with_ort_values(list(names), feeds)
    except Exception as exc:  # onnxruntime's own exception types
        raise AtcError(
            f"E10059: Building gear [{gear.label}] failed. Reason: the model does not run at input dims "
            f"{[list(d) for d in gear.inputs]}: {exc}"
        ) from None
    ort_onnx = _ort_onnx()
    return [(tuple(o.shape()), ort_onnx.get(o.data_type(), 0)) for o in outs]


def _output_dtypes(options: AtcOptions, model: Any, outputs: _Outputs) -> list[int]:
    names = outputs.names
    dtypes = [_acl_dtype(t, f"output {name}") for name, t in zip(names, outputs.types)]
    if options.output_type is not None:
        return [OUTPUT_TYPE_TO_ACL[options.output_type]] * len(names)
    if options.output_type_per_node:
        resolve = _Resolver(model)
        for node, index, dtype in options.output_type_per_node:
            name = resolve(f"{node}:{index}")
            if name is None and index == 0 and node in resolve.produced:
                name = node
            if name is None or name not in names:
                raise AtcError(
                    f"E10016: Opname [{node}:{index}] specified in [--output_type] is not found among the outputs "
                    f"selected by --out_nodes ({', '.join(names)})."
                )
            dtypes[names.index(name)] = OUTPUT_TYPE_TO_ACL[dtype]
    return dtypes
