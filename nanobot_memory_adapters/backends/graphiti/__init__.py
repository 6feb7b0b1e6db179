"""Graphiti (graphiti-core 0.31.1): a temporal knowledge graph, embedded Kuzu by default.

- ``config.py`` the block and its local-endpoint defaults · ``ids.py`` group ids ·
  ``adapter.py`` the adapter (lifecycle, writes) · ``search.py`` reads · ``bulk.py`` bulk
  ingest · ``provenance.py`` provenance · ``triplets.py`` the fact-triple mode ·
  ``kuzu.py`` embedded Kuzu · ``models.py`` local embedder/cross-encoder ·
  ``records.py`` records as JSON.
"""

from __future__ import annotations

from nanobot_memory_adapters.backends.graphiti.adapter import GraphitiAdapter
from nanobot_memory_adapters.backends.graphiti.config import (
    GraphitiConfig,
    effective_max_coroutines,
    provider_info,
)
from nanobot_memory_adapters.backends.graphiti.ids import group_id_for
from nanobot_memory_adapters.backends.graphiti.triplets import GraphitiTripletAdapter

__all__ = [
    "GraphitiAdapter",
    "GraphitiConfig",
    "GraphitiTripletAdapter",
    "effective_max_coroutines",
    "group_id_for",
    "provider_info",
]
