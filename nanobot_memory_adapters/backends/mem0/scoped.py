"""One mem0 collection per scope: a person's search costs what that person stored.

Qdrant's local mode keeps no payload index: a filtered search checks the filter on every
point of the collection in Python, so with one collection for everyone each person's
search paid for every other user's turns. Each scope (``user_id``, ``run_id`` and, when
agent-scoped, ``agent_id``) therefore gets a collection of its own, named from the
configured ``collection_name`` and a digest of the scope's ids, through mem0's own
configuration: an ``AsyncMemory`` per scope whose ``vector_store.collection_name`` is the
scope's, sharing the store's embedder, LLM, reranker and history DB with the store's base
``AsyncMemory`` (``copy.copy``: mem0 builds nothing twice). mem0 still does every add,
search, delete and listing itself, filters included.

A store written by an earlier version (every scope in the one configured collection) is
moved once, when it is opened (``move_shared``): each point is copied, vector and payload
as they are, into its scope's collection and then deleted from the shared one, a batch at
a time (copied before deleted, so a process killed half-way copies the rest next time;
copying a point again writes the same point). Points without the ids of a scope stay where
they were (no search of the adapter's could reach them before either).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from typing import Any

from nanobot_memory_adapters.logs import logger

#: Points copied per batch when a shared collection is moved.
MOVE_BATCH = 256


def scope_collection(base: str, ids: dict[str, str]) -> str:
    """The collection of one scope: the configured name and a digest of its ids (ids may
    hold any character; a collection name is a folder name in local mode)."""
    digest = hashlib.sha256(json.dumps(sorted(ids.items())).encode()).hexdigest()[:24]
    return f"{base}__{digest}"


def is_scope_collection(base: str, name: str) -> bool:
    return name.startswith(f"{base}__") and not name.endswith("_entities")


def scoped_memory(base: Any, collection: str,
                  filter_keys: tuple[str, ...] = ("user_id", "run_id")) -> Any:
    """``base`` (an ``AsyncMemory``) with its vector store on ``collection``: mem0's own
    Qdrant store, built from mem0's config with that collection name (mem0 creates the
    collection if it is new); every other part is the base's own object."""
    from mem0.utils.factory import VectorStoreFactory

    native = base.config.vector_store.config
    shared = ({"connection_pool": base.vector_store.connection_pool}  # pgvector: one pool
              if hasattr(base.vector_store, "connection_pool")
              else {"client": base.vector_store.client})  # qdrant: one client
    config = {**native.model_dump(), "collection_name": collection, **shared}
    memory = copy.copy(base)
    memory.config = base.config.model_copy(deep=False)
    memory.config.vector_store = base.config.vector_store.model_copy(
        update={"config": type(native)(**config)})
    memory.vector_store = VectorStoreFactory.create(
        base.config.vector_store.provider, memory.config.vector_store.config)
    memory.collection_name = collection
    memory._entity_store = None  # mem0 makes the scope's entity collection when it needs one
    if hasattr(memory.vector_store, "connection_pool"):
        scope_statistics(memory.vector_store, list(filter_keys))
    return memory


def scope_statistics(store: Any, keys: list[str]) -> None:
    """pgvector: Postgres statistics on the payload fields mem0 filters a scope's table by.

    mem0's search is ``WHERE payload->>'user_id' = .. AND payload->>'run_id' = ..
    ORDER BY distance LIMIT k``. Without statistics Postgres guesses such a filter keeps
    0.5 % of 0.5 % of the rows, expects one row, and scans the whole table instead of
    walking the HNSW index (8,084 turns: 61 ms, growing with the table). In a table of
    one scope every row passes; with extended statistics on the two expressions
    (collected by autovacuum's ANALYZE as rows arrive) the planner knows it and uses the
    index. The table is mem0's (``create_col``, idempotent), the search mem0's own."""
    from psycopg import sql  # pyright: ignore[reportMissingImports]

    store.create_col()
    name = sql.Identifier(f"{store.collection_name}_scope_stats"[:63])
    exprs = sql.SQL(", ").join(sql.SQL("(payload->>{})").format(sql.Literal(k)) for k in keys)
    with store.connection_pool.connection() as conn:
        conn.execute(sql.SQL("CREATE STATISTICS IF NOT EXISTS {} ON {} FROM {}").format(
            name, exprs, sql.Identifier(store.collection_name)))


def with_pg_options(connection_string: str, ef_search: int) -> str:
    """The connection string with pgvector's search settings for every session: HNSW's
    candidate list, and iterative scans in strict order (pgvector 0.8), so a search whose
    ``LIMIT`` exceeds ``ef_search`` still returns that many rows, in distance order."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo  # pyright: ignore[reportMissingImports]

    params = conninfo_to_dict(connection_string)
    options = " ".join(filter(None, [str(params.get("options") or ""),
                                     f"-c hnsw.ef_search={ef_search}",
                                     "-c hnsw.iterative_scan=strict_order"]))
    return make_conninfo(connection_string, options=options)


def move_shared(base: Any, target: Callable[[dict[str, Any]], Any | None]) -> int:
    """Move the points of ``base``'s collection (and its entity collection) into their
    scopes' collections; ``target(payload)`` is the scope's ``AsyncMemory`` for a point,
    or None for one that names no scope. Returns the number of points moved."""
    from qdrant_client import models

    client = base.vector_store.client
    existing = {c.name for c in client.get_collections().collections}
    moved = 0
    for entities in (False, True):
        source = f"{base.collection_name}_entities" if entities else base.collection_name
        if source not in existing or not client.count(source, exact=True).count:
            continue
        offset: Any = None
        while True:
            points, offset = client.scroll(source, limit=MOVE_BATCH, offset=offset,
                                           with_payload=True, with_vectors=True)
            groups: dict[str, list[Any]] = {}
            for point in points:
                memory = target(point.payload or {})
                if memory is None:
                    continue
                store = memory.entity_store if entities else memory.vector_store
                groups.setdefault(store.collection_name, []).append(point)
            for collection, group in groups.items():
                client.upsert(collection, points=[
                    models.PointStruct(id=p.id, vector=p.vector, payload=p.payload)
                    for p in group])
                client.delete(source, points_selector=models.PointIdsList(
                    points=[p.id for p in group]))
                moved += len(group)
            if offset is None:
                break
    if moved:
        logger.info(f"mem0: moved {moved} points of collection {base.collection_name!r} "
                    "into one collection per scope")
    return moved
