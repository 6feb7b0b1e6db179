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

A turn is opened when the user's message arrives (status ``open``, the user's words only,
``owner`` = the process id) and completed in place when nanobot persists the turn (the
same ``event_id``, now user + assistant, ``pending``): each turn is one row. An ``open``
row whose owner died (kill -9 while the model answered) is promoted to ``pending`` by the
next process and delivered as the user's message alone. ``open`` rows are never delivered
while their owner lives.

Writes on the reply path wait at most ``wait_s`` for SQLite's write lock; every failure
to open, read or write the file is one of ``OUTBOX_ERRORS``; ``describe_failure`` turns
it into the one line (the file and the remedy) that the CLI and the chat replies print.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import threading
import time
import urllib.parse
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
from nanobot_memory_adapters.processes import process_token, token_alive
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
#   say; in a group chat the session's last sender is not every turn's sender); a turn
#   queued on arrival and completed in place (or promoted after a crash) moves to the
#   time of the completed turn's first message, which is what backfill looks up.
# - ``forgotten_scope``: scopes forgotten and when; backfill does not bring them back.
# The two INSERTs at the end carry an older outbox's rows over (idempotent). A turn may be
# held under two scopes (``migrate-scopes`` copies it to its person's new scope), so the
# scope is part of ``delivered_turn``'s key; an older table without it is rebuilt
# (``_LEDGER_REKEY``), or forget would not see a provider holding the copy.
_DELIVERED_TURN = """
CREATE TABLE IF NOT EXISTS delivered_turn (
    provider TEXT NOT NULL,
    session_key TEXT NOT NULL,
    turn_at TEXT NOT NULL,
    run_id TEXT NOT NULL,
    persona_id TEXT NOT NULL,
    PRIMARY KEY (provider, session_key, turn_at, run_id, persona_id)
);
"""
_LEDGER_SCHEMA = _DELIVERED_TURN + """CREATE TABLE IF NOT EXISTS turn_sender (
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
CREATE TRIGGER IF NOT EXISTS ledger_sender_completed AFTER UPDATE OF payload ON outbox
WHEN NEW.event_id NOT LIKE 'nb-bf-%' BEGIN
    DELETE FROM turn_sender WHERE session_key = OLD.session_key
        AND turn_at = json_extract(OLD.payload, '$.timestamp');
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

_LEDGER_REKEY = """
BEGIN IMMEDIATE;
DROP TRIGGER IF EXISTS ledger_delivered;
ALTER TABLE delivered_turn RENAME TO delivered_turn_before_rekey;
""" + _DELIVERED_TURN + """
INSERT OR IGNORE INTO delivered_turn SELECT * FROM delivered_turn_before_rekey;
DROP TABLE delivered_turn_before_rekey;
COMMIT;
"""


OUTBOX_ERRORS = (sqlite3.Error, OSError)


def describe_failure(path: Path, exc: BaseException) -> str:
    """One line naming the outbox file, what is wrong and what to do about it."""
    text = str(exc) or type(exc).__name__
    low = text.lower()
    disk = _disk_state(path.parent)  # SQLite often says only "disk I/O error"
    if "locked" in low or "busy" in low:
        what = "another process holds its write lock"
        fix = ("it is retried; if this lasts, stop the process that holds it "
               f"(fuser {path})")
    elif "full" in low or "no space" in low or disk == "full":
        what = "the disk is full"
        fix = f"free space on the disk that holds {path.parent}"
    elif ("readonly" in low or "read-only" in low or "permission" in low
          or disk == "read-only"):
        what = "it cannot be written (read-only file or disk)"
        fix = f"make {path} and {path.parent} writable"
    elif path.is_dir():
        what = "it is a directory"
        fix = f"move {path} aside; the plugin then creates a new outbox"
    elif ("not a database" in low or "malformed" in low or "corrupt" in low
          or "no such table" in low):
        what = "it is damaged (not a readable SQLite database)"
        fix = (f"move it aside (mv {path} {path}.damaged) and run nanobot-memory backfill "
               "to requeue nanobot's saved turns")
    else:
        what = f"it cannot be used ({text[:200]})"
        fix = f"check {path} and its folder"
    return f"outbox {path}: {what}; {fix}"


def _disk_state(folder: Path) -> str | None:
    """"full", "read-only" or None for the filesystem holding ``folder``."""
    try:
        stat = os.statvfs(folder)
    except OSError:
        return None
    if stat.f_flag & os.ST_RDONLY:
        return "read-only"
    if stat.f_bavail * stat.f_frsize < 64 * 1024:  # less than SQLite needs for its WAL
        return "full"
    return None


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
    open: int = 0  # turns whose reply has not come yet (the user's half is kept)




def _forgotten_since(db: sqlite3.Connection, event: MemoryEvent) -> bool:
    """Whether ``event``'s scope was forgotten at or after the turn was said."""
    row = db.execute("SELECT forgotten_at FROM forgotten_scope WHERE scope_key=?",
                     (event.scope().key,)).fetchone()
    return row is not None and event.timestamp.timestamp() <= row[0]


class Outbox:
    def __init__(self, path: str | Path, *, keep_delivered: int = 10000,
                 read_only: bool = False) -> None:
        self.path = Path(path)
        self.keep_delivered = keep_delivered
        self.read_only = read_only  # open with mode=ro: never creates, migrates or writes
        self.prune_every = max(1, min(1000, keep_delivered // 10))
        self._since_prune = self.prune_every  # the first delivery after opening prunes
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    # -- connection ------------------------------------------------------------------
    def _conn(self, wait_s: float | None = None) -> sqlite3.Connection:
        """This process's connection, opened (and its schema made) on first use, waiting
        at most ``wait_s`` (None: 30 s) for another process's write lock while it does:
        ``CREATE ... IF NOT EXISTS`` takes the write lock even when nothing is missing."""
        if self._db is None:
            bound = 30.0 if wait_s is None else wait_s
            if self.read_only:
                # No WAL beside the file (no process has it open): read the file as it is,
                # creating nothing (immutable). Otherwise read through the live WAL.
                wal = Path(str(self.path) + "-wal")
                uri = ("file:" + urllib.parse.quote(str(self.path.resolve())) + "?mode=ro"
                       + ("" if wal.exists() else "&immutable=1"))
                db = sqlite3.connect(uri, uri=True, check_same_thread=False,
                                     isolation_level=None, timeout=5.0)
                db.execute("SELECT count(*) FROM outbox").fetchall()  # garbage fails here
                self._db = db
                return db
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None,
                                 timeout=bound)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=FULL")
                # another process's write: wait (the caller's bound while the schema is made)
                db.execute(f"PRAGMA busy_timeout={int(bound * 1000)}")
                db.executescript(_SCHEMA)
                keyed = [row[1] for row in db.execute("PRAGMA table_info(delivered_turn)")
                         if row[5]]
                if keyed and "persona_id" not in keyed:  # an outbox from before the rekey
                    db.executescript(_LEDGER_REKEY)
                db.executescript(_LEDGER_SCHEMA)
                columns = {row[1] for row in db.execute("PRAGMA table_info(outbox)")}
                if "owner" not in columns:  # outboxes from before open turns
                    db.execute("ALTER TABLE outbox ADD COLUMN owner INTEGER")
                db.execute("PRAGMA busy_timeout=30000")
            except BaseException:
                db.close()
                raise
            self._db = db
        return self._db

    @contextlib.contextmanager
    def _locked(self, wait_s: float | None) -> Iterator[sqlite3.Connection]:
        """This process's connection, waiting at most ``wait_s`` (None: the default 30 s)
        for the thread lock and for another process's write lock."""
        if not self._lock.acquire(timeout=-1 if wait_s is None else wait_s):
            raise sqlite3.OperationalError("database is locked (by this process's delivery)")
        try:
            db = self._conn(wait_s)
            if wait_s is None:
                yield db
                return
            db.execute(f"PRAGMA busy_timeout={int(wait_s * 1000)}")
            try:
                yield db
            finally:
                db.execute("PRAGMA busy_timeout=30000")
        finally:
            self._lock.release()

    def _exec(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn().execute(sql, args).fetchall()

    def check(self) -> None:
        """Open the file now (its schema made; read-only: read once), so a file that
        cannot be used fails here, before any work: raises one of ``OUTBOX_ERRORS``."""
        with self._lock:
            self._conn()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- writes ----------------------------------------------------------------------
    def enqueue(self, provider: str, event: MemoryEvent, session_key: str,
                identity: tuple[str, str, str | None] | None = None, *,
                wait_s: float | None = None, open_turn: bool = False,
                include_forgotten: bool = False) -> bool:
        """Append ``event``; False when this provider already has that ``event_id``, or
        when its scope was forgotten after the turn was said: a forget is a fact every
        writer obeys (a turn still being written when ``/memory-forget`` ran, a backfill, a
        ``migrate-scopes`` copy), unless ``include_forgotten`` (the operator's explicit
        ``backfill --include-forgotten``).
        ``identity`` (channel, chat id, sender id) is remembered for the session in the
        same transaction: nanobot's session files do not say who spoke, and a later
        backfill maps the session's turns to the same scope as the live ones.

        ``open_turn``: the user's half of a turn still being answered (status ``open``,
        owned by this process). A later ``enqueue`` of the same ``event_id`` completes an
        ``open`` row in place (the full turn, ``pending``) and returns True.
        ``wait_s`` bounds the wait for the write lock (raises ``sqlite3.OperationalError``
        "database is locked" after it)."""
        status, owner = ("open", process_token()) if open_turn else ("pending", None)
        with self._locked(wait_s) as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                if not include_forgotten and _forgotten_since(db, event):
                    db.execute("COMMIT")
                    return False
                cur = db.execute(
                    "INSERT INTO outbox (provider, event_id, session_key, payload, status, "
                    "owner, enqueued_at) VALUES (?,?,?,?,?,?,?) "
                    "ON CONFLICT(provider, event_id) DO UPDATE SET payload=excluded.payload, "
                    "status='pending', owner=NULL WHERE status='open' AND ?",
                    (provider, event.event_id, session_key, event.model_dump_json(), status,
                     owner, time.time(), not open_turn),
                )
                if identity is not None:
                    db.execute(_REMEMBER_IDENTITY, (session_key, *identity, time.time()))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return cur.rowcount == 1

    def orphaned_turns(self) -> list[OutboxRow]:
        """``open`` rows (any provider) whose owning process is gone: turns whose reply
        never came (the process was killed while the model answered)."""
        rows = self._exec("SELECT seq, provider, event_id, session_key, payload, attempts, "
                          "enqueued_at, owner FROM outbox WHERE status='open' ORDER BY seq")
        return [OutboxRow(*r[:7]) for r in rows if not token_alive(r[7])]

    def own_open_turns(self) -> list[OutboxRow]:
        """This process's ``open`` rows (a turn nanobot never persisted)."""
        rows = self._exec("SELECT seq, provider, event_id, session_key, payload, attempts, "
                          "enqueued_at FROM outbox WHERE status='open' AND owner=? "
                          "ORDER BY seq", (process_token(),))
        return [OutboxRow(*r) for r in rows]

    def promote(self, seq: int, event: MemoryEvent) -> None:
        """An ``open`` row becomes a ``pending`` turn holding ``event`` (the user's words)."""
        self._exec("UPDATE outbox SET status='pending', owner=NULL, payload=? "
                   "WHERE seq=? AND status='open'", (event.model_dump_json(), seq))

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

    def requeue_failed(self, provider: str, *, wait_s: float | None = None) -> int:
        with self._locked(wait_s) as db:
            cur = db.execute(
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
                # the scope's ids in SQL (``MemoryScope.key``), so the write lock is held
                # for one statement, not for parsing every row in Python
                where = ("WHERE replace(json_extract(payload, '$.run_id'), '/', '%2F') || '/' "
                         "|| replace(json_extract(payload, '$.user_id'), '/', '%2F') = ?")
                payloads = [p for (p,) in db.execute(
                    f"SELECT payload FROM outbox {where} ORDER BY seq", (scope_key,))]
                db.execute(f"DELETE FROM outbox {where}", (scope_key,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return [MemoryEvent.model_validate_json(p) for p in payloads]

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

    def providers(self) -> set[str]:
        """Every provider with a row here (one whose plugin is gone still has its rows)."""
        return {str(r[0]) for r in self._exec("SELECT DISTINCT provider FROM outbox")}

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
            open=counts.get("open", 0),
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

    def data_version(self) -> int:
        """SQLite's ``data_version`` of this connection: it changes when another
        connection (another process) commits, never for this one's own writes."""
        return int(self._exec("PRAGMA data_version")[0][0])

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
