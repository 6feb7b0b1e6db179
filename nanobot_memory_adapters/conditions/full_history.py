"""full_history: every prior transcript of the scope, newest that fit, shown oldest first.

The control that asks "what if we just kept everything?". It ignores the query: under a
budget it keeps the most recent turns that fit and presents them chronologically.
Transcripts live in a SQLite file so a run survives restarts; ``event_id`` makes
re-recording idempotent.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from nanobot_memory_adapters.base import NativeHealth, NativeRetrieval, NativeWrite
from nanobot_memory_adapters.contract import (
    ContextBudget,
    MemoryEvent,
    MemoryScope,
    ProviderInfo,
    RetrievedItem,
    RetrieveRequest,
)
from nanobot_memory_adapters.formatting import RenderedContext, SectionPacker, render_context
from nanobot_memory_adapters.provider import ProviderEnv

INFO = ProviderInfo(
    name="full_history",
    condition_kind="control",
    consistency_model="immediate",
    stores_events=True,
    tag_mapping="metadata",
    memory_form="verbatim",
    item_fields=("native_id", "event_at", "source_event_ids"),
    native_ingest_modes=("transcript",),
    capabilities=("store_version",),
    description="Prior transcripts packed chronologically into the budget (query ignored).",
)

# Consecutive turns that did not fit before packing stops (nothing more is likely to fit,
# and scanning a long history on every retrieve would cost more than it finds).
MAX_SKIPS_IN_A_ROW = 20
# Seconds a write waits for another process's SQLite write lock before it fails (retryable).
LOCK_WAIT_S = 30.0

def _open_shared(path: Path) -> sqlite3.Connection:
    """A connection two processes (a gateway and a CLI turn) can write through at once:
    each waits for the other's write lock (busy timeout) and readers run beside a writer
    (WAL). Switching to WAL and creating the schema can meet the other process doing the
    same and fail at once instead of waiting, so that part is retried."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        db = sqlite3.connect(path, check_same_thread=False, timeout=LOCK_WAIT_S)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            return db
        except sqlite3.OperationalError as exc:
            db.close()
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    scope TEXT NOT NULL,
    event_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    ts TEXT NOT NULL,
    transcript TEXT NOT NULL,
    tags TEXT NOT NULL,
    PRIMARY KEY (scope, event_id)
);
CREATE INDEX IF NOT EXISTS events_scope_ts ON events (scope, ts);
CREATE TABLE IF NOT EXISTS speakers (
    scope TEXT NOT NULL,
    event_id TEXT NOT NULL,
    speaker TEXT NOT NULL,
    PRIMARY KEY (scope, event_id)
);
"""
# ``speakers``: who said a one-message turn (its ``Name: `` opens the transcript), so the
# section shows it as ``Name: text``. A table of its own, not a column: a process still
# running an older version writes ``events`` as before (its turns, and every turn of a
# store written before, show their transcript as it is).

# Each row with its turn's speaker, if known: (event_id, session_id, turn_id, ts,
# transcript, tags, speaker).
TURN_COLUMNS = "e.event_id, e.session_id, e.turn_id, e.ts, e.transcript, e.tags, s.speaker"
TURNS_FROM = ("FROM events e LEFT JOIN speakers s "
              "ON s.scope = e.scope AND s.event_id = e.event_id ")
SELECT_TURNS = f"SELECT {TURN_COLUMNS} {TURNS_FROM}WHERE e.scope = ? ORDER BY "


def _speaker(event: MemoryEvent) -> str | None:
    if len(event.messages) != 1:
        return None
    message = event.messages[0]
    return message.name or message.role


def turn_item(row: tuple, score: float | None = None) -> RetrievedItem:
    """A stored turn as an item: a one-message turn with its speaker as the item's source
    and its words as the text (shown ``Caroline: text``), any other as its transcript.
    Session and turn ids stay in the metadata and the trace."""
    event_id, session_id, turn_id, ts, transcript, tags, speaker = row
    said = speaker if speaker and transcript.startswith(f"{speaker}: ") else None
    return RetrievedItem(
        native_id=event_id,
        text=transcript[len(said) + 2:] if said else transcript,
        source=said,
        native_type="transcript",
        event_at=datetime.fromisoformat(ts),
        score=score,
        source_event_ids=[event_id],
        metadata={"session_id": session_id, "turn_id": turn_id, **json.loads(tags)},
    )


class FullHistoryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str | None = None  # default: <data_dir>/full_history.sqlite3


class FullHistory:
    # retrieve ignores the query (provider.is_query_independent): the plugin may prepare
    # a turn's recall before the message is known
    query_independent = True
    config_model = FullHistoryConfig

    def __init__(self, path: str | Path) -> None:
        self.info = INFO
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._opened = 0  # connections opened so far (a reopened one restarts its counters)
        self._writes: dict[str, int] = {}  # per scope: writes through this connection

    @classmethod
    def from_config(cls, config: FullHistoryConfig, env: ProviderEnv) -> FullHistory:
        path = (
            Path(config.path).expanduser() if config.path else env.data_dir / "full_history.sqlite3"
        )
        return cls(path)

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = _open_shared(self.path)
            self._opened += 1
        return self._db

    def _run(self, sql: str, args: tuple = ()) -> list[tuple]:
        return self._run_all([(sql, args)])

    def _run_all(self, statements: list[tuple[str, tuple]],
                 writes: str | None = None) -> list[tuple]:
        """Statements in one transaction; the last one's rows. ``writes``: the scope they
        change, counted (for ``store_version``) under the same lock as the commit, so no
        version is read between the two, whether the commit succeeds or not."""
        with self._lock:
            db = self._conn()
            rows: list[tuple] = []
            try:
                for sql, args in statements:
                    rows = db.execute(sql, args).fetchall()
                db.commit()
            except BaseException:
                db.rollback()
                raise
            finally:
                if writes is not None:
                    self._writes[writes] = self._writes.get(writes, 0) + 1
            return rows

    def _version(self, key: str) -> str:
        with self._lock:
            db = self._conn()
            # another connection's commit (any scope) changes data_version; this one's own
            # commits do not, so they are counted per scope
            (changed_elsewhere,) = db.execute("PRAGMA data_version").fetchone()
            return f"{self._opened}.{changed_elsewhere}.{self._writes.get(key, 0)}"

    async def store_version(self, scope: MemoryScope) -> str:
        """Changes when this process writes to the scope or another process commits
        anything to the file (conservative: a write to another scope counts too)."""
        return await asyncio.to_thread(self._version, scope.key)

    async def setup(self, scope: MemoryScope) -> None:
        await asyncio.to_thread(self._conn)

    async def record(self, event: MemoryEvent) -> NativeWrite:
        key = event.scope().key
        statements: list[tuple[str, tuple]] = [(
            "INSERT OR IGNORE INTO events VALUES (?,?,?,?,?,?,?)",
            (
                key,
                event.event_id,
                event.session_id,
                event.turn_id,
                event.timestamp.isoformat(),
                event.transcript(),
                json.dumps(event.tags()),
            ),
        )]
        if (speaker := _speaker(event)) is not None:
            statements.append(("INSERT OR IGNORE INTO speakers VALUES (?,?,?)",
                               (key, event.event_id, speaker)))
        await asyncio.to_thread(self._run_all, statements, key)
        return NativeWrite(
            status="committed", native_ids=[event.event_id], native_operation="sqlite.insert"
        )

    def _pack_newest(self, request: RetrieveRequest) -> tuple[SectionPacker, list[str], int]:
        """Newest first until the budget is spent, reading only as far as packing goes
        (the ``(scope, ts)`` index walked backwards: a long history costs what is shown,
        not what is stored). A turn too large for the room left is skipped (and named in
        the trace), so one huge turn never hides the whole past; after
        MAX_SKIPS_IN_A_ROW misses nothing more fits."""
        packer = SectionPacker(backend=self.info.name, scope=request.scope.key,
                               budget=request.budget, items=[])
        skipped: list[str] = []
        misses = 0
        with self._lock:
            db = self._conn()
            (total,) = db.execute("SELECT count(*) FROM events WHERE scope = ?",
                                  (request.scope.key,)).fetchone()
            cursor = db.execute(SELECT_TURNS + "e.ts DESC, e.rowid DESC", (request.scope.key,))
            try:
                for row in cursor:
                    if request.budget.max_items and len(packer.chosen) >= request.budget.max_items:
                        break
                    if not packer.offer(turn_item(row)):  # its line, and the heading it opens
                        skipped.append(row[0])
                        misses += 1
                        if misses >= MAX_SKIPS_IN_A_ROW:
                            break
                        continue
                    misses = 0
            finally:
                cursor.close()
        return packer, skipped, total

    async def retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        packer, skipped, total = await asyncio.to_thread(self._pack_newest, request)
        picked = list(reversed(packer.chosen))
        warnings = []
        if skipped:
            warnings.append(
                f"skipped {len(skipped)} turn(s) larger than the budget left for them "
                f"(newest first: {', '.join(skipped[:5])}{', ...' if len(skipped) > 5 else ''})"
            )
        return NativeRetrieval(
            items=picked,
            raw={"total_events": total, "packed": len(picked), "skipped": skipped},
            native_operation="sqlite.select_recent",
            native_request={"max_tokens": request.budget.max_tokens},
            warnings=warnings,
        )

    def render(self, scope: MemoryScope | str, items: list[RetrievedItem],
               budget: ContextBudget) -> RenderedContext:
        """Packed newest first, as ``retrieve`` chose them (a day heading shows the time
        of the first turn packed under it), shown oldest first."""
        key = scope.key if isinstance(scope, MemoryScope) else scope
        packer = SectionPacker(backend=self.info.name, scope=key, budget=budget,
                               items=items)
        for item in reversed(items):
            packer.offer(item)
        return render_context(backend=self.info.name, scope=key, items=items,
                              budget=budget, packer=packer)

    async def reset(self, scope: MemoryScope) -> str | None:
        await asyncio.to_thread(self._run_all, [
            ("DELETE FROM events WHERE scope = ?", (scope.key,)),
            ("DELETE FROM speakers WHERE scope = ?", (scope.key,))], scope.key)
        return "all transcripts of the scope deleted"

    async def health(self) -> NativeHealth:
        rows = await asyncio.to_thread(self._run, "SELECT count(*) FROM events")
        return NativeHealth(status="ok", details={"path": str(self.path), "events": rows[0][0]})

    async def aclose(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
