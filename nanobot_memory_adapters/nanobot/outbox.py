"""A durable outbox: every turn is written here first, then delivered to the backend.

Rows are appended in turn order and delivered in that order, per provider. A row stays
``pending`` until the backend accepts it (committed / queued / pending / ignored); a
retryable failure leaves it pending for the next pass; a non-retryable one parks it as
``failed`` with the backend's diagnostics (kept, never dropped). Delivered rows are kept
(the newest ``keep_delivered``) so re-enqueueing the same ``event_id`` is a no-op: replays
are idempotent on our side; backends that honour ``event_id`` make them idempotent on
theirs. Older delivered rows are pruned in batches, not on every delivery: at the first
delivery after opening, then every ``prune_every`` deliveries (a tenth of
``keep_delivered``, at most 1000), in the same transaction as that delivery.

SQLite in WAL mode with ``synchronous=FULL``: an enqueued event survives a process crash
or power loss. Only one process drains at a time (an advisory file lock held per pass).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:  # POSIX advisory locks; elsewhere a single process is assumed
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

from nanobot_memory_adapters.events import MemoryEvent

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    provider TEXT NOT NULL,
    event_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    payload TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    enqueued_at REAL NOT NULL,
    last_attempt_at REAL,
    delivered_at REAL,
    receipt_status TEXT,
    native_ids TEXT,
    latency_ms REAL,
    last_error TEXT,
    UNIQUE (provider, event_id)
);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (provider, status, seq);
CREATE TABLE IF NOT EXISTS session_identity (
    session_key TEXT PRIMARY KEY,
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    sender_id TEXT,
    seen_at REAL NOT NULL
);
"""


_REMEMBER_IDENTITY = (
    "INSERT INTO session_identity VALUES (?,?,?,?,?) ON CONFLICT(session_key) DO "
    "UPDATE SET channel=excluded.channel, chat_id=excluded.chat_id, "
    "sender_id=excluded.sender_id, seen_at=excluded.seen_at"
)


@dataclass(frozen=True)
class OutboxRow:
    seq: int
    provider: str
    event_id: str
    session_key: str
    payload: str
    attempts: int
    enqueued_at: float

    def event(self) -> MemoryEvent:
        return MemoryEvent.model_validate_json(self.payload)


@dataclass(frozen=True)
class OutboxStats:
    pending: int
    pending_other_providers: int
    failed: int
    delivered: int
    oldest_pending_at: float | None
    last_error: str | None
    last_failed_error: str | None = None


class Outbox:
    def __init__(self, path: str | Path, *, keep_delivered: int = 10000) -> None:
        self.path = Path(path)
        self.keep_delivered = keep_delivered
        self.prune_every = max(1, min(1000, keep_delivered // 10))
        self._since_prune = self.prune_every  # the first delivery after opening prunes
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    # -- connection ------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None,
                                 timeout=30.0)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA busy_timeout=30000")  # another process's write: wait
            db.executescript(_SCHEMA)
            self._db = db
        return self._db

    def _exec(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn().execute(sql, args).fetchall()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- writes ----------------------------------------------------------------------
    def enqueue(self, provider: str, event: MemoryEvent, session_key: str,
                identity: tuple[str, str, str | None] | None = None) -> bool:
        """Append ``event``; False when this provider already has that ``event_id``.
        ``identity`` (channel, chat id, sender id) is remembered for the session in the
        same transaction: nanobot's session files do not say who spoke, and a later
        backfill maps the session's turns to the same scope as the live ones."""
        with self._lock:
            db = self._conn()
            db.execute("BEGIN IMMEDIATE")
            try:
                cur = db.execute(
                    "INSERT OR IGNORE INTO outbox (provider, event_id, session_key, payload, "
                    "enqueued_at) VALUES (?,?,?,?,?)",
                    (provider, event.event_id, session_key, event.model_dump_json(),
                     time.time()),
                )
                if identity is not None:
                    db.execute(_REMEMBER_IDENTITY, (session_key, *identity, time.time()))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return cur.rowcount == 1

    def mark_delivered(
        self, seq: int, *, status: str, native_ids: list[str], latency_ms: float | None
    ) -> None:
        now = time.time()
        with self._lock:
            db = self._conn()
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    "UPDATE outbox SET status='delivered', delivered_at=?, last_attempt_at=?, "
                    "attempts=attempts+1, receipt_status=?, native_ids=?, latency_ms=?, "
                    "last_error=NULL WHERE seq=?",
                    (now, now, status, json.dumps(native_ids), latency_ms, seq),
                )
                self._since_prune += 1
                if self.keep_delivered > 0 and self._since_prune >= self.prune_every:
                    self._prune(db)
                    self._since_prune = 0
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def mark_retry(self, seq: int, error: str) -> None:
        self._exec(
            "UPDATE outbox SET attempts=attempts+1, last_attempt_at=?, last_error=? WHERE seq=?",
            (time.time(), error[:4000], seq),
        )

    def mark_failed(self, seq: int, error: str) -> None:
        self._exec(
            "UPDATE outbox SET status='failed', attempts=attempts+1, last_attempt_at=?, "
            "last_error=? WHERE seq=?",
            (time.time(), error[:4000], seq),
        )

    def requeue_failed(self, provider: str) -> int:
        with self._lock:
            cur = self._conn().execute(
                "UPDATE outbox SET status='pending' WHERE provider=? AND status='failed'",
                (provider,),
            )
            return cur.rowcount

    def identity(self, session_key: str) -> tuple[str, str, str | None] | None:
        rows = self._exec("SELECT channel, chat_id, sender_id FROM session_identity "
                          "WHERE session_key=?", (session_key,))
        return (rows[0][0], rows[0][1], rows[0][2]) if rows else None

    def turn_times(self, provider: str, session_key: str) -> set[str]:
        """The times of the turns of a session this provider's rows hold (ISO, UTC)."""
        rows = self._exec("SELECT payload FROM outbox WHERE provider=? AND session_key=?",
                          (provider, session_key))
        return {MemoryEvent.model_validate_json(p).timestamp.isoformat() for (p,) in rows}

    def forget_scope(self, scope_key: str) -> list[MemoryEvent]:
        """Delete every row (any provider, any status) whose event belongs to
        ``scope_key``: a forgotten scope's turns are neither delivered later nor kept
        here. Returns the deleted events."""
        with self._lock:
            db = self._conn()
            db.execute("BEGIN IMMEDIATE")
            try:
                gone: list[tuple[int, MemoryEvent]] = []
                for seq, payload in db.execute("SELECT seq, payload FROM outbox").fetchall():
                    event = MemoryEvent.model_validate_json(payload)
                    if event.scope().key == scope_key:
                        gone.append((seq, event))
                db.executemany("DELETE FROM outbox WHERE seq=?", [(seq,) for seq, _ in gone])
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return [event for _, event in gone]

    def _prune(self, db: sqlite3.Connection) -> None:
        """Delete all but the newest ``keep_delivered`` delivered rows (a full-table scan)."""
        db.execute(
            "DELETE FROM outbox WHERE status='delivered' AND seq NOT IN ("
            "SELECT seq FROM outbox WHERE status='delivered' ORDER BY seq DESC LIMIT ?)",
            (self.keep_delivered,),
        )

    # -- reads -----------------------------------------------------------------------
    def pending(self, provider: str, limit: int = 50) -> list[OutboxRow]:
        rows = self._exec(
            "SELECT seq, provider, event_id, session_key, payload, attempts, enqueued_at "
            "FROM outbox "
            "WHERE provider=? AND status='pending' ORDER BY seq LIMIT ?",
            (provider, limit),
        )
        return [OutboxRow(*r) for r in rows]

    def rows(self, provider: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT * FROM outbox" + (" WHERE provider=?" if provider else "") + " ORDER BY seq"
        with self._lock:
            cur = self._conn().execute(sql, (provider,) if provider else ())
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def stats(self, provider: str) -> OutboxStats:
        counts = dict(
            self._exec(
                "SELECT status, count(*) FROM outbox WHERE provider=? GROUP BY status",
                (provider,),
            )
        )
        other = self._exec(
            "SELECT count(*) FROM outbox WHERE provider<>? AND status='pending'", (provider,)
        )[0][0]
        oldest = self._exec(
            "SELECT min(enqueued_at) FROM outbox WHERE provider=? AND status='pending'",
            (provider,),
        )[0][0]
        error = self._exec(
            "SELECT last_error FROM outbox WHERE provider=? AND last_error IS NOT NULL "
            "ORDER BY last_attempt_at DESC LIMIT 1",
            (provider,),
        )
        failed_error = self._exec(
            "SELECT last_error FROM outbox WHERE provider=? AND status='failed' "
            "ORDER BY last_attempt_at DESC LIMIT 1",
            (provider,),
        )
        return OutboxStats(
            pending=counts.get("pending", 0),
            pending_other_providers=other,
            failed=counts.get("failed", 0),
            delivered=counts.get("delivered", 0),
            oldest_pending_at=oldest,
            last_error=error[0][0] if error else None,
            last_failed_error=failed_error[0][0] if failed_error else None,
        )

    # -- one drainer across processes ------------------------------------------------
    @contextlib.contextmanager
    def drain_lock(self) -> Iterator[bool]:
        """Yields True when this process may drain now (non-blocking)."""
        if fcntl is None:
            yield True
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(str(self.path) + ".drain.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    @contextlib.asynccontextmanager
    async def drain_lock_waiting(self, wait_s: float = 30.0) -> AsyncIterator[bool]:
        """The drain lock, waited for up to ``wait_s`` (polled, so the loop keeps running):
        yields True once no other process is delivering, False if one still is. For
        writes that must not interleave with another process's delivery (forget, a CLI
        backfill)."""
        deadline = time.monotonic() + wait_s
        while True:
            with self.drain_lock() as mine:
                if mine or time.monotonic() >= deadline:
                    yield mine
                    return
            await asyncio.sleep(0.2)
