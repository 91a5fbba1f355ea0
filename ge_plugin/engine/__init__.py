"""The engine: one OM model instance per device, knowing neither Triton nor YAML."""

from ge_plugin.engine.config import IOConfig, ServingConfig, device_for_instance, read_config_pbtxt
from ge_plugin.engine.engine import Engine
from ge_plugin.engine.gear_table import Gear, GearTable
from ge_plugin.engine.lane import Answer, Put
from ge_plugin.engine.modes import Lifetime, Mode
from ge_plugin.engine.stats import EXECUTE_BUCKETS_US, EngineStats

__all__ = [
    "EXECUTE_BUCKETS_US",
    "Answer",
    "Engine",
    "EngineStats",
    "Gear",
    "GearTable",
    "IOConfig",
    "Lifetime",
    "Mode",
    "Put",
    "ServingConfig",
    "device_for_instance",
    "read_config_pbtxt",
]
