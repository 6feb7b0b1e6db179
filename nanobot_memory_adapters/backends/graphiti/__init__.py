"""Graphiti (graphiti-core 0.31.1): a temporal knowledge graph, embedded Kuzu by default.

- ``config.py`` the block and its local-endpoint defaults · ``ids.py`` group ids ·
  ``adapter.py`` the adapter (lifecycle, writes) · ``search.py`` reads · ``bulk.py`` bulk
  ingest · ``provenance.py`` provenance · ``triplets.py`` the fact-triple mode's native call ·
  ``kuzu.py`` embedded Kuzu · ``falkorlite.py`` FalkorDB embedded (falkordblite) ·
  ``models.py`` local embedder/cross-encoder ·
  ``records.py`` records as JSON.
"""

from __future__ import annotations

from nanobot_memory_adapters.sdk_output import route_sdk_output

# before the SDK is imported: what it prints while loading goes to loguru at DEBUG
route_sdk_output()

from nanobot_memory_adapters.backends.graphiti.adapter import GraphitiAdapter  # noqa: E402
from nanobot_memory_adapters.backends.graphiti.config import (  # noqa: E402
    GraphitiConfig,
    effective_max_coroutines,
    provider_info,
)
from nanobot_memory_adapters.backends.graphiti.ids import group_id_for  # noqa: E402

__all__ = [
    "GraphitiAdapter",
    "GraphitiConfig",
    "effective_max_coroutines",
    "group_id_for",
    "provider_info",
]
