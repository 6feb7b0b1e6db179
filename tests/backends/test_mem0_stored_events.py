"""mem0's index of stored events (the replay check) against what mem0 really holds: a
timed-out or failed add, a store another process changed, a reset during the listing.
Real mem0 on local Qdrant with the bundled MiniLM; the other process is a real one."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from nanobot_memory_adapters.backends.mem0 import Mem0Store
from nanobot_memory_adapters.backends.mem0.qdrant import QDRANT
from nanobot_memory_adapters.contract import (
    AdapterError,
    ContextBudget,
    MemoryEvent,
    MemoryScope,
    Message,
    RetrieveRequest,
)
from nanobot_memory_adapters.store import StoreProvider

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


def _scope() -> MemoryScope:
    return MemoryScope(run_id=f"r-{uuid.uuid4().hex[:8]}", persona_id="alice",
                       agent_id="nanobot")


def _event(scope: MemoryScope, text: str, turn: int = 1, reply: str = "") -> MemoryEvent:
    return MemoryEvent(
        event_id=f"e{turn}-{uuid.uuid4().hex[:6]}", run_id=scope.run_id,
        user_id=scope.persona_id, agent_id=scope.agent_id or "nanobot", session_id="s1",
        turn_id=str(turn), timestamp=T0 + timedelta(minutes=turn),
        messages=[Message(role="user", content=text),
                  *([Message(role="assistant", content=reply)] if reply else [])],
    )


async def _held(adapter: StoreProvider, scope: MemoryScope) -> list[str]:
    return [m["id"] for m in (await adapter.provenance(scope))["memories"]]


async def _found(adapter: StoreProvider, scope: MemoryScope, query: str) -> int:
    result = await adapter.retrieve(RetrieveRequest(
        query=query, scope=scope, budget=ContextBudget(max_tokens=1000)))
    return len(result.items)


@pytest.fixture
async def adapter(data_dir):
    adapter = StoreProvider(Mem0Store(data_dir))
    yield adapter
    await adapter.aclose()


async def test_an_add_that_timed_out_is_not_stored_again_by_its_retry(adapter):
    """The plugin gives up on a write after ``write_timeout_s`` while mem0 goes on
    inserting in its worker thread; the retry in the same process must see that insert
    (the index forgets the scope on any exception or cancellation around the add)."""
    await _retry_after_a_timeout(adapter, wait_for_the_insert=True)


async def test_a_retry_sent_while_the_timed_out_add_still_runs_waits_for_it(adapter):
    """The retry comes before mem0's worker thread has inserted the timed-out add: its
    look-up waits for that add to end (it runs on, shielded) and finds the event."""
    await _retry_after_a_timeout(adapter, wait_for_the_insert=False)


async def _retry_after_a_timeout(adapter: StoreProvider, *, wait_for_the_insert: bool) -> None:
    scope = _scope()
    await adapter.record_event(_event(scope, "I water the ferns on Mondays.", 1))  # listed
    memory = await adapter.store._native(scope)
    store = memory.vector_store
    real_insert = store.insert
    inserted = threading.Event()

    def slow_insert(*args, **kwargs):
        time.sleep(0.6)  # mem0's thread is still busy when the caller gives up
        try:
            return real_insert(*args, **kwargs)
        finally:
            inserted.set()

    event = _event(scope, "I keep three beehives on the roof.", 2)
    store.insert = slow_insert
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(adapter.record_event(event), 0.2)
        if wait_for_the_insert:
            assert await asyncio.to_thread(inserted.wait, 10)  # mem0 stored it all the same
        else:
            assert not inserted.is_set()  # still inserting when the retry comes
        again = await adapter.record_event(event)
    finally:
        store.insert = real_insert
    assert inserted.is_set()
    assert again.status == "committed"
    assert any("already in mem0" in w for w in again.trace.warnings), again.trace.warnings
    held = await _held(adapter, scope)
    assert len(held) == 2  # the first turn and one memory of the retried event


async def test_an_add_that_failed_part_way_is_listed_again_before_its_retry(adapter):
    """An add that raised after mem0 stored part of it (here: the second message's
    insert fails) leaves the scope to be listed again: the retry does not add the stored
    part a second time."""
    scope = _scope()
    await adapter.record_event(_event(scope, "I water the ferns on Mondays.", 1))
    memory = await adapter.store._native(scope)
    store = memory.vector_store
    real_insert = store.insert
    calls = {"n": 0}

    def failing_second(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("disk full")
        return real_insert(*args, **kwargs)

    event = _event(scope, "I keep three beehives on the roof.", 2, "Three hives, noted.")
    store.insert = failing_second
    try:
        with pytest.raises(AdapterError, match="disk full"):
            await adapter.record_event(event)
    finally:
        store.insert = real_insert
    held = await _held(adapter, scope)
    assert len(held) == 2  # the first turn and the stored half of the second
    again = await adapter.record_event(event)
    assert any("already in mem0" in w for w in again.trace.warnings), again.trace.warnings
    assert sorted(await _held(adapter, scope)) == sorted(held)


_RESET_ELSEWHERE = """
import asyncio, sys
from nanobot_memory_adapters.backends.mem0 import Mem0Store
from nanobot_memory_adapters.contract import MemoryScope
from nanobot_memory_adapters.store import StoreProvider

async def main():
    adapter = StoreProvider(Mem0Store(sys.argv[1]))
    try:
        await adapter.reset_scope(MemoryScope(**__import__("json").loads(sys.argv[2])))
    finally:
        await adapter.aclose()

asyncio.run(main())
"""


@pytest.mark.servers
async def test_a_store_reopened_after_another_process_reset_it_is_listed_again(data_dir):
    """Adapter A records an event and closes (the Qdrant handle closes with it); another
    process resets the scope; adapter B of the first process records the event again: it
    is stored (not "already in mem0" from an index that outlived the handle) and found."""
    scope = _scope()
    event = _event(scope, "I keep three beehives on the roof.")
    first = StoreProvider(Mem0Store(data_dir))
    try:
        assert (await first.record_event(event)).native_ids
    finally:
        await first.aclose()
    assert not QDRANT.is_open(first.store.qdrant_path)
    other = subprocess.run(
        [sys.executable, "-c", _RESET_ELSEWHERE, str(data_dir),
         json.dumps(scope.model_dump(mode="json"))],
        capture_output=True, text=True, timeout=300)
    assert other.returncode == 0, other.stderr[-2000:]
    second = StoreProvider(Mem0Store(data_dir))
    try:
        again = await second.record_event(event)
        assert again.status == "committed" and again.native_ids
        assert not any("already" in w for w in again.trace.warnings), again.trace.warnings
        assert await _found(second, scope, "beehives on the roof") == 1
    finally:
        await second.aclose()


async def test_a_reset_during_the_first_listing_is_not_undone_by_it(data_dir):
    """The first look-up of a scope lists it in a worker thread; a reset that lands
    between that listing and its installation must win: the event is stored again, not
    answered "already in mem0" from the pre-reset snapshot."""
    scope = _scope()
    event = _event(scope, "I keep three beehives on the roof.")
    first = StoreProvider(Mem0Store(data_dir))
    try:
        await first.record_event(event)
    finally:
        await first.aclose()
    adapter = StoreProvider(Mem0Store(data_dir))  # the store is listed afresh
    try:
        memory = await adapter.store._native(scope)
        store = memory.vector_store
        real_list = store.list
        loop = asyncio.get_running_loop()
        resets = {"n": 0}

        def list_then_reset(*args, **kwargs):
            result = real_list(*args, **kwargs)  # the snapshot still holds the event
            if resets["n"] == 0:
                resets["n"] += 1
                asyncio.run_coroutine_threadsafe(adapter.reset_scope(scope), loop).result(60)
            return result

        store.list = list_then_reset
        try:
            again = await adapter.record_event(event)
        finally:
            store.list = real_list
        assert resets["n"] == 1
        assert again.status == "committed" and again.native_ids
        assert not any("already" in w for w in again.trace.warnings), again.trace.warnings
        assert await _found(adapter, scope, "beehives on the roof") == 1
    finally:
        await adapter.aclose()
