"""A replaceable long-term memory slot for nanobot.

The contract (``contract.py``) is the centre; backends, conditions, the nanobot plugin and
the harness all depend on it and never on each other's internals.
"""

from __future__ import annotations

import os

# Telemetry off before any backend SDK is imported (they read these at import time).
os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from nanobot_memory_adapters.config import ConfigError, MemoryConfig
from nanobot_memory_adapters.contract import *  # noqa: F403
from nanobot_memory_adapters.contract import __all__ as _contract_all
from nanobot_memory_adapters.registry import (
    available_providers,
    load_provider,
)

__version__ = "0.1.0"
__all__ = [
    *_contract_all,
    "ConfigError",
    "MemoryConfig",
    "__version__",
    "available_providers",
    "load_provider",
]
