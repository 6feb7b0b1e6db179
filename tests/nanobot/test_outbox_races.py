"""Races between the plugin's outbox writer, a whole turn arriving, and forget; and who
owns an ``open`` row when a pid is reused. Each failed on the code before its fix."""

from __future__ import annotations

import asyncio
import os
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from nanobot_memory_adapters.events import MemoryEvent, Message
from nanobot_memory_adapters.nanobot import plugin_for
from nanobot_memory_adapters.nanobot.outbox import Outbox
from nanobot_memory_adapters.nanobot.unqueued import Write
from nanobot_memory_adapters.processes import process_token
from nanobot_memory_adapters.scope import MemoryScope
from tests.nanobot.conftest import say

FULL_HISTORY = {"memory": {"condition": "full_history"}}


def _turn(event_id: str, text: str, *, user: str = "telegram-kim",
          when: datetime | None = None) -> MemoryEvent:
    return MemoryEvent(
        event_id=event_id, run_id="default", user_id=user, agent_id="nanobot",
        session_id="telegram:kim", turn_id=f"t-{event_id}",
        timestamp=when or datetime.now(UTC),
        messages=[Message(role="user", content=text)])


def _write(event: MemoryEvent, *, open_turn: bool) -> Write:
    return Write("full_history", event, "telegram:kim", ("telegram", "kim", "kim"),
                 open_turn=open_turn)


def _hold_open_halves(plugin):  # type: ignore[no-untyped-def]
    """Make the outbox's write of a user half wait until released (a slow disk, a lock)."""
    entered, gate = threading.Event(), threading.Event()
    real = plugin.outbox.enqueue

    def enqueue(*args, **kwargs):  # type: ignore[no-untyped-def]
        if kwargs.get("open_turn"):
            entered.set()
            gate.wait(30)
        return real(*args, **kwargs)

    plugin.outbox.enqueue = enqueue
    return entered, gate


async def _kim_said_hello(home: Any) -> tuple[Any, Any]:
    """A full_history loop whose outbox already delivered one turn of kim's."""
    home.write_memory(FULL_HISTORY)
    loop = home.loop()
    plugin = plugin_for(loop)
    assert plugin is not None
    await say(loop, "kim", "Hello, I am Kim.")
    assert await plugin.flush() == 0
    return loop, plugin


async def test_a_whole_turn_arriving_while_its_half_is_written_completes_the_row(home):
    _loop, plugin = await _kim_said_hello(home)
    entered, gate = _hold_open_halves(plugin)
    half = _turn("nb-race-1", "My locker is 12.")
    plugin.unqueued.add(_write(half, open_turn=True))
    writer = asyncio.create_task(plugin._write_out())
    await asyncio.to_thread(entered.wait, 30)  # the half is being written now
    whole = half.model_copy(update={"messages": [*half.messages, Message(
        role="assistant", content="Noted.")]})
    plugin.unqueued.add(_write(whole, open_turn=False))  # the reply came meanwhile
    gate.set()
    assert await writer
    assert plugin.unqueued.writes == []
    [row] = [r for r in plugin.outbox.rows() if r["event_id"] == "nb-race-1"]
    assert row["status"] in ("pending", "delivered"), row["status"]  # never left 'open'
    assert "Noted." in row["payload"]


async def test_forget_waits_for_a_turn_being_written_and_drops_the_kept_ones(home):
    loop, plugin = await _kim_said_hello(home)
    entered, gate = _hold_open_halves(plugin)
    said = datetime.now(UTC) - timedelta(seconds=5)
    in_flight = _turn("nb-race-2", "My PIN is 4471.", when=said)
    kept = _turn("nb-race-3", "My codename is ZEBRA.", when=said)
    plugin.unqueued.add(_write(in_flight, open_turn=True))
    plugin.unqueued.add(_write(kept, open_turn=True))
    writer = asyncio.create_task(plugin._write_out())
    await asyncio.to_thread(entered.wait, 30)
    forget = asyncio.create_task(say(loop, "kim", "/memory-forget confirm"))
    await asyncio.sleep(0.5)
    assert not forget.done()  # it waits for the write in flight, not races it
    gate.set()
    await writer
    reply = await forget
    assert "forgotten" in reply, reply
    # the whole turn said before the forget, written after it, is not stored
    plugin.unqueued.add(_write(in_flight.model_copy(update={"messages": [
        *in_flight.messages, Message(role="assistant", content="Noted.")]}),
        open_turn=False))
    assert await plugin._write_out()
    assert await plugin.flush() == 0
    payloads = " ".join(r["payload"] for r in plugin.outbox.rows())
    assert "4471" not in payloads and "ZEBRA" not in payloads
    scope = MemoryScope(run_id="default", persona_id="telegram-kim", agent_id="nanobot")
    from nanobot_memory_adapters.contract import ContextBudget, RetrieveRequest

    assert plugin.adapter is not None
    shown = await plugin.adapter.retrieve(RetrieveRequest(
        query="PIN codename", scope=scope, budget=ContextBudget(max_tokens=2000)))
    assert not any("4471" in i.text or "ZEBRA" in i.text for i in shown.items)


def test_an_open_row_of_a_reused_pid_is_an_orphan(tmp_path):
    """nanobot in a container is pid 1 after every restart: the same pid with another
    start time is not the process that opened the row."""
    box = Outbox(tmp_path / "o.sqlite3")
    box.enqueue("p", _turn("nb-open-1", "cut short"), "telegram:kim", open_turn=True)
    assert box.orphaned_turns() == []  # ours, alive
    with box._lock:
        box._conn().execute("UPDATE outbox SET owner=?",
                            (f"{os.getpid()}:1",))  # our pid, an earlier start
    assert [r.event_id for r in box.orphaned_turns()] == ["nb-open-1"]
    assert process_token().startswith(f"{os.getpid()}:")
