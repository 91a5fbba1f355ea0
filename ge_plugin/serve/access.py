"""Who may use which of tritonserver's APIs, and what a model-load request may ask: one policy for every front.

tritonserver 2.51 opens every API to every client that reaches a port. Its repository API uploads model code
with a load request's ``file:`` parameters (with a Python-based backend: code run inside the server), a
``config`` override can point ``om_model_path`` anywhere on the server, and the shared-memory, logging and
trace APIs change the server for every client. ``ge-plugin serve`` opens inference, health and metadata to
all and the other groups (``RESTRICTED``) only to clients that send the admin key; model files and OM paths
outside the model's own folder are refused unless the operator turned them on, whatever the key.

This module knows neither HTTP nor gRPC: the HTTP front and the gRPC front map a request to its API group and
its load parameters to plain values, and call ``Access.check_key`` / ``Access.check_load``. Refusals are
``Refused`` with an HTTP status and a message that names no server path.
"""

from __future__ import annotations

import hmac
import json
import os
import re
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from ge_plugin.errors import Refused, ServeError

#: tritonserver 2.51's API groups, as its ``--http-restricted-api`` / ``--grpc-restricted-protocol`` name them
GROUPS = (
    "health",
    "metadata",
    "inference",
    "shared-memory",
    "model-config",
    "model-repository",
    "statistics",
    "trace",
    "logging",
)
#: the groups that need the admin key: each lets a client change the server or read what it should not
RESTRICTED = frozenset(
    {"model-repository", "shared-memory", "logging", "trace", "model-config", "statistics"}
)
#: the admin key's name: HTTP header ``ge-admin-key``, gRPC metadata ``triton-grpc-protocol-ge-admin-key``
ADMIN_KEY_NAME = "ge-admin-key"
#: the key that closes the repository API on a protocol with no front that checks loads (``Access.load_checked``):
#: only ge-plugin's own calls carry it, so neither model files nor OM paths can get past unchecked
INTERNAL_KEY_NAME = "ge-plugin-internal"
#: how tritonserver's gRPC endpoint names a restricted-protocol key in request metadata
GRPC_KEY_PREFIX = "triton-grpc-protocol-"
ADMIN_KEY_ENV = "GE_PLUGIN_ADMIN_KEY"
MIN_KEY_CHARS = 16
#: tritonserver's flag per protocol
FLAGS = {"http": "--http-restricted-api", "grpc": "--grpc-restricted-protocol"}
#: tritonserver 2.51's gRPC methods (inference.GRPCInferenceService) by API group, as it restricts them
GRPC_METHOD_GROUPS = {
    "ServerLive": "health",
    "ServerReady": "health",
    "ModelReady": "health",
    "ServerMetadata": "metadata",
    "ModelMetadata": "metadata",
    "ModelInfer": "inference",
    "ModelStreamInfer": "inference",
    "ModelConfig": "model-config",
    "ModelStatistics": "statistics",
    "RepositoryIndex": "model-repository",
    "RepositoryModelLoad": "model-repository",
    "RepositoryModelUnload": "model-repository",
    "SystemSharedMemoryStatus": "shared-memory",
    "SystemSharedMemoryRegister": "shared-memory",
    "SystemSharedMemoryUnregister": "shared-memory",
    "CudaSharedMemoryStatus": "shared-memory",
    "CudaSharedMemoryRegister": "shared-memory",
    "CudaSharedMemoryUnregister": "shared-memory",
    "TraceSetting": "trace",
    "LogSettings": "logging",
}
_OPEN_HOW = f"the operator opens it with ge-plugin serve --admin-key-file PATH or ${ADMIN_KEY_ENV}"


@attrs.frozen
class Restriction:
    """API groups closed unless a request carries ``key`` with ``value`` (one tritonserver restriction flag)."""

    groups: frozenset[str]
    key: str  #: lower case; the HTTP header, or the suffix of gRPC's ``triton-grpc-protocol-<key>``
    value: str = attrs.field(repr=False)

    def name(self, protocol: str) -> str:
        """The header (HTTP) or metadata key (gRPC) that carries the value."""
        return self.key if protocol == "http" else GRPC_KEY_PREFIX + self.key

    def flag(self, protocol: str) -> str:
        """This restriction as tritonserver's own flag, in its ``apis:key=value`` form."""
        return f"{FLAGS[protocol]}={','.join(sorted(self.groups))}:{self.key}={self.value}"


def parse_restriction(text: str, protocol: str = "http") -> Restriction:
    """The value of ``--http-restricted-api`` / ``--grpc-restricted-protocol`` read as tritonserver 2.51 reads
    it, ``APIS:KEY=VALUE`` (APIS comma-separated); ServeError naming the flag (never the value) otherwise."""
    flag = FLAGS[protocol]
    apis, colon, pair = text.partition(":")
    key, equals, value = pair.partition("=")
    key = key.strip().lower()
    if not colon or not equals or not key or not value:
        raise ServeError(
            f"{flag}: expected tritonserver's form APIS:KEY=VALUE (for example "
            f"{flag}=model-repository,logging:admin-key=VALUE)"
        )
    groups = frozenset(a.strip() for a in apis.split(","))
    unknown = sorted(groups - set(GROUPS))
    if unknown:
        raise ServeError(f"{flag}: unknown API group {unknown[0]!r} (tritonserver has {', '.join(GROUPS)})")
    return Restriction(groups, key, value)


def read_key(path: Path | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The operator's admin key: ``path``'s content, else ``$GE_PLUGIN_ADMIN_KEY`` (whitespace stripped at
    both ends), else None; ServeError for a file that cannot be read or a key shorter than MIN_KEY_CHARS."""
    environ = os.environ if environ is None else environ
    if path is not None:
        try:
            key = Path(path).read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ServeError(f"--admin-key-file {path}: cannot read it ({exc.__class__.__name__})") from None
        where = f"--admin-key-file {path}"
    elif environ.get(ADMIN_KEY_ENV):
        key = environ[ADMIN_KEY_ENV].strip()
        where = f"${ADMIN_KEY_ENV}"
    else:
        return None
    if len(key) < MIN_KEY_CHARS:
        raise ServeError(
            f"{where}: the admin key has {len(key)} characters, fewer than {MIN_KEY_CHARS} "
            "(make one with: openssl rand -hex 32)"
        )
    if not all(33 <= ord(c) < 127 for c in key):
        raise ServeError(
            f"{where}: the admin key must be visible ASCII without spaces (it travels in a header)"
        )
    return key


def internal_key() -> str:
    """A key no client learns: what tritonserver is given when the operator gave none."""
    return secrets.token_hex(32)


@attrs.frozen
class Access:
    """The access policy of one server: which key each API group needs, per protocol, and what a load may do.

    ``passed`` holds the restrictions the operator passed to tritonserver with its own flags, per protocol
    (``"http"``, ``"grpc"``): those groups need that key instead of the admin key. ``opened``: groups of
    RESTRICTED the operator opened to every client. ``load_checked``: the protocols whose front applies
    ``check_load``; on the others the repository API is closed to every client, key or not (only ge-plugin's
    own calls, with ``internal``, get through): tritonserver itself would take model files and any OM path."""

    admin_key: str = attrs.field(repr=False, factory=internal_key)
    #: the operator gave the key (else it is ``internal_key()``: the restricted groups are closed to clients)
    operator_key: bool = False
    allow_model_files: bool = False
    #: folders (besides each model's own) a load's config override may take its OM from
    model_roots: tuple[Path, ...] = ()
    repository: Path | None = None
    passed: Mapping[str, tuple[Restriction, ...]] = attrs.field(factory=dict)
    opened: frozenset[str] = frozenset()
    load_checked: frozenset[str] = frozenset({"http", "grpc"})
    internal: str = attrs.field(repr=False, factory=internal_key)

    def __attrs_post_init__(self) -> None:
        unknown = sorted(self.opened - RESTRICTED)
        if unknown:
            raise ServeError(
                f"--open-api {unknown[0]}: not a restricted API group ({', '.join(sorted(RESTRICTED))})"
            )

    def _operators(self, protocol: str) -> set[str]:
        return {g for r in self.passed.get(protocol, ()) for g in r.groups}

    def internal_restriction(self, protocol: str) -> Restriction | None:
        """The repository API closed to clients on a protocol whose loads no front checks."""
        if protocol in self.load_checked or "model-repository" in self._operators(protocol):
            return None
        return Restriction(frozenset({"model-repository"}), INTERNAL_KEY_NAME, self.internal)

    def admin_restriction(self, protocol: str) -> Restriction | None:
        """The admin key's restriction: RESTRICTED less the groups opened, closed to clients or restricted by
        the operator's own flags."""
        groups = RESTRICTED - self.opened - self._operators(protocol)
        if self.internal_restriction(protocol) is not None:
            groups -= {"model-repository"}
        return Restriction(groups, ADMIN_KEY_NAME, self.admin_key) if groups else None

    def _restrictions(self, protocol: str) -> list[Restriction]:
        found = list(self.passed.get(protocol, ()))
        found += [r for r in (self.admin_restriction(protocol), self.internal_restriction(protocol)) if r]
        return found

    def restriction(self, group: str, protocol: str) -> Restriction | None:
        """What a request of ``group`` must carry on ``protocol``; None: open to every client."""
        if group not in GROUPS:
            raise ValueError(f"unknown API group {group!r}")
        for found in self._restrictions(protocol):
            if group in found.groups:
                return found
        return None

    def tritonserver_args(self) -> list[str]:
        """The restriction flags tritonserver enforces besides the operator's own (which stay in its
        passthrough arguments as given)."""
        args = []
        for protocol in FLAGS:
            for found in (self.admin_restriction(protocol), self.internal_restriction(protocol)):
                if found is not None:
                    args.append(found.flag(protocol))
        return args

    def client_headers(self, protocol: str) -> dict[str, str]:
        """The headers (HTTP) or metadata (gRPC) ge-plugin's own control calls send: every key of ``protocol``."""
        return {r.name(protocol): r.value for r in self._restrictions(protocol)}

    def key_names(self, protocol: str) -> frozenset[str]:
        """The header (metadata) names that carry a key on ``protocol``: a front writes them itself."""
        return frozenset(r.name(protocol) for r in self._restrictions(protocol))

    def exposure(self, protocol: str) -> dict[str, list[str]]:
        """Who may use each API group on ``protocol``: ``{"every client": [...], "the admin key": [...],
        "key <name> (tritonserver's own flag)": [...], "no client (why)": [...]}`` (empty ones left out)."""
        found: dict[str, list[str]] = {}
        for group in GROUPS:
            needed = self.restriction(group, protocol)
            if needed is None:
                who = "every client"
            elif needed.key == INTERNAL_KEY_NAME:
                who = "no client (no front checks loads on this protocol)"
            elif needed.key == ADMIN_KEY_NAME and not self.operator_key:
                who = "no client (no admin key given)"
            elif needed.key == ADMIN_KEY_NAME:
                who = "the admin key"
            else:
                who = f"key {needed.key} (tritonserver's own {FLAGS[protocol]})"
            found.setdefault(who, []).append(group)
        return found

    def check_key(self, group: str, protocol: str, sent: Mapping[str, str | bytes]) -> None:
        """Refused (403, naming the group and how it is opened) unless ``sent`` (lower-case header or metadata
        names) carries the key ``group`` needs. The values are compared in constant time."""
        needed = self.restriction(group, protocol)
        if needed is None:
            return
        name = needed.name(protocol)
        given = sent.get(name)
        if given is not None:
            given_bytes = given.encode("utf-8", "surrogateescape") if isinstance(given, str) else bytes(given)
            if hmac.compare_digest(given_bytes, needed.value.encode()):
                return
        if needed.key == INTERNAL_KEY_NAME:
            how = (
                f"on {protocol} the repository API is closed to every client, since no front checks its loads "
                f"there (ge-plugin serve runs with --no-{protocol}-guard: use the other protocol)"
            )
        elif needed.key != ADMIN_KEY_NAME:
            how = f"send the key the operator set with tritonserver's {FLAGS[protocol]} in {name}"
        elif self.operator_key:
            how = f"send the admin key in {name}"
        else:
            how = f"this server has no admin key: {_OPEN_HOW}, and clients send it in {name}"
        state = "the key sent is not the one it needs" if given is not None else "it needs a key"
        raise Refused(f"the {group} API is restricted and {state}: {how}", 403)

    def check_load(self, model: str, parameters: Mapping[str, object]) -> dict[str, object]:
        """The parameters of a load request for ``model`` that may go to tritonserver (``config`` re-encoded
        from what was checked); Refused for an OM outside the model's folder and the allowed roots, and
        unless ``allow_model_files``: model files, or a config override that serves with another backend or
        runs another Python environment (ways to run code the repository does not hold)."""
        if not model or model in (".", "..") or any(c in model for c in "/\\\0"):
            raise Refused(f"model name {model[:80]!r} is not the name of a folder of the model repository")
        checked: dict[str, object] = {}
        files = [name for name in parameters if name.startswith("file:")]
        if files and not self.allow_model_files:
            name = files[0]
            raise Refused(
                f"load of '{model}': parameter {name[:80]!r} uploads a model file, which this server "
                "refuses whatever the key (the operator allows it with ge-plugin serve "
                "--allow-model-files: whoever holds the admin key may then run code in the server)",
                403,
            )
        for name, value in parameters.items():
            checked[name] = self._checked_config(model, value) if name == "config" else value
        return checked

    def _checked_config(self, model: str, value: object) -> str:
        if not isinstance(value, str):
            raise Refused(
                f"load of '{model}': parameter 'config' must be a string holding the config as JSON"
            )
        try:
            config = json.loads(value, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
        except (ValueError, RecursionError) as exc:
            raise Refused(
                f"load of '{model}': parameter 'config' is not strict JSON ({_short(exc)})"
            ) from None
        if not isinstance(config, dict):
            raise Refused(f"load of '{model}': parameter 'config' must hold a JSON object")
        from google.protobuf import json_format
        from tritonclient.grpc import model_config_pb2

        # read as tritonserver reads it (protobuf's JSON mapping: string_value and stringValue alike), and
        # re-encoded from the message, so that what was checked is what tritonserver gets
        message = model_config_pb2.ModelConfig()
        try:
            _one_spelling(config)
            json_format.ParseDict(config, message)
        except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
            raise Refused(
                f"load of '{model}': parameter 'config' is not a model config ({_short(exc)})"
            ) from None
        if self.allow_model_files:
            pass  # the operator let key holders run code of their own: another backend is one more way
        elif message.backend != "ge" or message.platform or message.runtime:
            raise Refused(
                f"load of '{model}': a config override must serve with backend 'ge' (and no platform or "
                "runtime): another backend would run code the repository does not hold",
                403,
            )
        params = {key: value.string_value for key, value in message.parameters.items()}
        if "EXECUTION_ENV_PATH" in params and not self.allow_model_files:
            raise Refused(
                f"load of '{model}': config.parameters.EXECUTION_ENV_PATH would run another Python environment",
                403,
            )
        self._check_om_paths(model, _om_paths(model, params))
        encoded = json_format.MessageToDict(message, preserving_proto_field_name=True)
        return json.dumps(encoded, separators=(",", ":"), ensure_ascii=False)

    def _check_om_paths(self, model: str, paths: Sequence[tuple[str, str]]) -> None:
        if self.repository is None:
            raise Refused(
                f"load of '{model}': this server takes no config override (no repository known)", 403
            )
        model_dir = Path(os.path.realpath(Path(self.repository) / model))
        roots = [model_dir] + [Path(os.path.realpath(root)) for root in self.model_roots]
        versions = {v for v, _ in paths if v} | _version_folders(model_dir) or {"1"}
        for version, path in paths:
            for folder in [version] if version else sorted(versions):
                resolved = Path(os.path.realpath(model_dir / folder / os.path.expanduser(path)))
                if not any(resolved.is_relative_to(root) for root in roots):
                    raise Refused(
                        f"load of '{model}': the config override's OM path (version {folder}) resolves outside "
                        "the model's own folder, which this server refuses (the operator allows a folder with "
                        "ge-plugin serve --model-root DIR)",
                        403,
                    )


def _version_folders(model_dir: Path) -> set[str]:
    try:
        return {p.name for p in model_dir.iterdir() if p.name.isdigit()}
    except OSError:
        return set()


def _om_paths(model: str, params: Mapping[str, object]) -> list[tuple[str, str]]:
    """(version or "", path) of every OM path in a config's parameters, as the engine reads them."""
    found = []
    for key in ("om_model_path", "version_om_model_paths"):
        if key not in params:
            continue
        text = params[key]
        if isinstance(text, Mapping):
            text = text.get("string_value", "")
        if not isinstance(text, str):
            raise Refused(f"load of '{model}': config.parameters.{key} must be a string value")
        if key == "om_model_path":
            found.append(("", text.strip()))
            continue
        try:
            versions = json.loads(text) if text.strip() else {}
        except ValueError:
            versions = None
        if not isinstance(versions, dict) or not all(isinstance(p, str) for p in versions.values()):
            raise Refused(
                f"load of '{model}': config.parameters.{key} must be a JSON object of version: path"
            )
        for version, path in versions.items():
            if not str(version).isdigit():
                raise Refused(
                    f"load of '{model}': config.parameters.{key} names version {str(version)[:20]!r}"
                )
            found.append((str(int(version)), path.strip()))
    return found


def _one_spelling(value: object) -> None:
    """ValueError for an object that names one field twice, once in each of protobuf's JSON spellings
    (``string_value`` and ``stringValue``): which one a parser keeps is that parser's own choice."""
    if isinstance(value, dict):
        seen: dict[str, str] = {}
        for key, item in value.items():
            field = re.sub(r"[A-Z]", lambda m: "_" + m.group(0).lower(), key)
            if field in seen:
                raise ValueError(
                    f"field {field[:40]!r} is given twice, as {seen[field][:40]!r} and {key[:40]!r}"
                )
            seen[field] = key
            _one_spelling(item)
    elif isinstance(value, list):
        for item in value:
            _one_spelling(item)


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        duplicate = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"key {duplicate[:40]!r} appears twice")
    return dict(pairs)


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _short(exc: BaseException) -> str:
    text = str(exc) if not isinstance(exc, RecursionError) else "nested too deeply"
    return text if len(text) <= 80 else text[:77] + "..."
