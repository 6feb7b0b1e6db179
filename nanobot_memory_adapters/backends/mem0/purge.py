"""What mem0's ``delete_all`` leaves of a scope in its SQLite history DB, removed on reset.

mem0 (2.2) keeps two things outside the vector store: the ``history`` table (every
ADD/UPDATE/DELETE of a memory, with its text) and, with ``infer=True``, the ``messages``
table: the scope's last 10 raw messages, which mem0 feeds to the next extraction in that
scope as context. A forgotten PIN left there is sent to the model by the next turn's
extraction, which writes it back. mem0 has no per-scope purge (only ``reset()``, every
scope), so a reset finishes the job here, through mem0's own ``SQLiteManager`` connection
and lock, with the scope key mem0 itself builds (``_build_session_scope``): nothing of
mem0's extraction or search is re-implemented, only rows it keeps are deleted.

If mem0's storage is not of the known shape (another mem0 version), nothing is deleted and
the caller says what stays.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MESSAGES_TABLE = "messages"
HISTORY_TABLE = "history"


def session_scope(ids: dict[str, str]) -> str | None:
    """mem0's own key of a scope's recent messages, or None if mem0 has no such helper."""
    try:
        from mem0.memory.main import _build_session_scope  # pyright: ignore[reportPrivateUsage]
    except ImportError:
        return None
    return _build_session_scope(ids)


def memory_ids(memory: Any, ids: dict[str, str], limit: int = 1_000_000) -> list[str]:
    """Every memory id of the scope, listed by mem0's own vector store (before a
    ``delete_all``; blocking)."""
    listed = memory.vector_store.list(filters=dict(ids), top_k=limit)
    rows = listed[0] if listed and isinstance(listed[0], list) else (listed or [])
    return [str(row.id) for row in rows]


def purge(memory: Any, ids: dict[str, str], memory_ids: Iterable[str]) -> str | None:
    """Delete the scope's recent raw messages and the history rows of its (deleted)
    memories from mem0's SQLite DB (blocking). None when done; else what stays and why."""
    db = getattr(memory, "db", None)
    connection = getattr(db, "connection", None)
    lock = getattr(db, "_lock", None)
    scope_key = session_scope(ids)
    if connection is None or lock is None or scope_key is None:
        return "this mem0 version's history DB is not of the known shape; nothing was purged"
    with lock:
        tables = {row[0] for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")}
        try:
            connection.execute("BEGIN")
            if MESSAGES_TABLE in tables:
                connection.execute(f"DELETE FROM {MESSAGES_TABLE} WHERE session_scope = ?",
                                   (scope_key,))
            ids_list = list(memory_ids)
            if HISTORY_TABLE in tables:
                for start in range(0, len(ids_list), 500):
                    chunk = ids_list[start:start + 500]
                    marks = ",".join("?" * len(chunk))
                    connection.execute(
                        f"DELETE FROM {HISTORY_TABLE} WHERE memory_id IN ({marks})", chunk)
            connection.execute("COMMIT")
        except Exception:
            connection.execute("ROLLBACK")
            raise
    return None
