"""A gateway and a terminal on one embedded store (issue 34): the process that cannot
open the store says so in one line, once (not the backend's whole error on every retry),
``/memory-health`` states that recall is off in it, and ``/memory-forget`` says which
process to stop instead of "try again". Two real processes, real Qdrant lock."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from nanobot_memory_adapters.nanobot import plugin_for
from tests.nanobot.conftest import cli_turn, say

# Every test here starts a process (a server, nanobot, a bench run): not in the fast suite.
pytestmark = pytest.mark.servers

pytest.importorskip("mem0")
HOLDER = Path(__file__).with_name("store_holder.py")
PIN = "PIN-4471-KESTREL"


async def _holder(home, *words: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, str(HOLDER), *words, str(home.config_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=str(Path(__file__).parents[2]))
    assert proc.stdout is not None
    line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 240)
    assert line.strip() == "held", line
    return proc


async def test_the_second_process_on_a_held_store(home, log_lines):
    home.write_memory({"memory": {"condition": "simple_rag"},
                       "nanobot": {"retry_initial_s": 0.1, "retry_max_s": 0.3}})
    # the holder's command line holds someone's words, after a ';' (a chat once got the
    # holder line's text after its first ';')
    holder = await _holder(home, f"Ann; my PIN is {PIN}")
    try:
        loop = home.loop()
        plugin = plugin_for(loop)
        assert plugin is not None
        await say(loop, "alice", "I bake sourdough every Sunday.")
        await asyncio.sleep(4)  # many build retries
        await say(loop, "alice", "What do I bake?")
        health = await say(loop, "alice", "/memory-health")
        forget = await say(loop, "alice", "/memory-forget confirm")
        # the holder's command line can hold another user's words (`nanobot agent -m
        # "..."`): it is named on nanobot's own terminal only
        terminal = await cli_turn(loop, "/memory-health")
        forget_there = await cli_turn(loop, "/memory-forget confirm")
        stats = plugin.outbox.stats("simple_rag")
    finally:
        holder.kill()
        holder.wait()
    ours = [line for line in log_lines if "nanobot-memory-adapters" in line]
    held = [line for line in ours if "holds open" in line]
    assert len(held) == 1, ours  # one line, once, over many retries
    assert f"pid {holder.pid} (" in held[0] and "answers without recall" in held[0]
    assert not any("already accessed by another instance" in line for line in ours), ours
    # kept in the shared outbox (the holder delivers them), never parked as failed
    assert stats.failed == 0 and stats.pending + stats.delivered == 3, stats
    assert "without recall (no memory reaches its replies" in health, health
    assert "store: held by another process" in health and str(holder.pid) not in health
    assert PIN not in health, health
    assert PIN in terminal, terminal  # the operator's terminal names the whole holder
    assert f"store: held by pid {holder.pid} (" in terminal, terminal
    assert forget.startswith("cannot forget here: another process holds"), forget
    assert str(holder.pid) not in forget and "nothing was deleted" in forget
    assert forget_there.startswith("cannot forget here: 'simple_rag' keeps an embedded store "
                                   f"that pid {holder.pid} ("), forget_there
    assert "Nothing was deleted" in forget_there and "stop it" in forget_there
    assert "again" not in forget_there.lower(), forget_there


async def test_forget_names_the_provider_that_still_holds_the_scope(home):
    """The outbox shows simple_rag holding gw's turn, and another process holds
    simple_rag's store: forget deletes what it can reach and names what it cannot; once
    that process is gone, forget reaches it too."""
    home.write_memory({"memory": {"condition": "simple_rag"}})
    holder = await _holder(home)  # gw's turn delivered to simple_rag, store held
    try:
        home.write_memory({"memory": {"condition": "full_history"}})
        loop = home.loop()
        plugin = plugin_for(loop)
        assert plugin is not None

        async def gw(text: str) -> str:
            reply = await loop.process_direct(text, session_key="telegram:gw",
                                              channel="telegram", chat_id="gw",
                                              sender_id="gw")
            return reply.content if reply is not None else ""

        await gw("I keep bees on the roof.")
        assert await plugin.flush() == 0
        partly = await gw("/memory-forget confirm")
    finally:
        holder.kill()
        holder.wait()
    assert partly.startswith("NOT fully forgotten"), partly
    assert "'full_history' deleted" in partly.splitlines()[0], partly
    assert "'simple_rag' still holds it:" in partly, partly

    done = await gw("/memory-forget confirm")  # the holder is gone: simple_rag is reached
    assert done.startswith("forgotten: 'full_history' and 'simple_rag' deleted"), done
    assert "check (simple_rag): searching for it again returns nothing" in done


async def test_the_holder_delivers_another_processs_turns_while_idle(home):
    """The gateway holds the store and is idle; a turn from a second process waits in the
    shared outbox. The holder delivered it only at its own next turn (90 s and more while
    idle); it watches the outbox and delivers it within seconds."""
    home.write_memory({"memory": {"condition": "simple_rag"},
                       "nanobot": {"retry_initial_s": 0.1, "retry_max_s": 0.3,
                                   "outbox_poll_s": 0.5}})
    holder = await _holder(home)
    try:
        loop = home.loop()
        plugin = plugin_for(loop)
        assert plugin is not None
        await say(loop, "alice", "I keep bees on the roof.")
        await plugin._delivery.write_out()
        stats = plugin.outbox.stats("simple_rag")
        assert stats.pending == 1, stats  # this process cannot open the store
        await home.close(loop)  # the terminal is done; the gateway takes no turn
        for _ in range(60):
            stats = plugin.outbox.stats("simple_rag")
            if stats.pending == 0:
                break
            await asyncio.sleep(0.25)
        assert stats.pending == 0 and stats.delivered == 2, stats
    finally:
        holder.kill()
        holder.wait()
