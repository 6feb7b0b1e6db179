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
    from nanobot_memory_adapters.store import StoreProvider

    async def main(path, tag, n):
        adapter = StoreProvider(FullHistory(path))
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


@pytest.mark.servers
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


@pytest.mark.servers
def test_store_holders_names_the_other_process_and_nothing_it_was_told(tmp_path):
    """/memory-health names who holds a store: another process with a file under the
    store open (from /proc), shown as program and sub-commands only, never its options."""
    from nanobot_memory_adapters.diagnostics import store_holders

    store = tmp_path / "store"
    store.mkdir()
    (store / "data.bin").write_text("x")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys,time; f=open(sys.argv[1]); print('open', flush=True); time.sleep(60)",
         str(store / "data.bin"), "--api-key", "sk-very-secret"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        found = store_holders(store)
        assert len(found) == 1 and found[0].startswith(f"pid {holder.pid} (python")
        assert "secret" not in found[0] and "--api-key" not in found[0]
        assert store_holders(store, skip=("data",)) == []  # e.g. the shared outbox
        assert store_holders(tmp_path / "elsewhere") == []
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_is_recognised_inside_an_adapter_error():
    """The plugin sees lock contention only through an AdapterError's raw diagnostics."""
    from nanobot_memory_adapters.contract import AdapterError
    from nanobot_memory_adapters.diagnostics import mentions_lock_contention

    raw, _ = native_diagnostics(RuntimeError("wrapped"))
    assert not mentions_lock_contention(AdapterError("x", backend_name="b", operation="o",
                                                     raw=raw))
    try:
        try:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        except BlockingIOError as inner:
            raise RuntimeError("open failed") from inner
    except RuntimeError as exc:
        raw, _ = native_diagnostics(exc)
    assert mentions_lock_contention(AdapterError("x", backend_name="b", operation="o", raw=raw))
