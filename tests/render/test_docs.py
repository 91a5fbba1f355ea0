"""docs/config.md and docs/spec.md describe what the code does: every key, and an example that parses."""

from __future__ import annotations

import re
from pathlib import Path

import attrs
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from ge_plugin import params
from ge_plugin.params import ModelParams
from ge_plugin.spec import model

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_config_doc_example_is_a_valid_ge_config():
    block = re.search(r"```pbtxt\n(.*?)```", (DOCS / "config.md").read_text(), re.S).group(1)

    config = text_format.Parse(block, mc.ModelConfig())
    parameters = ModelParams.from_parameters({k: v.string_value for k, v in config.parameters.items()})

    assert config.backend == "ge"
    assert parameters.om_model_path == "identity.om"
    assert tuple(config.dynamic_batching.preferred_batch_size) == parameters.gears[-1:]


def test_config_doc_describes_every_parameter():
    text = (DOCS / "config.md").read_text()

    assert [key for key in params.KEYS if f"| `{key}` |" not in text] == []


def test_spec_doc_describes_every_spec_field():
    text = (DOCS / "spec.md").read_text()
    classes = [
        model.ModelSpec,
        model.ModelFiles,
        model.InputDecl,
        model.Preprocess,
        model.OutputDecl,
        model.Batching,
        model.QueuePolicy,
        model.Placement,
        model.VersionFiles,
        model.VersionPolicy,
        model.TokenizerFiles,
    ]
    fields = {f.name for cls in classes for f in attrs.fields(cls) if not f.metadata.get(model.NOT_IN_YAML)}

    assert sorted(f for f in fields if f"`{f}`" not in text and f"`queue.{f}`" not in text) == []
