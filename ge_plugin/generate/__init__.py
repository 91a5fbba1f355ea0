"""Generation from OM files: the KV cache on the device, sequences batched step by step (engine level: it
knows neither Triton nor YAML). docs/generate.md has the OM contract."""

from ge_plugin.generate.config import GenerateConfig, Layout, LayoutError, describe
from ge_plugin.generate.engine import Generator, Sequence
from ge_plugin.generate.sampling import SamplingParams

__all__ = ["GenerateConfig", "Generator", "Layout", "LayoutError", "SamplingParams", "Sequence", "describe"]
