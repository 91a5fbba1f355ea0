"""Each kind of spec mistake is reported at its own line and path, in the documented format."""

from __future__ import annotations

import re

import pytest

from ge_plugin.errors import SpecError
from ge_plugin.spec import load_spec

# (id, how the spec differs from BASE (conftest.variant's arguments), [(line, path, a fragment of the message)])
MISTAKES = [
    (
        "unknown-key",
        dict(append="precison: origin\n"),
        [(22, "$.precison", "unknown key 'precison' (did you mean 'precision'?)")],
    ),
    (
        "unknown-key-nested",
        dict(replace={"  max_queue_delay_us: 100": "  max_queue_delay: 100"}),
        [
            (
                17,
                "$.batching.max_queue_delay",
                "unknown key 'max_queue_delay' (did you mean 'max_queue_delay_us'?)",
            )
        ],
    ),
    (
        "bad-dtype",
        dict(replace={"    dtype: int64": "    dtype: fp33"}),
        [(8, "$.inputs[0].dtype", "unknown data type 'fp33'; use one of bool,")],
    ),
    (
        "pad-not-a-bool",
        dict(replace={"    dims: [-1]": '    dims: [-1]\n    pad: "yes"'}),
        [(10, "$.inputs[0].pad", "expected true or false, got 'yes'")],
    ),
    (
        "pad-without-a-gear-dim",
        dict(
            replace={
                "    dims: [-1]": "    dims: [-1]\n  - name: mask\n    dtype: int64\n    dims: [8]\n    pad: true"
            }
        ),
        [(13, "$.inputs[1].pad", "mask has no -1 dim, so there is nothing to pad")],
    ),
    (
        "string-tensor",
        dict(replace={"    dtype: int64": "    dtype: TYPE_STRING"}),
        [(8, "$.inputs[0].dtype", "string tensors cannot go to an OM model")],
    ),
    (
        "string-for-list",
        dict(replace={"  gears: [1, 4, 8]": '  gears: "1,4,8"'}),
        [(16, "$.batching.gears", "expected a list, got '1,4,8'")],
    ),
    (
        "float-for-int",
        dict(replace={"  instances_per_device: 1": "  instances_per_device: 1.5"}),
        [(21, "$.placement.instances_per_device", "expected an integer, got 1.5")],
    ),
    (
        "list-for-mapping",
        dict(replace={"placement:": "placement: [0]", "  devices: [0]": "", "  instances_per_device: 1": ""}),
        [(19, "$.placement", "expected a mapping, got a list")],
    ),
    (
        "missing-required-key",
        dict(replace={"  soc_version: Ascend310P3": ""}),
        [(2, "$.model.soc_version", "required key missing")],
    ),
    (
        "duplicate-key",
        dict(append="name: other\n"),
        [(22, "$.name", "duplicate key (first at line 1)")],
    ),
    (
        "gears-not-ascending",
        dict(replace={"  gears: [1, 4, 8]": "  gears: [1, 8, 4]"}),
        [(16, "$.batching.gears[2]", "gears must be strictly ascending, got [1, 8, 4]")],
    ),
    (
        "gear-too-large",
        dict(replace={"  gears: [1, 4, 8]": "  gears: [1, 4, 4096]"}),
        [(16, "$.batching.gears[2]", "a batch gear is 1 to 2048, got 4096")],
    ),
    (
        "one-gear",
        dict(replace={"  gears: [1, 4, 8]": "  gears: [8]"}),
        [(16, "$.batching.gears", "ATC takes 2 to 100 batch gears, got 1")],
    ),
    (
        "zero-dim",
        dict(replace={"    dims: [-1, 8]": "    dims: [-1, 0]"}),
        [(13, "$.outputs[0].dims[1]", "a dim is -1 (dynamic) or >= 1, got 0")],
    ),
    (
        "device-twice",
        dict(replace={"  devices: [0]": "  devices: [0, 1, 0]"}),
        [(20, "$.placement.devices[2]", "device 0 is listed twice")],
    ),
    (
        "negative-count",
        dict(replace={"  instances_per_device: 1": "  instances_per_device: 0"}),
        [(21, "$.placement.instances_per_device", "must be >= 1, got 0")],
    ),
    (
        "instances-past-the-device-streams",
        dict(replace={"  instances_per_device: 1": "  instances_per_device: 1000000000"}),
        [(21, "$.placement.instances_per_device", "at most 512: each instance takes at least two of")],
    ),
    (
        "streams-past-the-device-streams",
        dict(append="  streams_per_instance: 1000000000\n"),
        [(22, "$.placement.streams_per_instance", "at most 1023: a device has 1024 streams")],
    ),
    (
        "instances-times-streams-past-the-device-streams",
        dict(
            replace={"  instances_per_device: 1": "  instances_per_device: 8"},
            append="  streams_per_instance: 200\n",
        ),
        [
            (
                19,
                "$.placement",
                "8 instances x (200 streams + 1 default stream of each instance's context) need 1608",
            )
        ],
    ),
    (
        "warmup-too-long",
        dict(append="warmup: 1000000000\n"),
        [(22, "$.warmup", "at most 100: warm-up runs every gear this many times on every stream")],
    ),
    (
        "queue-numbers-past-their-triton-fields",
        dict(
            replace={
                "  max_queue_delay_us: 100": "  max_queue_delay_us: 100000000000000000000\n"
                "  queue: {max_size: 10000000000, timeout_us: 100000000000000000000}"
            }
        ),
        [
            (17, "$.batching.max_queue_delay_us", "at most 18446744073709551615: Triton's"),
            (18, "$.batching.queue.max_size", "at most 4294967295: Triton's max_queue_size is a 32-bit"),
            (18, "$.batching.queue.timeout_us", "at most 18446744073709551615: Triton's"),
        ],
    ),
    (
        "metrics-interval-past-an-hour",
        dict(append="metrics_interval_ms: 100000000000000000000\n"),
        [(22, "$.metrics_interval_ms", "at most 3600000")],
    ),
    (
        "grid-too-large",
        dict(replace={"dims_gears: [16, 32]": f"dims_gears: {list(range(1, 41))}"}),
        [(18, "$.dims_gears", "3 batch gears x 40 dims gears make 120 ATC gears")],
    ),
    (
        "dims-gear-length",
        dict(replace={"dims_gears: [16, 32]": "dims_gears: [[16, 1], [32, 1]]"}),
        [(18, "$.dims_gears", "one value per -1 input dim (1: input_ids dims[0]), but the gears list 2")],
    ),
    (
        "dims-gears-mixed-forms",
        dict(replace={"dims_gears: [16, 32]": "dims_gears: [16, [32]]"}),
        [(18, "$.dims_gears", "use one form")],
    ),
    (
        "dynamic-dim-without-gears",
        dict(replace={"dims_gears: [16, 32]": ""}),
        [(9, "$.inputs[0].dims[0]", "a -1 dim needs dims_gears")],
    ),
    (
        "dims-gears-without-dynamic-dim",
        dict(
            replace={
                "    dims: [-1]": "    dims: [4]",
                "    dims: [-1, 8]": "    dims: [4, 8]",
                "    follows: {0: input_ids:0}": "",
            }
        ),
        [(17, "$.dims_gears", "no input has a -1 dim")],
    ),
    (
        "tie-to-fixed-dim",
        dict(replace={"    follows: {0: input_ids:0}": "    follows: {1: input_ids:0}"}),
        [(14, "$.outputs[0].follows[1]", "logits dims[1] is 8; only a -1 dim can follow an input")],
    ),
    (
        "tie-to-unknown-input",
        dict(replace={"    follows: {0: input_ids:0}": "    follows: {0: input_idz:0}"}),
        [(14, "$.outputs[0].follows[0]", "no input named 'input_idz'; the inputs are 'input_ids'")],
    ),
    (
        "tie-input-dim-out-of-range",
        dict(replace={"    follows: {0: input_ids:0}": "    follows:\n      0: input_ids:3"}),
        [(15, "$.outputs[0].follows[0]", "input_ids has dims [-1]: there is no dim 3")],
    ),
    (
        "tie-malformed",
        dict(replace={"    follows: {0: input_ids:0}": "    follows: {0: input_ids}"}),
        [(14, "$.outputs[0].follows[0]", "expected INPUT:DIM, e.g. input_ids:0, got 'input_ids'")],
    ),
    (
        "tensor-name-twice",
        dict(replace={"  - name: logits": "  - name: input_ids", "    follows: {0: input_ids:0}": ""}),
        [(11, "$.outputs[0].name", "tensor name 'input_ids' is already used by $.inputs[0]")],
    ),
    (
        "reserved-tensor-name",
        dict(
            replace={
                "  - name: logits": "  - name: ascend_mbatch_shape_data",
                "    follows: {0: input_ids:0}": "",
            }
        ),
        [(11, "$.outputs[0].name", "'ascend_mbatch_shape_data' is the input ATC adds to gear models")],
    ),
    (
        "atc-option-the-spec-controls",
        dict(append="atc_options:\n  log: error\n  dynamic_dims: '1;2'\n"),
        [(24, "$.atc_options.dynamic_dims", "--dynamic_dims is set by the spec; use dims_gears")],
    ),
    (
        "atc-option-with-dashes",
        dict(append="atc_options:\n  --log: error\n"),
        [(23, "$.atc_options['--log']", "write ATC flags without the leading dashes: 'log'")],
    ),
    (
        "input-format-for-dynamic-dims",
        dict(append="atc_options: {input_format: NCHW}\n"),
        [(22, "$.atc_options.input_format", "--dynamic_dims, which needs --input_format=ND, got 'NCHW'")],
    ),
    (
        "bad-precision",
        dict(append="precision: fp8\n"),
        [(22, "$.precision", "expected one of origin, fp16, bf16, got 'fp8'")],
    ),
    (
        "om-not-om",
        dict(replace={"  om: m.om": "  om: ../m.om"}),
        [(3, "$.model.om", "give a relative path without '..'")],
    ),
    (
        "source-not-onnx",
        dict(replace={"  source: m.onnx": "  source: m.pb"}),
        [(4, "$.model.source", "a .onnx file, got 'm.pb'")],
    ),
    (
        "soc-version",
        dict(replace={"  soc_version: Ascend310P3": "  soc_version: 310P3"}),
        [(5, "$.model.soc_version", "expected 'Ascend' + the chip name")],
    ),
    (
        "model-name",
        dict(replace={"name: m": "name: my model"}),
        [(1, "$.name", "use letters, digits, '_', '-' and '.', got 'my model'")],
    ),
    (
        "acl-json-not-json",
        dict(append="acl_json: {dump: {when: 2024-01-01}}\n"),
        [(22, "$.acl_json", "acl.json options must be plain JSON values")],
    ),
    (
        "preferred-not-a-gear",
        dict(
            replace={
                "  max_queue_delay_us: 100": "  max_queue_delay_us: 100\n  preferred_batch_sizes: [4, 6]"
            }
        ),
        [
            (
                18,
                "$.batching.preferred_batch_sizes[1]",
                "6 is not a batch gear; Triton would form batches the OM pads",
            )
        ],
    ),
    (
        "invalid-yaml",
        dict(replace={"    dims: [-1]": "    dims: [-1"}),
        [(10, "$", "invalid YAML: while parsing a flow sequence expected ',' or ']', but got ':'")],
    ),
    (
        "not-a-mapping",
        dict(base="- name: m\n"),
        [(1, "$", "expected a mapping, got a list")],
    ),
    (
        "empty-file",
        dict(base=""),
        [(1, "$", "expected a mapping, got nothing (null)")],
    ),
    (
        "range-upside-down",
        dict(replace={"    dims: [-1]": "    dims: [-1]\n    range: [31999, 0]"}),
        [(10, "$.inputs[0].range", "low 31999 is above high 0")],
    ),
    (
        "range-not-two-numbers",
        dict(replace={"    dims: [-1]": "    dims: [-1]\n    range: [0, many]"}),
        [(10, "$.inputs[0].range[1]", "a range bound is a number, got 'many'")],
    ),
    (
        "range-fraction-for-integers",
        dict(replace={"    dims: [-1]": "    dims: [-1]\n    range: [0, 1.5]"}),
        [(10, "$.inputs[0].range[1]", "int64 holds integers, so its range does too: got 1.5")],
    ),
    (
        "same-as-unknown-input",
        dict(replace={"    dims: [-1]": "    dims: [-1]\n    same_as: mask"}),
        [(10, "$.inputs[0].same_as", "no input named 'mask'; the other inputs are none")],
    ),
]


@pytest.mark.parametrize(("changes", "expected"), [pytest.param(c, e, id=i) for i, c, e in MISTAKES])
def test_load_spec_reports_each_mistake_at_its_line_and_path(write_spec, variant, changes, expected):
    path = write_spec(variant(**changes))

    with pytest.raises(SpecError) as info:
        load_spec(path)

    problems = info.value.problems
    assert len(problems) == len(expected), problems
    for problem, (line, where, fragment) in zip(problems, expected):
        assert problem.startswith(f"{path}:{line}: {where}: "), problem
        assert fragment in problem, problem


def test_mistake_table_covers_at_least_ten_kinds():
    assert len({i for i, _, _ in MISTAKES}) >= 10


def test_load_spec_base_spec_is_valid(write_spec, variant):
    assert load_spec(write_spec(variant())).name == "m"


def test_load_spec_reports_bad_dtype_and_unknown_key_together(write_spec, variant):
    text = variant({"    dtype: fp32": "    dtype: float33"}, append="warmpu: 2\n")

    with pytest.raises(SpecError) as info:
        load_spec(write_spec(text))

    assert [p.split(": ", 2)[:2] for p in info.value.problems] == [
        [f"{write_spec(text)}:12", "$.outputs[0].dtype"],
        [f"{write_spec(text)}:22", "$.warmpu"],
    ]


def test_load_spec_reports_every_failing_validator_of_one_section(write_spec, variant):
    # attrs stops at a class's first failing validator; the loader must still report all three.
    text = variant(
        {"  gears: [1, 4, 8]": "  gears: [4, 1]", "  max_queue_delay_us: 100": "  max_queue_delay_us: -5"},
        append="warmup: -1\n",
    )

    with pytest.raises(SpecError) as info:
        load_spec(write_spec(text))

    assert [p.split(": ", 2)[1] for p in info.value.problems] == [
        "$.batching.gears[1]",
        "$.batching.max_queue_delay_us",
        "$.warmup",
    ]


def test_load_spec_runs_field_checks_next_to_a_type_error(write_spec, variant):
    # A wrong type in one section must not hide a failed check in another.
    text = variant({"  devices: [0]": "  devices: zero", "  gears: [1, 4, 8]": "  gears: [8, 4]"})

    with pytest.raises(SpecError) as info:
        load_spec(write_spec(text))

    assert [p.split(": ", 2)[1:] for p in info.value.problems] == [
        ["$.batching.gears[1]", "gears must be strictly ascending, got [8, 4]"],
        ["$.placement.devices", "expected a list, got 'zero'"],
    ]


def test_load_spec_keeps_attrs_validator_messages(write_spec, variant):
    with pytest.raises(SpecError) as info:
        load_spec(write_spec(variant({"  gears: [1, 4, 8]": "  gears: [0, 4]"})))

    assert "invalid value" not in str(info.value)
    assert "a batch gear is 1 to 2048, got 0" in str(info.value)


def test_load_spec_shows_the_path_as_given(write_spec, variant, monkeypatch):
    path = write_spec(variant({"    dtype: int64": "    dtype: fp33"}), name="given.yaml")
    monkeypatch.chdir(path.parent)

    with pytest.raises(SpecError) as info:
        load_spec("given.yaml")

    assert info.value.problems[0].startswith("given.yaml:8: $.inputs[0].dtype: ")


def test_load_spec_unknown_dtype_lists_only_types_a_spec_accepts(write_spec, variant):
    with pytest.raises(SpecError) as info:
        load_spec(write_spec(variant({"    dtype: int64": "    dtype: fp33"})))

    (problem,) = info.value.problems
    choices = problem.split("use one of ", 1)[1]
    named = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", choices))
    assert {"fp32", "int64", "bf16", "TYPE_FP32", "TYPE_INT64", "TYPE_BF16"} <= named
    assert named.isdisjoint({"string", "TYPE_STRING"}), problem
