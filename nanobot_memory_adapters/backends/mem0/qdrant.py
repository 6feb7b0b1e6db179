"""mem0's vector store here: Qdrant's local mode, one client per path per process.

Qdrant's local mode allows one client per path and process, and is not thread-safe while
mem0 calls it from worker threads (``asyncio.to_thread``, ``gather`` inside
``delete_all``): adapters on the same path share one client (``embedded.SharedStores``)
whose engine is called one call at a time.

A collection reopened from disk gets its vectors as the write path keeps them
(``vectors_as_written``): qdrant-client's local mode (1.20) loads a cosine collection's
raw vectors as float64, not float32 and unit length as ``upsert`` stores them
(qdrant/qdrant-client PR #1381, open). A search normalizes them again, in float64, so
after a restart the memories stored before it score a few 1e-8 off what they scored
before: enough to swap two equal memories (the same text in two sessions) at the edge
of the top k. A bench killed and resumed gave another metrics hash than the
uninterrupted run in 5 of 8 kills before this, 3 of 8 after (those a replayed session's
new ids explain, docs/harness.md).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from nanobot_memory_adapters.embedded import SharedStores


class _Serialized:
    """Forwards to the local Qdrant engine one call at a time (a shared lock)."""

    def __init__(self, target: Any, lock: threading.RLock) -> None:
        self._target = target
        self._lock = lock

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return locked


def _open(key: str) -> Any:
    from qdrant_client import QdrantClient

    Path(key).mkdir(parents=True, exist_ok=True)
    try:
        client = QdrantClient(path=key)
    except RuntimeError as exc:
        raise RuntimeError(
            f"{exc} — another process holds {key}; Qdrant local mode allows one "
            "process per path (stop it, or give this one another mem0 path)"
        ) from exc
    vectors_as_written(client._client)
    client._client = _Serialized(  # pyright: ignore[reportAttributeAccessIssue]
        client._client, threading.RLock()
    )
    return client


def vectors_as_written(local: Any) -> None:
    """Give each cosine collection of a local Qdrant engine, as loaded from disk, the
    vectors ``upsert`` would have stored: float32, divided by their norm as
    ``LocalCollection._add_point`` does, row by row so every bit matches. A collection
    already float32 (nothing loaded, or a qdrant-client that fixed its load) is left as
    it is."""
    import numpy as np
    from qdrant_client import models
    from qdrant_client.local.local_collection import EPSILON

    for collection in getattr(local, "collections", {}).values():
        for name, vectors in list(collection.vectors.items()):
            if (vectors.dtype == np.float32
                    or collection.get_vector_params(name).distance != models.Distance.COSINE):
                continue
            deleted = collection.deleted_per_vector.get(name)
            out = np.empty(vectors.shape, dtype=np.float32)
            for index, row in enumerate(vectors):
                vector = np.array(row, dtype=np.float32)
                if deleted is None or not deleted[index]:  # a missing vector stays ones
                    norm = np.linalg.norm(vector)
                    vector = vector / norm if norm > EPSILON else vector
                out[index] = vector
            collection.vectors[name] = out


QDRANT: SharedStores[Any] = SharedStores(close=lambda client: client.close())


def acquire_client(path: Path) -> Any:
    """The process-wide QdrantClient for ``path`` (opened on first use)."""
    return QDRANT.acquire(path, _open)


def release_client(path: Path) -> None:
    QDRANT.release(path)
