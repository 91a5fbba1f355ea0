"""ge-plugin: Huawei Ascend OM models served by NVIDIA Triton.

Importing the package has no side effects: the pyACL implementation (real or simulated) and the fast-path
implementation (compiled or pure Python) are picked lazily, by ``ge_plugin.device`` and
``ge_plugin.fastpath``.
"""

__version__ = "0.1.0"

from ge_plugin.errors import AclError, ConfigError, GePluginError, RequestError, SpecError

__all__ = ["AclError", "ConfigError", "GePluginError", "RequestError", "SpecError", "__version__"]
