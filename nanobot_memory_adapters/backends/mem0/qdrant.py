"""mem0's vector store here: Qdrant's local mode, one client per path per process.

Qdrant's local mode allows one client per path and process, and is not thread-safe while
mem0 calls it from worker threads (``asyncio.to_thread``, ``gather`` inside
``delete_all``): adapters on the same path share one client (``embedded.SharedStores``)
whose engine is called one call at a time.
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
    client._client = _Serialized(  # pyright: ignore[reportAttributeAccessIssue]
        client._client, threading.RLock()
    )
    return client


QDRANT: SharedStores[Any] = SharedStores(close=lambda client: client.close())


def acquire_client(path: Path) -> Any:
    """The process-wide QdrantClient for ``path`` (opened on first use)."""
    return QDRANT.acquire(path, _open)


def release_client(path: Path) -> None:
    QDRANT.release(path)
