"""mem0 (mem0ai 2.2.1 ``AsyncMemory``) on embedded Qdrant with local MiniLM embeddings,
and the ``simple_rag`` control (the same adapter with ``infer=False``).

- ``config.py``: the config blocks and the two ProviderInfos;
- ``adapter.py``: the adapter (mapping, native requests, formatting, lifecycle);
- ``qdrant.py``: one local Qdrant client per path per process;
- ``extraction_log.py``: mem0's swallowed extraction failures, read from its own log.
"""

from __future__ import annotations

from nanobot_memory_adapters.sdk_output import route_sdk_output

# before the SDK is imported: what it prints while loading goes to loguru at DEBUG
route_sdk_output()

from nanobot_memory_adapters.backends.mem0.adapter import Mem0Adapter, SimpleRagAdapter  # noqa: E402
from nanobot_memory_adapters.backends.mem0.config import (  # noqa: E402
    MEM0_INFO,
    SIMPLE_RAG_INFO,
    LLMSettings,
    Mem0Config,
    SimpleRagConfig,
)

__all__ = [
    "MEM0_INFO",
    "SIMPLE_RAG_INFO",
    "LLMSettings",
    "Mem0Adapter",
    "Mem0Config",
    "SimpleRagAdapter",
    "SimpleRagConfig",
]
