"""Embedded Kuzu for Graphiti: the driver with the two upstream fixes, one open database
per path per process (``embedded.SharedStores``)."""

from __future__ import annotations

from pathlib import Path

import kuzu
from graphiti_core.driver.driver import GraphDriver, GraphProvider
from graphiti_core.driver.kuzu_driver import KuzuDriver
from graphiti_core.graph_queries import get_fulltext_indices

from nanobot_memory_adapters.backends.graphiti.config import DatabaseSettings
from nanobot_memory_adapters.embedded import SharedStores


class KuzuStoreDriver(KuzuDriver):
    """KuzuDriver with a bounded mmap reservation and the ``_database`` fix (issue 1258).

    Mirrors ``KuzuDriver.__init__`` of graphiti-core 0.31.1, except that the
    ``kuzu.Database`` gets ``max_db_size``/``buffer_pool_size``: with the 8 TB default,
    a process cannot open more than a handful of databases.
    """

    def __init__(self, path: str, *, max_db_size: int, buffer_pool_size: int) -> None:
        GraphDriver.__init__(self)
        self.db = kuzu.Database(
            path, max_db_size=max_db_size, buffer_pool_size=buffer_pool_size
        )
        self.setup_schema()
        self.client = kuzu.AsyncConnection(self.db, max_concurrent_queries=1)
        _init_ops(self)
        # add_episode(group_id=...) reads driver._database, which KuzuDriver never sets.
        self._database = ""

    def release(self) -> None:
        try:
            self.client.close()
        finally:
            self.db.close()


def _init_ops(driver: KuzuDriver) -> None:
    """The operation objects upstream ``KuzuDriver.__init__`` wires (0.31.1)."""
    from graphiti_core.driver.kuzu.operations.community_edge_ops import (
        KuzuCommunityEdgeOperations,
    )
    from graphiti_core.driver.kuzu.operations.community_node_ops import (
        KuzuCommunityNodeOperations,
    )
    from graphiti_core.driver.kuzu.operations.entity_edge_ops import KuzuEntityEdgeOperations
    from graphiti_core.driver.kuzu.operations.entity_node_ops import KuzuEntityNodeOperations
    from graphiti_core.driver.kuzu.operations.episode_node_ops import (
        KuzuEpisodeNodeOperations,
    )
    from graphiti_core.driver.kuzu.operations.episodic_edge_ops import (
        KuzuEpisodicEdgeOperations,
    )
    from graphiti_core.driver.kuzu.operations.graph_ops import KuzuGraphMaintenanceOperations
    from graphiti_core.driver.kuzu.operations.has_episode_edge_ops import (
        KuzuHasEpisodeEdgeOperations,
    )
    from graphiti_core.driver.kuzu.operations.next_episode_edge_ops import (
        KuzuNextEpisodeEdgeOperations,
    )
    from graphiti_core.driver.kuzu.operations.saga_node_ops import KuzuSagaNodeOperations
    from graphiti_core.driver.kuzu.operations.search_ops import KuzuSearchOperations

    driver._entity_node_ops = KuzuEntityNodeOperations()
    driver._episode_node_ops = KuzuEpisodeNodeOperations()
    driver._community_node_ops = KuzuCommunityNodeOperations()
    driver._saga_node_ops = KuzuSagaNodeOperations()
    driver._entity_edge_ops = KuzuEntityEdgeOperations()
    driver._episodic_edge_ops = KuzuEpisodicEdgeOperations()
    driver._community_edge_ops = KuzuCommunityEdgeOperations()
    driver._has_episode_edge_ops = KuzuHasEpisodeEdgeOperations()
    driver._next_episode_edge_ops = KuzuNextEpisodeEdgeOperations()
    driver._search_ops = KuzuSearchOperations()
    driver._graph_ops = KuzuGraphMaintenanceOperations()


KUZU: SharedStores[KuzuStoreDriver] = SharedStores(close=lambda driver: driver.release())


def acquire(path: Path, settings: DatabaseSettings) -> KuzuStoreDriver:
    """The process-wide driver for the Kuzu database at ``path`` (opened on first use):
    Kuzu allows one read-write Database per path per process."""

    def open_(key: str) -> KuzuStoreDriver:
        Path(key).parent.mkdir(parents=True, exist_ok=True)
        return KuzuStoreDriver(key, max_db_size=settings.max_db_size_gb << 30,
                               buffer_pool_size=settings.buffer_pool_mb << 20)

    return KUZU.acquire(path, open_)


def release(path: Path) -> None:
    KUZU.release(path)


async def ensure_indexes(driver: KuzuStoreDriver, path: Path) -> None:
    """Graphiti's full-text index queries for Kuzu, once per open database."""
    state = KUZU.state(path)
    if state.get("indexed"):
        return
    for query in get_fulltext_indices(GraphProvider.KUZU):
        try:
            await driver.execute_query(query)
        except RuntimeError as exc:
            if "already exists" not in str(exc):
                raise
    state["indexed"] = True
