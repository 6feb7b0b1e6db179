"""A turn the outbox cannot take is kept, not dropped: with a real second process holding
SQLite's write lock, and with the outbox's disk (a real small tmpfs) full, a real
``AgentLoop`` keeps answering at once, ``/memory-health`` says how many turns are not
queued and why, and once the fault is gone every turn is delivered (by the plugin's own
retry; the test only waits)."""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import time

import pytest

from nanobot_memory_adapters.nanobot import plugin_for
from tests.nanobot.conftest import say
from tests.nanobot.faults import fill, hold_write_lock, small_disk

FILE = "nanobot-outbox.sqlite3"


async def _health(loop) -> str:
    reply = await loop.process_direct("/memory-health", session_key="cli:ops", channel="cli",
                                      chat_id="ops", sender_id="user")
    return reply.content if reply is not None else ""


async def _timed_say(loop, who: str, text: str) -> float:
    started = time.monotonic()
    await say(loop, who, text)
    return time.monotonic() - started


async def _wait_delivered(home, texts: list[str], timeout_s: float = 60) -> list[str]:
    """The stored transcripts once every text is in full_history's store exactly once."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            db = sqlite3.connect(home.data_dir / "full_history.sqlite3")
            stored = [t for (t,) in db.execute("SELECT transcript FROM events")]
            db.close()
        except sqlite3.Error:
            stored = []
        if all(sum(text in t for t in stored) == 1 for text in texts):
            return stored
        if time.monotonic() > deadline:
            raise AssertionError(f"not delivered within {timeout_s}s: {texts} vs {stored}")
        await asyncio.sleep(0.2)


@pytest.mark.servers
async def test_turns_survive_a_held_lock_and_a_full_disk(home):
    home.write_memory({"memory": {"condition": "full_history"},
                       "nanobot": {"retry_initial_s": 0.2, "retry_max_s": 0.5}})
    with small_disk(home.data_dir, "1m") as disk:
        loop = home.loop()
        plugin = plugin_for(loop)
        assert plugin is not None
        await say(loop, "ann", "Hello, I am Ann.")
        await _wait_delivered(home, ["Hello, I am Ann."])

        # 1. another process holds the outbox's write lock
        holder = hold_write_lock(disk / FILE)
        try:
            locked = ["Ann's locker code is 4411.", "Ben's dog is called Pepper."]
            took = [await _timed_say(loop, who, text)
                    for who, text in zip(("ann", "ben"), locked, strict=True)]
            assert max(took) < 10, took  # once each reply waited 30 s for the lock
            health = await _health(loop)
            assert "2 turns not queued" in health, health
            assert "write lock" in health and str(disk / FILE) in health, health
        finally:
            holder.kill()
            holder.wait()
        await _wait_delivered(home, locked)
        assert "not queued" not in await _health(loop)

        # 2. the outbox's disk is full
        filler = fill(disk)
        full = ["Cy's flight leaves at 7.", "Ann's bike is a green Gazelle."]
        for who, text in zip(("cy", "ann"), full, strict=True):
            await say(loop, who, text)
        health = await _health(loop)
        assert "turns not queued" in health and "disk is full" in health, health
        filler.unlink()
        stored = await _wait_delivered(home, [*locked, *full])
        assert len(stored) == 5, stored
        await home.close(loop)


@pytest.mark.servers
async def test_retries_stay_off_the_terminal(home, log_lines):
    """A write the backend does not take yet is retried quietly: nothing at INFO or above
    (a warning printed onto the interactive ``You:`` prompt); ``/memory-health`` says it."""
    home.write_memory({"memory": {"condition": "full_history"},
                       "nanobot": {"retry_initial_s": 0.2, "retry_max_s": 0.5,
                                   "write_timeout_s": 0.5, "recall_timeout_s": 0.5}})
    loop = home.loop()
    plugin = plugin_for(loop)
    assert plugin is not None
    await say(loop, "dee", "Hello, I am Dee.")
    await _wait_delivered(home, ["Hello, I am Dee."])
    holder = hold_write_lock(home.data_dir / "full_history.sqlite3")  # the backend's store
    try:
        await say(loop, "dee", "Dee's train leaves at nine.")
        deadline = time.monotonic() + 30
        while plugin.writes_failing_since is None:
            assert time.monotonic() < deadline, "the write never failed"
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.5)  # several retries
        assert "writes failing since" in await _health(loop)
    finally:
        holder.kill()
        holder.wait()
    await _wait_delivered(home, ["Dee's train leaves at nine."])
    loud = [line for line in log_lines if "did not accept" in line or "retrying" in line]
    assert not loud, loud
    await home.close(loop)


async def test_a_damaged_outbox_keeps_the_turn_and_names_the_remedy(home, caplog):
    """A garbage outbox file: the reply comes, the turn is kept, ``/memory-health`` and
    ``/memory-mode retry-failed`` give the file and the remedy, the drain task never dies
    unretrieved, and after the remedy (the file moved aside) the turn is delivered."""
    home.write_memory({"memory": {"condition": "full_history"},
                       "nanobot": {"retry_initial_s": 0.2, "retry_max_s": 0.5}})
    home.data_dir.mkdir(parents=True)
    damaged = home.data_dir / FILE
    damaged.write_bytes(b"not an outbox\n" * 1000)
    loop = home.loop()
    await say(loop, "eve", "Eve's cat is called Miso.")
    health = await _health(loop)
    assert "1 turns not queued" in health, health
    assert f"outbox {damaged}: it is damaged" in health and f"mv {damaged}" in health, health
    retry = await loop.process_direct("/memory-mode retry-failed", session_key="cli:ops",
                                      channel="cli", chat_id="ops", sender_id="user")
    assert retry is not None and "nothing requeued" in retry.content
    assert f"mv {damaged}" in retry.content, retry.content
    damaged.rename(damaged.with_suffix(".damaged"))  # the remedy the line gives
    await _wait_delivered(home, ["Eve's cat is called Miso."])
    await home.close(loop)
    gc.collect()
    assert "never retrieved" not in caplog.text
