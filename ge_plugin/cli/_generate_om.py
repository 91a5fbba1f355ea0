"""A generating spec checked against its OM: every tensor, dtype, fixed dim and gear the ``generate:``
section promises, each problem at the line of the key that promised it (``file:LINE: $.generate...``).

The OM is loaded through the device layer (pyACL, or the simulator), as the backend will load it.
"""

from __future__ import annotations

from pathlib import Path

from ge_plugin.generate import GenerateConfig, Layout, LayoutError, describe
from ge_plugin.spec.load import Problem, located
from ge_plugin.spec.model import ModelSpec

ROLES = ("input_ids", "attention_mask", "position_ids", "logits", "past", "present")


def engine_config(spec: ModelSpec) -> GenerateConfig:
    return (
        GenerateConfig.from_json(spec.generate.engine_json())
        if spec.generate is not None
        else GenerateConfig()
    )


def om_problems(spec: ModelSpec, om_path: Path) -> tuple[str, ...]:
    """Every mismatch between ``spec.generate`` and the OM at ``om_path``; empty when they agree."""
    from ge_plugin.device import Context, OmModel, acquire, release

    section = spec.generate
    assert section is not None and spec.path is not None
    config = engine_config(spec)
    problems: list[Problem] = []
    acquire()
    try:
        with Context(spec.placement.devices[0]) as context:
            om = OmModel(om_path, context)
            try:
                layout = describe(om, config)
            except LayoutError as exc:
                problems = [(_where(spec, config, where), message) for where, message in exc.problems]
            else:
                problems = _compare(spec, layout)
            finally:
                om.close()
    finally:
        release()
    return located(spec.path, [(where, f"{om_path.name}: {message}") for where, message in problems])


def _where(spec: ModelSpec, config: GenerateConfig, where: str) -> tuple[str | int, ...]:
    if where in ROLES:
        return ("generate", "tensors", where)
    if where == "gears":
        return ("generate", "batch_gears")
    names = {getattr(config, role): role for role in ROLES[:4]}
    if where in names:
        return ("generate", "tensors", names[where])
    assert spec.generate is not None
    for role, pattern in (("past", config.past), ("present", config.present)):
        prefix = pattern.split("{", 1)[0]
        if where == pattern or (prefix and where.startswith(prefix)):
            return ("generate", "tensors", role)
    return ("generate",)


def _compare(spec: ModelSpec, layout: Layout) -> list[Problem]:
    section = spec.generate
    assert section is not None
    checks: list[tuple[tuple[str | int, ...], object, object]] = [
        (("generate", "context"), section.context, layout.context),
        (("generate", "vocab"), section.vocab, layout.vocab),
        (("generate", "cache", "layers"), section.cache.layers, layout.layers),
        (("generate", "cache", "heads"), section.cache.heads, layout.heads),
        (("generate", "cache", "head_dim"), section.cache.head_dim, layout.head_dim),
        (("generate", "batch_gears"), list(section.batch_gears), list(layout.batch_gears)),
        (("generate", "seq_gears"), sorted({1, *section.seq_gears}), list(layout.seq_gears)),
    ]
    return [(where, f"the spec says {said}, the OM has {has}") for where, said, has in checks if said != has]
