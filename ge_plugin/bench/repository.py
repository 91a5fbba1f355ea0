"""The bench's own model repository: two ``ge`` models and their Python-backend twins, built from scratch.

The ``ge`` models come from the specs in ``ge_plugin/bench/specs/`` (``llama.yaml`` is ``specs/llama.yaml`` as
served), rendered and compiled to sim OMs exactly as users do it. Each Python-backend twin is rendered from
its ``ge`` twin's spec with only the backend swapped (and a ``model.py`` from ``ge_plugin/bench/models/``), so
batching, instances, queue policy and, for the naive LLaMA, the OM file are the same: the pairs differ only
in what runs inside ``execute``. The repository lives in the bench's work folder, never in
``model_repository/``, which must stay the rendered form of ``specs/``.
"""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path

import attrs
from google.protobuf import text_format

from ge_plugin.atc.command import atc_args
from ge_plugin.atc.flags import parse_args
from ge_plugin.atc.simbuild import build
from ge_plugin.errors import BenchError
from ge_plugin.models import LLAMA_VOCAB, identity, tiny_llama, write_model
from ge_plugin.render import render_config, write_repository
from ge_plugin.spec import load_spec
from ge_plugin.spec.model import ModelSpec

#: sequence lengths the bench may send: the dims gears of specs/llama.yaml, so no request needs padding
SEQ_GEARS = (16, 32, 64, 128)
#: where the stubs' simulators write their counters (GE_PLUGIN_SIM_REPORT_DIR)
REPORTS = "sim-reports"


@attrs.frozen
class BenchModel:
    """One model the bench serves."""

    name: str
    backend: str  #: "ge" or "python"
    family: str  #: "identity" or "llama": models of a family are compared with each other
    what: str  #: one line for tables: what this row stands for
    input_name: str
    #: perf_analyzer ``--shape`` value (dims without the batch dim), or "" when the config fixes every dim
    shape: str = ""


def models(seq: int) -> tuple[BenchModel, ...]:
    """The four served models, in the order tables list them."""
    return (
        BenchModel("ge_identity", "ge", "identity", "ge backend, identity OM [1,16] fp32", "INPUT0"),
        BenchModel("py_identity", "python", "identity", "Python backend identity (the floor)", "INPUT0"),
        BenchModel(
            "ge_llama",
            "ge",
            "llama",
            f"ge backend, tiny LLaMA, gears, seq {seq}",
            "input_ids",
            f"input_ids:{seq}",
        ),
        BenchModel(
            "naive_llama",
            "python",
            "llama",
            f"naive pyACL per request (GE backend's path), seq {seq}",
            "input_ids",
            f"input_ids:{seq}",
        ),
    )


#: Python-backend twin -> (its ge twin, the model.py under ge_plugin/bench/models/, keep the parameters)
TWINS = {
    "py_identity": ("ge_identity", "py_identity.py", False),
    "naive_llama": ("ge_llama", "naive_llama.py", True),
}


@attrs.frozen
class Repository:
    root: Path  #: the model repository
    work: Path  #: everything else: ONNX files, input data, reports
    specs: tuple[ModelSpec, ...]
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
    specs = []
    for name in ("identity.yaml", "llama.yaml"):
        with resources.as_file(resources.files("ge_plugin.bench") / "specs" / name) as path:
            spec = load_spec(path)
        specs.append(attrs.evolve(spec, path=models_dir / name))
    return specs


def build_repository(work: str | Path, *, seq: int = 16) -> Repository:
    """ONNX models, sim OMs, the four configs and model files, input data; safe to run again over old output."""
    if seq not in SEQ_GEARS:
        raise BenchError(
            f"--seq {seq} is not a sequence gear of the served LLaMA; use one of {', '.join(map(str, SEQ_GEARS))} "
            "(the naive baseline, like the GE backend, does not pad)"
        )
    work = Path(work).resolve()
    models_dir = work / "models"
    root = work / "repository"
    models_dir.mkdir(parents=True, exist_ok=True)
    write_model(models_dir / "identity.onnx", identity())
    write_model(models_dir / "tiny_llama.onnx", tiny_llama())
    specs = bench_specs(models_dir)
    write_repository(specs, root)
    by_name = {spec.name: spec for spec in specs}
    for spec in specs:
        build(parse_args(atc_args(spec, output=root / spec.name / "1" / Path(spec.om_filename).stem)))
    for twin, (source, model_file, keep_parameters) in TWINS.items():
        _write_twin(root, by_name[source], twin, model_file, keep_parameters)
    inputs = _write_inputs(work / "inputs", seq)
    reports = work / REPORTS
    shutil.rmtree(reports, ignore_errors=True)
    reports.mkdir(parents=True)
    return Repository(root=root, work=work, specs=tuple(specs), inputs=inputs)


def _write_twin(root: Path, spec: ModelSpec, name: str, model_file: str, keep_parameters: bool) -> None:
    config = render_config(spec)
    config.name = name
    config.backend = "python"
    if not keep_parameters:
        config.ClearField("parameters")
    version = root / name / "1"
    version.mkdir(parents=True, exist_ok=True)
    text = (
        f"# Written by ge-plugin bench: {spec.name}'s config with backend python.\n"
        + text_format.MessageToString(config, use_short_repeated_primitives=True)
    )
    (root / name / "config.pbtxt").write_text(text)
    with resources.as_file(resources.files("ge_plugin.bench.models") / model_file) as path:
        shutil.copyfile(path, version / "model.py")
    if keep_parameters:
        om = root / spec.name / "1" / spec.om_filename
        shutil.copyfile(om, version / spec.om_filename)


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
