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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

try:  # POSIX advisory locks; elsewhere a single process is assumed
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

from nanobot_memory_adapters.events import MemoryEvent
from nanobot_memory_adapters.scope import MemoryScope

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

# The forget/backfill ledger (``forget.py``, ``backfill.py``): facts about turns that must
# outlive the rows above, which are pruned (``keep_delivered``) and deleted by forget.
# Kept by triggers, so every writer of the outbox keeps it without knowing of it:
# - ``delivered_turn``: which provider holds which session's turn (the time of its first
#   message, the event's run and user ids): backfill's "already there", whatever was
#   pruned; forget's "which providers hold this scope".
# - ``turn_sender``: who spoke in a live turn, per turn (nanobot's session files do not
#   say; in a group chat the session's last sender is not every turn's sender).
# - ``forgotten_scope``: scopes forgotten and when; backfill does not bring them back.
# The two INSERTs at the end carry an older outbox's rows over (idempotent).
_LEDGER_SCHEMA = """
CREATE TABLE IF NOT EXISTS delivered_turn (
    provider TEXT NOT NULL,
    session_key TEXT NOT NULL,
    turn_at TEXT NOT NULL,
    run_id TEXT NOT NULL,
    persona_id TEXT NOT NULL,
    PRIMARY KEY (provider, session_key, turn_at)
);
CREATE TABLE IF NOT EXISTS turn_sender (
    session_key TEXT NOT NULL,
    turn_at TEXT NOT NULL,
    channel TEXT,
    chat_id TEXT,
    sender_id TEXT,
    PRIMARY KEY (session_key, turn_at)
);
CREATE TABLE IF NOT EXISTS forgotten_scope (
    scope_key TEXT PRIMARY KEY,
    forgotten_at REAL NOT NULL
);
CREATE TRIGGER IF NOT EXISTS ledger_delivered AFTER UPDATE OF status ON outbox
WHEN NEW.status = 'delivered' BEGIN
    INSERT OR IGNORE INTO delivered_turn VALUES (NEW.provider, NEW.session_key,
        json_extract(NEW.payload, '$.timestamp'), json_extract(NEW.payload, '$.run_id'),
        json_extract(NEW.payload, '$.user_id'));
END;
CREATE TRIGGER IF NOT EXISTS ledger_sender AFTER INSERT ON outbox
WHEN NEW.event_id NOT LIKE 'nb-bf-%' BEGIN
    INSERT OR REPLACE INTO turn_sender VALUES (NEW.session_key,
        json_extract(NEW.payload, '$.timestamp'),
        json_extract(NEW.payload, '$.metadata.channel'),
        json_extract(NEW.payload, '$.metadata.chat_id'),
        json_extract(NEW.payload, '$.metadata.sender_id'));
END;
INSERT OR IGNORE INTO delivered_turn SELECT provider, session_key,
    json_extract(payload, '$.timestamp'), json_extract(payload, '$.run_id'),
    json_extract(payload, '$.user_id') FROM outbox WHERE status = 'delivered';
INSERT OR IGNORE INTO turn_sender SELECT session_key, json_extract(payload, '$.timestamp'),
    json_extract(payload, '$.metadata.channel'), json_extract(payload, '$.metadata.chat_id'),
    json_extract(payload, '$.metadata.sender_id') FROM outbox
    WHERE event_id NOT LIKE 'nb-bf-%';
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
            db.executescript(_LEDGER_SCHEMA)
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

    # -- the forget/backfill ledger (_LEDGER_SCHEMA) ---------------------------------
    def delivered_turns(self, provider: str, session_key: str) -> set[str]:
        """Times (``turn_time``) of the session's turns this provider received, pruned
        rows included."""
        rows = self._exec("SELECT turn_at FROM delivered_turn WHERE provider=? AND "
                          "session_key=?", (provider, session_key))
        return {turn_time(at) for (at,) in rows if at}

    def queued_turns(self, provider: str, session_key: str) -> dict[str, str]:
        """Times of the session's turns with a row for this provider not delivered yet:
        time -> status (pending or failed)."""
        rows = self._exec("SELECT json_extract(payload, '$.timestamp'), status FROM outbox "
                          "WHERE provider=? AND session_key=? AND status<>'delivered'",
                          (provider, session_key))
        return {turn_time(at): status for at, status in rows if at}

    def turn_senders(self, session_key: str) -> dict[str, tuple[str, str, str | None]]:
        """Who spoke in each live turn of the session: time -> (channel, chat id, sender)."""
        rows = self._exec("SELECT turn_at, channel, chat_id, sender_id FROM turn_sender "
                          "WHERE session_key=?", (session_key,))
        return {turn_time(at): (channel or "unknown", chat_id or "", sender)
                for at, channel, chat_id, sender in rows if at}

    def holders(self, scope: MemoryScope) -> set[str]:
        """Providers the outbox shows holding the scope: a delivered turn (pruned or not)."""
        rows = self._exec("SELECT DISTINCT provider FROM delivered_turn WHERE run_id=? AND "
                          "persona_id=?", (scope.run_id, scope.persona_id))
        return {p for (p,) in rows}

    def known_scopes(self) -> list[str]:
        """Every scope key the outbox knows a turn of (queued or delivered)."""
        rows = self._exec("SELECT run_id, persona_id FROM delivered_turn UNION SELECT "
                          "json_extract(payload, '$.run_id'), json_extract(payload, "
                          "'$.user_id') FROM outbox")
        return sorted({MemoryScope(run_id=r, persona_id=p).key for r, p in rows if r and p})

    def forget_delivered(self, scope: MemoryScope, providers: set[str]) -> None:
        """A forgotten scope: these providers no longer hold its turns; the forget is
        remembered (``forgotten``), so a backfill does not bring the turns back."""
        with self._lock:
            db = self._conn()
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany("DELETE FROM delivered_turn WHERE provider=? AND run_id=? AND "
                               "persona_id=?",
                               [(p, scope.run_id, scope.persona_id) for p in providers])
                db.execute("INSERT OR REPLACE INTO forgotten_scope VALUES (?,?)",
                           (scope.key, time.time()))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def forgotten(self) -> dict[str, float]:
        """Forgotten scope keys -> when they were forgotten (epoch seconds)."""
        return dict(self._exec("SELECT scope_key, forgotten_at FROM forgotten_scope"))


def turn_time(stamp: str) -> str:
    """A turn's time as the ledger compares it: ISO, UTC (the payload's ``...Z`` form and
    ``MemoryEvent.timestamp.isoformat()`` agree)."""
    try:
        return datetime.fromisoformat(stamp).astimezone(UTC).isoformat()
    except ValueError:
        return stamp
