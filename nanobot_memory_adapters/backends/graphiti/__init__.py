"""Graphiti (graphiti-core 0.31.1): a temporal knowledge graph, embedded Kuzu by default.

- ``config.py`` the block and its local-endpoint defaults · ``ids.py`` group ids, episode
  names and the event an episode came from · ``store.py`` the native store, which builds
  and calls its collaborators: ``graph.py`` the graph's lifecycle, group locks and drivers ·
  ``writes.py`` episodes and the fact-triple mode · ``search.py`` reads · ``bulk.py`` bulk
  ingest · ``provenance.py`` provenance · and below them ``kuzu.py`` embedded Kuzu ·
  ``falkorlite.py`` FalkorDB embedded (falkordblite) ·
  ``models.py`` local embedder/cross-encoder · ``llm_client.py`` the capped LLM client ·
  ``records.py`` records as JSON.
"""

from __future__ import annotations

from nanobot_memory_adapters.sdk_output import route_sdk_output

# before the SDK is imported: what it prints while loading goes to loguru at DEBUG
route_sdk_output()

from nanobot_memory_adapters.backends.graphiti.config import (  # noqa: E402
    GraphitiConfig,
    effective_max_coroutines,
    provider_info,
)
from nanobot_memory_adapters.backends.graphiti.ids import group_id_for  # noqa: E402
from nanobot_memory_adapters.backends.graphiti.store import GraphitiStore  # noqa: E402

__all__ = [
    "GraphitiConfig",
    "GraphitiStore",
    "effective_max_coroutines",
    "group_id_for",
    "provider_info",
]
