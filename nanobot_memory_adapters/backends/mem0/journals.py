"""mem0's two SQLite files (its history, and the local Qdrant's point storage) in WAL mode.

Both commit once per stored message on mem0's ``add(infer=False)`` path; in SQLite's default
rollback-journal mode each commit syncs the journal and the database (three syncs), in WAL
mode it appends to the log and syncs that once, with the same durability (``synchronous``
stays FULL, a commit is on disk when it returns). The mode lives in the file itself, so it
is set once with a connection of our own; mem0 and qdrant-client open their files as
before and read the mode from the file. Nothing is changed in what they store."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from nanobot_memory_adapters.logs import logger

#: The local Qdrant keeps each collection's points in ``collection/NAME/storage.sqlite``.
QDRANT_STORAGE_GLOB = "collection/*/storage.sqlite"


def use_wal(paths: Iterable[Path]) -> None:
    """Put each SQLite file in WAL mode (creating an empty one where none exists yet).

    A file another connection is writing at that moment keeps its mode: this is a speed
    setting, never a reason to fail."""
    for path in paths:
        try:
            db = sqlite3.connect(path, timeout=1.0)
            try:
                db.execute("PRAGMA journal_mode=WAL")
            finally:
                db.close()
        except sqlite3.Error as exc:
            logger.debug("{} stays in its journal mode: {}", path, exc)


def qdrant_storage_files(qdrant_path: Path) -> list[Path]:
    """The local Qdrant's storage files under ``qdrant_path`` (its collections so far)."""
    return sorted(qdrant_path.glob(QDRANT_STORAGE_GLOB))
