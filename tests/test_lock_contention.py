"""Two processes on one embedded store: lock contention is a wait (or a retryable
failure), never a lost write. Real processes, a real SQLite file."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap

import pytest

from nanobot_memory_adapters.diagnostics import native_diagnostics


class AlreadyLocked(Exception):  # portalocker's name, as qdrant_client raises it
    pass


@pytest.mark.parametrize("exc", [
    sqlite3.OperationalError("database is locked"),
    RuntimeError("Storage folder /d/qdrant is already accessed by another instance of Qdrant "
                 "client. If you require concurrent access, use Qdrant server instead."),
    BlockingIOError(11, "Resource temporarily unavailable"),
    AlreadyLocked("held"),
    RuntimeError("IO exception: Could not set lock on file : /d/graph.kuzu"),
])
def test_lock_errors_are_retryable(exc):
    raw, retryable = native_diagnostics(exc)
    assert retryable, raw


def test_other_errors_stay_non_retryable():
    assert native_diagnostics(ValueError("bad filter"))[1] is False
    assert native_diagnostics(sqlite3.OperationalError("no such table: events"))[1] is False


WRITER = textwrap.dedent("""
    import asyncio, sys
    from datetime import UTC, datetime, timedelta
    from nanobot_memory_adapters.conditions.full_history import FullHistory
    from nanobot_memory_adapters.contract import MemoryEvent

    async def main(path, tag, n):
        adapter = FullHistory(path)
        t0 = datetime(2024, 1, 1, tzinfo=UTC)
        failed = 0
        for i in range(n):
            receipt = await adapter.record_event(MemoryEvent(
                event_id=f"{tag}-{i}", run_id="r", user_id="u", agent_id="bot",
                session_id=tag, turn_id=str(i), timestamp=t0 + timedelta(seconds=i),
                messages=[{"role": "user", "content": f"{tag} says {i}"}]))
            failed += receipt.status != "committed"
        await adapter.aclose()
        print(failed)

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
""")


def test_two_processes_writing_full_history_lose_nothing(tmp_path):
    path = tmp_path / "history.sqlite3"
    n = 1500
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), tag, str(n)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for tag in ("gateway", "cli")]
    outs = [p.communicate(timeout=600) for p in procs]
    for proc, (out, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0, err[-2000:]
        assert out.strip() == "0", (out, err[-2000:])  # no failed receipt in either
    with sqlite3.connect(path) as db:
        stored = db.execute("SELECT COUNT(*), COUNT(DISTINCT event_id) FROM events").fetchone()
    assert stored == (2 * n, 2 * n)
