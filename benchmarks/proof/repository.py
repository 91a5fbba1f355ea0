"""The bench's own model repository: what it serves, built from scratch in the bench's work folder.

Two groups of models, told apart by the simulated device each one's acl.json asks for (every model is
timing-only: the simulator checks and copies as always but computes nothing, so its "device" costs the host
no onnxruntime time, as an NPU would not):

- **host**: no device time. ``ge_identity`` and ``ge_llama`` against Python-backend floors that do the least
  Triton allows for the same tensors: ``py_identity`` hands its input back, ``py_logits`` returns precomputed
  logits of the size ``ge_llama`` returns. What ge costs on top of a floor is the plugin's host cost.
- **replica**: the seed's direct AscendCL times as the device time of each batch gear (``seed.py``). The
  served LLaMA (1 instance × 2 streams, as ``specs/llama.yaml``), the same with 1 × 1 and 2 × 1, the naive
  per-request pyACL model (the GE backend's published path) under the same device, and ``replica_py_logits``,
  the same-size floor at the device's pace (it waits the device time, then returns precomputed logits). The
  two Python models are rendered from the 2 × 1 layout: two stubs, each with the device to itself in turn,
  as many loads of the model as the served layout's lanes.

The ``ge`` models come from the specs in ``benchmarks/proof/specs/`` (``llama.yaml`` is ``specs/llama.yaml`` as
served), rendered and compiled to sim OMs as users do it. Each Python-backend model is rendered from a ``ge``
model's spec with only the backend swapped (and a ``model.py`` from ``benchmarks/proof/models/``), so batching,
instances and queue policy are the same: the pairs differ only in what runs inside ``execute``. The
repository lives in the bench's work folder, never in ``model_repository/``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import attrs
from google.protobuf import text_format

from benchmarks.proof import seed
from ge_plugin.atc.command import atc_args
from ge_plugin.atc.flags import parse_args
from ge_plugin.atc.simbuild import build
from ge_plugin.errors import BenchError
from ge_plugin.measure.records import BenchModel
from ge_plugin.models import LLAMA_VOCAB, identity, tiny_llama, write_model
from ge_plugin.render import render_config, write_repository
from ge_plugin.spec import load_spec
from ge_plugin.spec.model import ModelSpec

HERE = Path(__file__).parent
#: sequence lengths the bench may send: the dims gears of specs/llama.yaml, so no request needs padding
SEQ_GEARS = (16, 32, 64, 128)
#: where the stubs' simulators write their counters (GE_PLUGIN_SIM_REPORT_DIR)
REPORTS = "sim-reports"
HOST = "host"
REPLICA = "replica"

# The served models by name. Every module that picks a row out of a run names it through these, so that a
# misspelt name fails at import instead of leaving a target quietly without a value.
GE_IDENTITY = "ge_identity"
PY_IDENTITY = "py_identity"  #: the identity's floor
GE_LLAMA = "ge_llama"
FLOOR = "py_logits"  #: the LLaMA's same-size floor: precomputed logits, no device
REPLICA_GE = "replica_ge_llama"  #: the served LLaMA on the seed's device, 1 instance × 2 streams
PACED_FLOOR = "replica_py_logits"  #: the same-size floor at the device's pace (waits the seed's time)
REPLICA_1X1 = "replica_ge_llama_1x1"
REPLICA_2X1 = "replica_ge_llama_2x1"
REPLICA_NAIVE = "replica_naive_llama"  #: the per-request pyACL model, the GE backend's path


def models(seq: int) -> tuple[BenchModel, ...]:
    """The served models, in the order tables list them."""
    llama = dict(family="llama", input_name="input_ids", shape=f"input_ids:{seq}")
    return (
        BenchModel(GE_IDENTITY, "ge", "identity", HOST, "ge backend, identity OM [B,16] fp32", "INPUT0"),
        BenchModel(
            PY_IDENTITY, "python", "identity", HOST, "Python backend hands the input back (floor)", "INPUT0"
        ),
        BenchModel(GE_LLAMA, "ge", phase=HOST, what=f"ge backend, tiny LLaMA, seq {seq}", **llama),
        BenchModel(
            FLOOR,
            "python",
            phase=HOST,
            what="Python backend returns precomputed logits (same-size floor)",
            **llama,
        ),
        BenchModel(
            REPLICA_GE,
            "ge",
            phase=REPLICA,
            what="ge backend, 1 instance × 2 streams (as served)",
            **llama,
        ),
        BenchModel(
            PACED_FLOOR,
            "python",
            phase=REPLICA,
            what="Python backend waits the device time, returns precomputed logits (paced floor)",
            **llama,
        ),
        BenchModel(REPLICA_1X1, "ge", phase=REPLICA, what="ge backend, 1 instance × 1 stream", **llama),
        BenchModel(REPLICA_2X1, "ge", phase=REPLICA, what="ge backend, 2 instances × 1 stream", **llama),
        BenchModel(
            REPLICA_NAIVE,
            "python",
            phase=REPLICA,
            what="naive pyACL per request (the GE backend's path)",
            **llama,
        ),
    )


@attrs.frozen
class GeRecipe:
    """How one ge model is built: from which bench spec, for which phase's device, in which layout."""

    spec_file: str  #: in benchmarks/proof/specs/
    phase: str
    #: (instances per device, streams per instance); None: the spec's own placement
    layout: tuple[int, int] | None = None


@attrs.frozen
class TwinRecipe:
    """How one Python-backend model is built: a ge model's config with the backend swapped."""

    source: str  #: the ge model it is rendered from
    model_file: str  #: its model.py, from benchmarks/proof/models/
    keep_parameters: bool  #: the ge model's parameters (its acl_json: the same simulated device)
    copy_om: bool  #: the ge model's OM next to model.py (the naive model loads it)
    helpers: tuple[str, ...] = ()  #: other files of models/ that model.py imports, copied beside it
    #: instances per device instead of the source's: a second instance of a one-instance floor keeps its
    #: c=1 points off Triton 2.51's 500 ms batcher poll (see py_logits.py); at c=1 it is idle otherwise
    instances: int | None = None


GE_MODELS = {
    GE_IDENTITY: GeRecipe("identity.yaml", HOST),
    GE_LLAMA: GeRecipe("llama.yaml", HOST),
    REPLICA_GE: GeRecipe("llama.yaml", REPLICA),
    REPLICA_1X1: GeRecipe("llama.yaml", REPLICA, (1, 1)),
    REPLICA_2X1: GeRecipe("llama.yaml", REPLICA, (2, 1)),
}
TWINS = {
    PY_IDENTITY: TwinRecipe(GE_IDENTITY, "py_identity.py", keep_parameters=False, copy_om=False),
    FLOOR: TwinRecipe(GE_LLAMA, "py_logits.py", keep_parameters=False, copy_om=False, instances=2),
    PACED_FLOOR: TwinRecipe(
        REPLICA_2X1, "py_logits_paced.py", keep_parameters=True, copy_om=False, helpers=("py_logits.py",)
    ),
    REPLICA_NAIVE: TwinRecipe(REPLICA_2X1, "naive_llama.py", keep_parameters=True, copy_om=True),
}


@attrs.frozen
class Repository:
    root: Path  #: the model repository
    work: Path  #: everything else: ONNX files, input data, reports
    specs: tuple[ModelSpec, ...]  #: the ge models' specs, as rendered
    inputs: dict[str, Path]  #: model name -> perf_analyzer --input-data JSON

    def config(self, name: str) -> Path:
        return self.root / name / "config.pbtxt"

    def version_dir(self, name: str) -> Path:
        return self.root / name / "1"

    @property
    def reports(self) -> Path:
        return self.work / REPORTS


def bench_specs(models_dir: Path) -> list[ModelSpec]:
    """The packaged bench specs, their ``source`` resolved inside ``models_dir`` (where the ONNX files go)."""
    return list(_bench_specs_by_file(models_dir).values())


def _bench_specs_by_file(models_dir: Path) -> dict[str, ModelSpec]:
    specs = {}
    for name in sorted({recipe.spec_file for recipe in GE_MODELS.values()}):
        spec = load_spec(HERE / "specs" / name)
        specs[name] = attrs.evolve(spec, path=models_dir / name)
    return specs


def acl_json(phase: str) -> dict:
    """What a model of ``phase`` asks the simulator for, in its acl.json (the spec's ``acl_json``)."""
    return seed.sim_section(latency=seed.latency_table(SEQ_GEARS) if phase == REPLICA else None)


def ge_spec(base: ModelSpec, name: str) -> ModelSpec:
    """``base`` (a bench spec) as the ge model ``name`` serves it: its device profile and placement."""
    recipe = GE_MODELS[name]
    placement = base.placement
    if recipe.layout is not None:
        instances, streams = recipe.layout
        placement = attrs.evolve(placement, instances_per_device=instances, streams_per_instance=streams)
    return attrs.evolve(base, name=name, acl_json=acl_json(recipe.phase), placement=placement)


def build_repository(work: str | Path, *, seq: int = 16) -> Repository:
    """ONNX models, sim OMs, every config and model file, input data; starts the repository afresh."""
    if seq not in SEQ_GEARS:
        raise BenchError(
            f"--seq {seq} is not a sequence gear of the served LLaMA; use one of {', '.join(map(str, SEQ_GEARS))} "
            "(the naive baseline, like the GE backend, does not pad)"
        )
    work = Path(work).resolve()
    models_dir = work / "models"
    root = work / "repository"
    models_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(root, ignore_errors=True)  # a model left from an older bench would be served too
    write_model(models_dir / "identity.onnx", identity())
    write_model(models_dir / "tiny_llama.onnx", tiny_llama())
    by_file = _bench_specs_by_file(models_dir)
    specs = [ge_spec(by_file[recipe.spec_file], name) for name, recipe in GE_MODELS.items()]
    write_repository(specs, root)
    built: dict[str, Path] = {}
    for spec in specs:
        om = root / spec.name / "1" / spec.om_filename
        source = str(spec.model.source)
        if source in built:  # the same ONNX and gears: one ATC build, copied
            shutil.copyfile(built[source], om)
            continue
        build(parse_args(atc_args(spec, output=om.with_suffix(""))))
        built[source] = om
    by_name = {spec.name: spec for spec in specs}
    for twin, recipe in TWINS.items():
        _write_twin(root, by_name[recipe.source], twin, recipe)
    inputs = _write_inputs(work / "inputs", seq)
    reports = work / REPORTS
    shutil.rmtree(reports, ignore_errors=True)
    reports.mkdir(parents=True)
    return Repository(root=root, work=work, specs=tuple(specs), inputs=inputs)


def _write_twin(root: Path, spec: ModelSpec, name: str, recipe: TwinRecipe) -> None:
    if recipe.instances is not None:
        placement = attrs.evolve(spec.placement, instances_per_device=recipe.instances)
        spec = attrs.evolve(spec, placement=placement)
    config = render_config(spec)
    config.name = name
    config.backend = "python"
    if not recipe.keep_parameters:
        config.ClearField("parameters")
    version = root / name / "1"
    version.mkdir(parents=True, exist_ok=True)
    text = (
        f"# Written by ge-plugin bench: {spec.name}'s config with backend python.\n"
        + text_format.MessageToString(config, use_short_repeated_primitives=True)
    )
    (root / name / "config.pbtxt").write_text(text)
    shutil.copyfile(HERE / "models" / recipe.model_file, version / "model.py")
    for helper in recipe.helpers:  # modules model.py imports, copied beside it
        shutil.copyfile(HERE / "models" / helper, version / helper)
    if recipe.copy_om:
        shutil.copyfile(root / spec.name / "1" / spec.om_filename, version / spec.om_filename)


def _write_inputs(directory: Path, seq: int) -> dict[str, Path]:
    """perf_analyzer ``--input-data`` files: valid token ids (random int64 would be out of the vocabulary)."""
    directory.mkdir(parents=True, exist_ok=True)
    ids = [(1000 + 7 * k) % LLAMA_VOCAB for k in range(seq)]
    floats = [round(0.25 * k - 2.0, 2) for k in range(16)]
    data = {
        "llama": {"data": [{"input_ids": {"content": ids, "shape": [seq]}}]},
        "identity": {"data": [{"INPUT0": {"content": floats, "shape": [16]}}]},
    }
    paths = {}
    for family, content in data.items():
        path = directory / f"{family}-seq{seq}.json" if family == "llama" else directory / f"{family}.json"
        path.write_text(json.dumps(content) + "\n")
        paths[family] = path
    return {model.name: paths[model.family] for model in models(seq)}
