"""Profiles (their format, bad entries, interpolation), knob ladders, and writing a configuration into a spec."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from ge_plugin.errors import SpecError, TuneError
from ge_plugin.spec import load_spec
from ge_plugin.tune import inputs
from ge_plugin.tune.profile import load_profile, parse_profile, seed_profile
from ge_plugin.tune.space import EVERY, build_space, parse_gear_sets
from ge_plugin.tune.specedit import apply, edits_for, spec_for

REPO = Path(__file__).resolve().parents[2]
LLAMA = REPO / "specs" / "llama.yaml"
BERT = REPO / "specs" / "bert.yaml"

IDENTITY = """\
# a tiny model
name: ident
model:
  om: identity.om
  source: identity.onnx
  soc_version: Ascend910B3
inputs:
  - name: INPUT0
    dtype: fp32
    dims: [16]
outputs:
  - name: OUTPUT0
    dtype: fp32
    dims: [16]
batching:
  gears:
    - 1
    - 2     # two
    - 4
  # the queue: no delay
  max_queue_delay_us: 0
"""


@pytest.fixture
def ident(tmp_path):
    path = tmp_path / "ident.yaml"
    path.write_text(IDENTITY)
    return load_spec(path)


def test_a_profile_file_in_the_documented_form_reads_back(tmp_path, ident):
    path = tmp_path / "p.json"
    path.write_text(
        json.dumps({"device": "Ascend910B3", "execute_latency_ms": {"1": 2.0, "2": 2.5, "4": 3.5}})
    )
    profile = load_profile(path, ident)
    assert profile.by_gear == {"1": 2.0, "2": 2.5, "4": 3.5}
    times = profile.times_for(ident)
    assert times.table == {"1": 2.0, "2": 2.5, "4": 3.5} and not times.interpolated


def test_gears_the_profile_lacks_are_interpolated_and_said_so(ident):
    profile = parse_profile({"1": 2.0, "2": 3.0, "4": 5.0}, ident, where="p.json")
    bigger = load_spec_text(IDENTITY.replace("    - 4\n", "    - 4\n    - 8\n"))
    times = profile.times_for(bigger)
    assert times.interpolated == ("8",)
    # an exact line through the three: 1 ms + 1 ms per row (units = rows x 16 elements here)
    assert times.table["8"] == pytest.approx(9.0)
    assert "gears 8 not in the profile" in times.note()


def test_the_profiles_own_formula_wins_over_a_fit(ident):
    profile = parse_profile({"1": 2.0, "base_ms": 10, "per_row_ms": 1}, ident, where="p")
    times = profile.times_for(ident)
    assert times.table == {"1": 2.0, "2": 12.0, "4": 14.0}


def test_one_measured_gear_cannot_be_interpolated(ident):
    profile = parse_profile({"1": 2.0}, ident, where="p.json")
    with pytest.raises(TuneError, match=r"p.json: .*1 measured gear size cannot be interpolated"):
        profile.times_for(ident)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"1": 2, "1": 3}', "key '1' appears twice"),
        ('{"1": NaN}', "NaN is not a number JSON allows"),
        ('{"1": -2, "4,16": 3, "2": "fast", "3": true}', None),
        ("[1, 2]", "a profile is a JSON object"),
        ('{"execute_latency_ms": {"1": 1}, "devise": "x"}', "unknown key 'devise'"),
        ("{}", "no gear has a time"),
        ("not json", "not a JSON profile"),
    ],
)
def test_a_bad_profile_names_every_bad_entry(tmp_path, ident, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(TuneError) as caught:
        load_profile(path, ident)
    text = str(caught.value)
    assert str(path) in text
    if message is None:  # every bad entry at once
        assert "'1': -2 is not a time in ms" in text
        assert "gear '4,16' is not a gear of this model: a label is a batch size" in text
        assert "'2': 'fast' is not a time" in text and "'3': True is not a time" in text
    else:
        assert message in text


def test_the_seed_profile_gives_the_seed_times_by_batch_whatever_the_sequence():
    spec = load_spec(LLAMA)
    times = seed_profile(spec).times_for(spec)
    assert times.table["1,16"] == times.table["1,128"] == 78.0
    assert times.table["8,64"] == 220.0


def load_spec_text(text: str, tmp=Path("/tmp")) -> object:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.yaml"
        path.write_text(text)
        return load_spec(path)


def test_a_configuration_is_written_into_the_users_own_text(ident):
    space = build_space(ident)
    config = (
        space.start.with_("batch_gears", (1, 2, 4, 8)).with_("max_queue_delay_us", 1000).with_("streams", 2)
    )
    config = config.with_("preferred_batch_sizes", EVERY)
    candidate, text = spec_for(ident, IDENTITY, config)
    assert "# a tiny model" in text and "# the queue: no delay" in text  # the user's comments stay
    assert "  gears: [1, 2, 4, 8]  # tuned, was [1,2,4]" in text
    assert "  max_queue_delay_us: 1000  # tuned, was 0" in text
    assert "placement:\n  streams_per_instance: 2  # tuned, was 1" in text
    assert candidate.gears == (1, 2, 4, 8) and candidate.placement.streams_per_instance == 2
    assert candidate.batching is not None and candidate.batching.preferred_batch_sizes == (1, 2, 4, 8)
    assert candidate.path == ident.path


def test_a_configuration_the_spec_rules_refuse_is_refused_in_the_validators_words():
    spec = load_spec(BERT)
    # 4 batch gears x 26 dims gears = 104 ATC gears, past ATC's 100
    many = tuple((n, n) for n in range(8, 34))
    config = build_space(spec).start.with_("dims_gears", many)
    with pytest.raises(SpecError) as caught:
        spec_for(spec, BERT.read_text(), config)
    assert "4 batch gears x 26 dims gears make 104 ATC gears" in str(caught.value)
    streams = build_space(spec).start.with_("instances", 400).with_("streams", 3)
    with pytest.raises(SpecError, match="1024"):
        spec_for(spec, BERT.read_text(), streams)


def test_flow_style_sections_and_missing_sections_are_edited_too(tmp_path):
    text = (
        "name: x\nmodel: {om: a.om, source: a.onnx, soc_version: Ascend910B3}\n"
        "inputs: [{name: a, dtype: fp32, dims: [4]}]\noutputs: [{name: b, dtype: fp32, dims: [4]}]\n"
        "batching: {gears: [1, 2]}\n"
    )
    path = tmp_path / "x.yaml"
    path.write_text(text)
    spec = load_spec(path)
    config = build_space(spec).start.with_("max_queue_delay_us", 500).with_("instances", 2)
    candidate, edited = spec_for(spec, text, config)
    assert "batching: {gears: [1, 2], max_queue_delay_us: 500}" in edited
    assert "placement:\n  instances_per_device: 2  # tuned, was 1" in edited
    assert candidate.placement.instances_per_device == 2


def test_ladders_hold_the_spec_own_values_and_stay_within_reason():
    spec = load_spec(LLAMA)
    space = build_space(spec)
    assert (1, 4, 8) in space.ladders["batch_gears"]
    assert max(max(g) for g in space.ladders["batch_gears"]) == 32  # 4 x the largest gear
    dims = space.ladders["dims_gears"]
    assert (
        dims[0] == ((32,), (128,)) and ((16,), (32,), (64,), (128,)) in dims
    )  # sparser (pad: true) and denser
    assert space.ladders["instances"][:2] == (1, 2)
    assert (space.start.instances, space.start.streams) == (1, 2)  # the served spec's own layout
    # without pad, a dims gear cannot be dropped: requests of that length would be refused
    nopad = build_space(spec, pad_ok=False)
    assert nopad.ladders["dims_gears"][0] == spec.dims_gear_values


def test_only_the_knobs_asked_for_vary():
    space = build_space(load_spec(LLAMA), knobs=("instances", "max_queue_delay_us"))
    assert space.varying == ("instances", "max_queue_delay_us")


def test_gear_set_options_parse_and_name_what_is_wrong():
    assert parse_gear_sets("1,4,8;1,2,4,8", pairs=False) == ((1, 4, 8), (1, 2, 4, 8))
    assert parse_gear_sets("224x224,448x448", pairs=True) == (((224, 224), (448, 448)),)
    with pytest.raises(ValueError, match="'0' in '1,0' is not a gear"):
        parse_gear_sets("1,0", pairs=False)


def test_requests_a_candidate_cannot_take_are_found_before_it_is_served(tmp_path):
    spec = load_spec(LLAMA)
    shapes = inputs.default_shapes(spec)
    assert [s["input_ids"] for s in shapes] == [(16,), (32,), (64,), (128,)]
    assert inputs.refused_shape(spec, shapes) == ""
    fewer = spec_for(spec, LLAMA.read_text(), build_space(spec).start.with_("dims_gears", ((16,), (32,))))[0]
    assert "fits no dims gear" in inputs.refused_shape(fewer, shapes)
    data = inputs.write_input_data(spec, shapes, tmp_path / "in.json")
    entry = json.loads(data.read_text())["data"][0]["input_ids"]
    assert entry["shape"] == [16] and all(0 <= v <= 31999 for v in entry["content"])
    assert inputs.read_shapes(data, spec) == shapes


def test_requests_of_an_image_size_model_fit_only_its_sizes_unless_padded():
    # the fit is the engine's gear rule: without pad an image must be one of the sizes, with pad one that holds it
    spec = load_spec(REPO / "tests" / "render" / "specs" / "images.yaml")
    assert inputs.refused_shape(spec, [{"images": (3, 224, 224)}, {"images": (3, 448, 448)}]) == ""
    refused = inputs.refused_shape(spec, [{"images": (3, 224, 224)}, {"images": (3, 300, 300)}])
    assert refused == "a 300x300 images fits no image size of [[224, 224], [448, 448]]"
    padded = attrs.evolve(spec, inputs=[attrs.evolve(t, pad=True) for t in spec.inputs])
    assert inputs.refused_shape(padded, [{"images": (3, 300, 300)}]) == ""
    assert "fits no image size" in inputs.refused_shape(padded, [{"images": (3, 500, 224)}])


@pytest.mark.parametrize("request_tensor", ["uint8", "bytes"])
def test_an_image_input_is_sent_a_real_jpeg_in_the_tensor_its_requests_take(tmp_path, request_tensor):
    """bench and tune send a preprocessed input what its clients send (a JPEG's bytes as UINT8 [n], or one
    BYTES element), never the model's float tensor; the direct engine reads the same file back."""
    import io

    import numpy as np
    from PIL import Image

    from ge_plugin.measure.direct import request_from_input_data

    text = (
        (REPO / "specs" / "cnn_jpeg.yaml").read_text().replace("request: uint8", f"request: {request_tensor}")
    )
    (tmp_path / "cnn.yaml").write_text(text)
    spec = load_spec(tmp_path / "cnn.yaml")
    jpeg = inputs.sample_jpeg()
    assert Image.open(io.BytesIO(jpeg)).format == "JPEG"
    assert Image.open(io.BytesIO(jpeg)).size == inputs.SAMPLE_SIZE
    shapes = inputs.default_shapes(spec)
    assert shapes == [{"images": (len(jpeg),) if request_tensor == "uint8" else (1,)}]
    assert inputs.refused_shape(spec, shapes) == ""
    data = inputs.write_input_data(spec, shapes, tmp_path / "in.json")
    assert inputs.read_shapes(data, spec) == shapes
    dtype = np.dtype(np.uint8) if request_tensor == "uint8" else np.dtype(object)
    (request,) = request_from_input_data(data, {"images": dtype}).values()
    if request_tensor == "uint8":
        assert request.shape == (1, len(jpeg)) and request.tobytes() == jpeg
    else:
        assert request.shape == (1, 1) and request[0, 0] == jpeg


def test_the_edits_are_only_the_changed_knobs(ident):
    start = build_space(ident).start
    assert edits_for(ident, start) == []
    assert apply(IDENTITY, []) == IDENTITY
