"""The engine: one OM model instance per device, knowing neither Triton nor YAML."""

from ge_plugin.engine.config import IOConfig, ServingConfig, read_config_pbtxt
from ge_plugin.engine.engine import Engine, device_for_instance
from ge_plugin.engine.gears import Gear, GearTable
from ge_plugin.engine.modes import Lifetime, Mode
from ge_plugin.engine.stats import EXECUTE_BUCKETS_US, EngineStats

__all__ = [
    "EXECUTE_BUCKETS_US",
    "Engine",
    "EngineStats",
    "Gear",
    "GearTable",
    "IOConfig",
    "Lifetime",
    "Mode",
    "ServingConfig",
    "device_for_instance",
    "read_config_pbtxt",
]
