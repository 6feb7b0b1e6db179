"""A replaceable long-term memory slot for nanobot.

The contract (``contract.py``) is the centre; backends, conditions, the nanobot plugin and
the harness all depend on it and never on each other's internals.
"""

from __future__ import annotations

from nanobot_memory_adapters import contract as _contract

# Importing the package changes nothing in the host process's environment: SDK telemetry
# is switched off where each backend loads its SDK (telemetry.py), and local models are
# always loaded from local paths (local_models.py), so no hub access is possible.
from nanobot_memory_adapters.config import ConfigError, MemoryConfig
from nanobot_memory_adapters.contract import *  # noqa: F403
from nanobot_memory_adapters.registry import (
    available_providers,
    load_provider,
)

__version__ = "0.1.0"
__all__ = [
    "ConfigError",
    "MemoryConfig",
    "__version__",
    "available_providers",
    "load_provider",
]
__all__ += _contract.__all__
