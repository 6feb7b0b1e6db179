"""mem0/simple_rag keep one collection per scope: a person's search filters only that
person's points, and a store written with one shared collection is moved on open with
nothing lost (real mem0 + local Qdrant + MiniLM)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

pytest.importorskip("mem0")

from nanobot_memory_adapters.backends.mem0 import Mem0Store
from nanobot_memory_adapters.backends.mem0.scoped import move_shared, scope_collection
from nanobot_memory_adapters.contract import (
    ContextBudget,
    MemoryEvent,
    MemoryScope,
    Message,
    RetrieveRequest,
)
from nanobot_memory_adapters.store import StoreProvider

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
RUN = "r-scoped"
FACTS = {"alice": ["I live in Lisbon.", "My cat is called Miso."],
         "bob": ["I live in Montevideo.", "I keep bees on the roof.", "I row on Sundays."]}


def _scope(persona: str) -> MemoryScope:
    return MemoryScope(run_id=RUN, persona_id=persona, agent_id="nanobot")


def _event(persona: str, i: int, text: str) -> MemoryEvent:
    return MemoryEvent(event_id=f"{persona}-{i}", run_id=RUN, user_id=persona,
                       agent_id="nanobot", session_id="s1", turn_id=str(i), timestamp=T0,
                       messages=[Message(role="user", content=text)])


def _ask(persona: str, query: str) -> RetrieveRequest:
    return RetrieveRequest(query=query, scope=_scope(persona),
                           budget=ContextBudget(max_tokens=1000))


def _points(memory, collection: str) -> int:
    return memory.vector_store.client.count(collection, exact=True).count


async def test_each_scope_searches_a_collection_of_its_own(data_dir):
    """Without it every search filtered every user's points (Qdrant's local mode checks
    the filter point by point): each scope's points are in its own collection, and the
    shared one stays empty."""
    adapter = StoreProvider(Mem0Store(data_dir))
    try:
        for persona, texts in FACTS.items():
            for i, text in enumerate(texts):
                assert (await adapter.record_event(_event(persona, i, text))).status \
                    == "committed"
        base = await adapter.store._native()
        for persona, texts in FACTS.items():
            memory = await adapter.store._native(_scope(persona))
            name = scope_collection("simple_rag", {"user_id": persona, "run_id": RUN})
            assert memory.vector_store.collection_name == name
            assert _points(memory, name) == len(texts)
        assert _points(base, "simple_rag") == 0
        found = await adapter.retrieve(_ask("alice", "Where do I live?"))
        assert found.items[0].text == "I live in Lisbon."
        assert "Montevideo" not in found.formatted_context
        health = await adapter.health()
        assert health.details["vector_store"]["points"] == 5
        assert health.details["vector_store"]["scope_collections"] == 2
    finally:
        await adapter.aclose()


async def test_a_store_with_one_shared_collection_is_moved_without_losing_a_memory(data_dir):
    """A store as earlier versions wrote it (every scope in ``simple_rag``, written here
    through mem0's own add on that collection) opens with each scope's memories in its
    own collection: the same ids, found by retrieve, a replayed event recognised, the
    shared collection empty; a point that names no scope stays where it was."""
    writer = StoreProvider(Mem0Store(data_dir))
    stored: dict[str, list[str]] = {}
    try:
        shared = await writer.store._native()  # the shared collection of earlier versions
        for persona, texts in FACTS.items():
            for i, text in enumerate(texts):
                added = await shared.add([{"role": "user", "content": text}], user_id=persona,
                                         run_id=RUN, infer=False,
                                         metadata={"event_id": f"{persona}-{i}"})
                stored.setdefault(persona, []).extend(r["id"] for r in added["results"])
        await shared.add([{"role": "user", "content": "No run id here."}], user_id="carol",
                         infer=False)
        assert _points(shared, "simple_rag") == 6
    finally:
        await writer.aclose()

    adapter = StoreProvider(Mem0Store(data_dir))
    try:
        base = await adapter.store._native()
        assert _points(base, "simple_rag") == 1  # carol's point names no run: left as it is
        for persona, ids in stored.items():
            memory = await adapter.store._native(_scope(persona))
            listed = await memory.get_all(filters={"user_id": persona, "run_id": RUN})
            assert sorted(r["id"] for r in listed["results"]) == sorted(ids)
        found = await adapter.retrieve(_ask("bob", "Where do I live?"))
        assert found.items[0].text == "I live in Montevideo."
        assert found.items[0].native_id in stored["bob"]
        again = await adapter.record_event(_event("alice", 1, FACTS["alice"][1]))
        assert any("already in mem0" in w for w in again.trace.warnings)
        assert move_shared(base, lambda payload: None) == 0  # nothing left to move
    finally:
        await adapter.aclose()


async def test_two_adapters_of_one_process_share_a_scope_collection(data_dir):
    """The mem0 and simple_rag providers (or two bench units) on one path: a scope's
    writes through one are found through the other."""
    first, second = StoreProvider(Mem0Store(data_dir)), StoreProvider(Mem0Store(data_dir))
    try:
        persona = f"p-{uuid.uuid4().hex[:6]}"
        await first.record_event(_event(persona, 0, "My sister Ana lives in Porto."))
        found = await second.retrieve(_ask(persona, "Where does my sister live?"))
        assert found.items and "Porto" in found.items[0].text
    finally:
        await first.aclose()
        await second.aclose()
