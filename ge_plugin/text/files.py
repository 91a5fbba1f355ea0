"""Where a model repository keeps a model's tokenizer: the one home of the config parameters that name it.

``ge-plugin render`` copies a spec's tokenizer files beside the model (``<repo>/<model>/tokenizer.json`` and
``tokenizer_config.json``) and names them in config.pbtxt's ``parameters``; the front reads them from there
for the OpenAI endpoints and ``text_input``, and a backend checks the model's vocabulary against them at load.
A hand-written config names its own files the same way (paths relative to the model's folder).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from ge_plugin.errors import TokenizerError

#: config parameter: the tokenizer.json, relative to the model's folder
TOKENIZER_JSON = "tokenizer_json"
#: config parameter: the tokenizer_config.json (special tokens, chat template), relative to the model's folder
TOKENIZER_CONFIG = "tokenizer_config_json"
#: the names ``ge-plugin render`` gives the copies, as a checkpoint names them
JSON_NAME = "tokenizer.json"
CONFIG_NAME = "tokenizer_config.json"


def tokenizer_paths(parameters: Mapping[str, str], model_dir: Path) -> tuple[Path, Path | None] | None:
    """The tokenizer files a model's parameters name (None: it has no tokenizer); TokenizerError for a path
    that leaves the model's folder."""
    name = parameters.get(TOKENIZER_JSON, "").strip()
    if not name:
        return None
    config = parameters.get(TOKENIZER_CONFIG, "").strip()
    return _inside(model_dir, name, TOKENIZER_JSON), _inside(
        model_dir, config, TOKENIZER_CONFIG
    ) if config else None


def _inside(model_dir: Path, name: str, key: str) -> Path:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise TokenizerError(f"parameter {key} {name!r}: a path inside the model's folder, without '..'")
    return model_dir / path


def config_parameters(config_pbtxt: Path) -> dict[str, str]:
    """The string parameters of a config.pbtxt, read with Triton's own schema."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2 as mc

    try:
        config = text_format.Parse(config_pbtxt.read_text(encoding="utf-8"), mc.ModelConfig())
    except OSError as exc:
        raise TokenizerError(f"{config_pbtxt}: cannot read: {exc.strerror or exc}") from None
    except text_format.ParseError as exc:
        raise TokenizerError(f"{config_pbtxt}: does not parse: {exc}") from None
    return {key: value.string_value for key, value in config.parameters.items()}
