"""What turns showed about each session, kept on disk: who may read it.

"Unknown means shared" needs memory: a cron turn carries no channel metadata, and a
restarted gateway has seen nobody. Each turn's ``people.Observation`` is merged into the
session's ``ChatFacts`` in one SQLite row (``<data_dir>/nanobot-chats.sqlite3``, WAL), in
one transaction, so two processes (a gateway and a ``nanobot agent -m``) add to the same
facts and a flag once seen is never lost. Facts only grow towards "shared": a second
person or a group flag, once seen, stays.

A book that cannot be read or written answers "nothing known" (so: shared) and says why
once in the log; privacy fails closed, the turn still gets its reply.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import OrderedDict
from pathlib import Path

from nanobot_memory_adapters.logs import logger
from nanobot_memory_adapters.nanobot.people import ChatFacts, Observation
from nanobot_memory_adapters.nanobot.state import LOG

CHATS_FILE = "nanobot-chats.sqlite3"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS chat (
    session_key TEXT PRIMARY KEY,
    direct INTEGER NOT NULL DEFAULT 0,
    shared INTEGER NOT NULL DEFAULT 0,
    person TEXT,
    canonical TEXT,
    updated_at REAL NOT NULL
)
"""
_CACHED = 4096


class ChatBook:
    """Sessions' facts: read from disk on every observation (another process may have
    added to them), cached for the synchronous prompt build of the same turn."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._cache: OrderedDict[str, ChatFacts] = OrderedDict()
        self._warned = False

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            assert self.path is not None
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(self.path), timeout=5.0, check_same_thread=False,
                                 isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute(_SCHEMA)
            self._db = db
        return self._db

    def _failed(self, exc: BaseException) -> None:
        if not self._warned:
            self._warned = True
            logger.warning("{}: the chat book {} cannot be used ({}); every chat counts as "
                           "shared until it can", LOG, self.path, exc)

    def observe(self, session_key: str, seen: Observation) -> ChatFacts:
        """Merge what this turn shows into the session's facts; the merged facts. Blocking
        (SQLite): call it from a thread."""
        if self.path is None:
            return self._remember(session_key, self.cached(session_key).merged(seen))
        with self._lock:
            try:
                db = self._conn()
                db.execute("BEGIN IMMEDIATE")
                try:
                    row = db.execute("SELECT direct, shared, person, canonical FROM chat "
                                     "WHERE session_key=?", (session_key,)).fetchone()
                    known = ChatFacts(bool(row[0]), bool(row[1]), row[2], row[3]) if row \
                        else ChatFacts()
                    facts = known.merged(seen)
                    if facts != known:
                        db.execute("INSERT OR REPLACE INTO chat VALUES (?,?,?,?,?,?)",
                                   (session_key, int(facts.direct), int(facts.shared),
                                    facts.person, facts.canonical, time.time()))
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
            except (sqlite3.Error, OSError) as exc:
                self._failed(exc)
                facts = ChatFacts(shared=True)
        return self._remember(session_key, facts)

    def recorded(self, session_key: str) -> ChatFacts | None:
        """What live turns showed about a session, read from disk without adding to it
        (a backfill: a session its live turns showed to be shared is never one
        sender's); None when nothing is recorded. Blocking (SQLite)."""
        if self.path is None or not self.path.is_file():
            return None
        with self._lock:
            try:
                row = self._conn().execute(
                    "SELECT direct, shared, person, canonical FROM chat WHERE session_key=?",
                    (session_key,)).fetchone()
            except (sqlite3.Error, OSError) as exc:
                self._failed(exc)
                return ChatFacts(shared=True)  # unreadable: unknown means shared
        return ChatFacts(bool(row[0]), bool(row[1]), row[2], row[3]) if row else None

    def cached(self, session_key: str) -> ChatFacts:
        """The facts the last observation of this process found (no I/O): nothing known
        when the session was not observed here."""
        return self._cache.get(session_key, ChatFacts())

    def _remember(self, session_key: str, facts: ChatFacts) -> ChatFacts:
        self._cache[session_key] = facts
        self._cache.move_to_end(session_key)
        while len(self._cache) > _CACHED:
            self._cache.popitem(last=False)
        return facts

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
