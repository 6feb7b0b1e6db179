"""mem0 (mem0ai 2.2.1 ``AsyncMemory``) on embedded Qdrant with local MiniLM embeddings,
and the ``simple_rag`` control (the same store with ``infer=False``).

- ``config.py``: the config blocks and the two ProviderInfos;
- ``store.py``: the native store (mapping, native requests, lifecycle) and the
  ``simple_rag`` registration;
- ``qdrant.py``: one local Qdrant client per path per process;
- ``extraction_log.py``: mem0's swallowed extraction failures, read from its own log.
"""

from __future__ import annotations

from nanobot_memory_adapters.sdk_output import route_sdk_output

# before the SDK is imported: what it prints while loading goes to loguru at DEBUG
route_sdk_output()

from nanobot_memory_adapters.backends.mem0.config import (  # noqa: E402
    MEM0_INFO,
    SIMPLE_RAG_INFO,
    LLMSettings,
    Mem0Config,
    SimpleRagConfig,
)
from nanobot_memory_adapters.backends.mem0.store import (  # noqa: E402
    Mem0Store,
    SimpleRag,
    simple_rag_store,
)

__all__ = [
    "MEM0_INFO",
    "SIMPLE_RAG_INFO",
    "LLMSettings",
    "Mem0Config",
    "Mem0Store",
    "SimpleRag",
    "SimpleRagConfig",
    "simple_rag_store",
]
