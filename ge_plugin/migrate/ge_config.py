"""Reading a CANN GE backend (``backend: "npu_ge"``) config.pbtxt: the ModelConfig, where each key is, and
the GE options its ``parameters`` carry.

The keys are the ones that backend reads (its src/model_state.cpp; docs/migrate.md lists them): fixed keys
(``device_ids``, ``device_exec_blocks``, ``instance_exec_blocks``, ``static_model``, ``dump_graph``,
``profiling``, ``dump_data``) and GE options split by prefix: ``session.<ge key>`` and ``graph.<ge key>``
(``global.`` ones were stored and never used). Lines are found in the text so every note can point at its
key, like spec errors do.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from ge_plugin.errors import GearTextError, MigrateError
from ge_plugin.gears import parse_values

GE_BACKEND = "npu_ge"
FIXED_KEYS = (
    "device_ids",
    "device_exec_blocks",
    "instance_exec_blocks",
    "static_model",
    "dump_graph",
    "profiling",
    "dump_data",
)


@attrs.frozen
class GeConfig:
    """One parsed config and the text it came from."""

    path: Path
    text: str
    config: mc.ModelConfig
    #: parameter key -> its string value: the config's, and the launch settings (``--backend-config``) the
    #: config does not set
    parameters: dict[str, str]
    #: the keys of ``parameters`` that came from ``tritonserver --backend-config=npu_ge,KEY=VALUE``
    launch: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        """The model name: ``name`` or, as Triton does, the model folder's name."""
        return self.config.name or self.path.resolve().parent.name

    def line_of_parameter(self, key: str) -> int:
        """The config line of parameter ``key``; 0 for a launch setting (``--backend-config``)."""
        if key in self.launch:
            return 0
        match = re.search(r'key\s*:\s*"' + re.escape(key) + '"', self.text)
        return self._line(match)

    def line_of_field(self, field: str, occurrence: int = 0) -> int:
        matches = list(re.finditer(r"(?m)^\s*" + re.escape(field) + r"\s*[:{\[]", self.text))
        return self._line(
            matches[occurrence] if occurrence < len(matches) else (matches[0] if matches else None)
        )

    def line_of_tensor(self, field: str, index: int, name: str) -> int:
        """The line naming tensor ``name`` (``name: "image"``), else the ``field`` entry's."""
        match = re.search(r'\bname\s*:\s*"' + re.escape(name) + '"', self.text)
        return self._line(match) if match else self.line_of_field(field, index)

    def _line(self, match: re.Match[str] | None) -> int:
        return self.text.count("\n", 0, match.start()) + 1 if match is not None else 1

    def ge_option(self, ge_key: str) -> tuple[str, str] | None:
        """(parameter key, value) of a GE option given as ``session.KEY`` or ``graph.KEY``; graph wins, as it
        is applied last."""
        for prefix in ("graph.", "session."):
            if prefix + ge_key in self.parameters:
                return prefix + ge_key, self.parameters[prefix + ge_key]
        return None


def read_config(path: str | Path) -> GeConfig:
    """Parse ``path``; MigrateError names the file (and line) when it is unreadable, not a ModelConfig, or
    not a GE backend config."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MigrateError(f"{path}: cannot read: {exc}") from None
    config = mc.ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        line = getattr(exc, "GetLine", lambda: None)() or 1
        raise MigrateError(f"{path}:{line}: not a Triton model config: {exc}") from None
    parameters = {key: value.string_value for key, value in config.parameters.items()}
    ge = GeConfig(path=path, text=text, config=config, parameters=parameters)
    backend = config.backend or config.platform
    if config.backend != GE_BACKEND:
        hint = " (already ge-plugin's backend: nothing to migrate)" if backend == "ge" else ""
        raise MigrateError(
            f'{path}:{ge.line_of_field("backend")}: backend is {backend!r}, not "{GE_BACKEND}": '
            f"ge-plugin migrate reads CANN GE backend configs{hint}"
        )
    return ge


def parse_input_shape(value: str) -> list[tuple[str, list[int]]]:
    """``graph.ge.inputShape``: ``"image:-1,3,224,224;mask:-1,-1"`` -> [(name, dims)], in order."""
    shapes = []
    for part in value.split(";"):
        if not part.strip():
            continue
        name, sep, dims = part.rpartition(":")
        if not sep or not name.strip():
            raise ValueError(f"expected NAME:DIM,DIM,... per input, got {part!r}")
        try:
            shapes.append((name.strip(), [int(d) for d in dims.split(",")]))
        except ValueError:
            raise ValueError(f"dims must be integers, got {part!r}") from None
    if not shapes:
        raise ValueError("no input shapes")
    return shapes


def parse_dynamic_dims(value: str) -> list[list[int]]:
    """``graph.ge.dynamicDims``: ``"1;2;4;8"`` or ``"1,224,224;8,448,448"`` -> one list per gear (ATC's
    ``--dynamic_dims`` text, read by ``ge_plugin.gears.parse_values``)."""
    try:
        return [list(gear) for gear in parse_values(value, kind="dims")]
    except GearTextError as exc:
        words = {"widths": "every gear lists the same number of values, got {text!r}"}
        raise ValueError(
            exc.said(words, "expected gears as V,V,...;V,V,... (integers >= 1), got {text!r}")
        ) from None


#: GE backend settings given at launch that are not model parameters: GEInitialize's global options
GLOBAL_PREFIX = "ge."


def parse_backend_config(text: str) -> tuple[str, str, str]:
    """``BACKEND,KEY=VALUE`` (tritonserver's ``--backend-config``: one setting per flag, the value everything
    after the first ``=``, quotes a shell would have left around it removed) -> (backend, key, value)."""
    backend, comma, setting = text.partition(",")
    key, equals, value = setting.partition("=")
    if not comma or not equals or not backend.strip() or not key.strip():
        raise ValueError(
            f"expected BACKEND,KEY=VALUE as tritonserver takes it (npu_ge,ge.aicoreNum=12|10), got {text!r}"
        )
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    return backend.strip(), key.strip(), value
