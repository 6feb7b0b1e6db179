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

    Only where SQLite then still syncs every commit (``synchronous`` FULL for a connection
    that opens the file, as mem0's and qdrant-client's do: they set nothing): a build whose
    WAL default is NORMAL gets its rollback journal back. A file another connection is
    writing at that moment keeps its mode: this is a speed setting, never a reason to
    fail."""
    for path in paths:
        try:
            if _set_mode(path, "WAL") == "wal" and _synchronous(path) < FULL:
                _set_mode(path, "DELETE")
                logger.debug("{} keeps its rollback journal: this SQLite's WAL mode would "
                             "not sync every commit", path)
        except sqlite3.Error as exc:
            logger.debug("{} stays in its journal mode: {}", path, exc)


#: ``PRAGMA synchronous`` FULL: every commit is synced before it returns.
FULL = 2


def _set_mode(path: Path, mode: str) -> str:
    db = sqlite3.connect(path, timeout=1.0)
    try:
        return str(db.execute(f"PRAGMA journal_mode={mode}").fetchone()[0])
    finally:
        db.close()


def _synchronous(path: Path) -> int:
    """What a new connection to ``path`` syncs with (SQLite's default for its mode)."""
    db = sqlite3.connect(path, timeout=1.0)
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens it in its mode
        return int(db.execute("PRAGMA synchronous").fetchone()[0])
    finally:
        db.close()


def qdrant_storage_files(qdrant_path: Path) -> list[Path]:
    """The local Qdrant's storage files under ``qdrant_path`` (its collections so far)."""
    return sorted(qdrant_path.glob(QDRANT_STORAGE_GLOB))
