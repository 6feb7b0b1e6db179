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

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
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
"""


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
    def enqueue(self, provider: str, event: MemoryEvent, session_key: str) -> bool:
        """Append ``event``; False when this provider already has that ``event_id``."""
        with self._lock:
            cur = self._conn().execute(
                "INSERT OR IGNORE INTO outbox (provider, event_id, session_key, payload, "
                "enqueued_at) VALUES (?,?,?,?,?)",
                (provider, event.event_id, session_key, event.model_dump_json(), time.time()),
            )
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
