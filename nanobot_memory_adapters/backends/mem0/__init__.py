"""mem0 (mem0ai 2.2.1 ``AsyncMemory``) on embedded Qdrant with local MiniLM embeddings,
and the ``simple_rag`` control (the same adapter with ``infer=False``).

- ``config.py``: the config blocks and the two ProviderInfos;
- ``adapter.py``: the adapter (mapping, native requests, formatting, lifecycle);
- ``qdrant.py``: one local Qdrant client per path per process;
- ``extraction_log.py``: mem0's swallowed extraction failures, read from its own log.
"""

from __future__ import annotations

from nanobot_memory_adapters.backends.mem0.adapter import Mem0Adapter, SimpleRagAdapter
from nanobot_memory_adapters.backends.mem0.config import (
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
