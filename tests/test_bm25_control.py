"""The bm25 lexical control: the reusable contract suite, and a ranking that is BM25's
(a keyword match beats recency, unlike full_history)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from nanobot_memory_adapters.contract import (
    ContextBudget,
    MemoryEvent,
    MemoryScope,
    Message,
    RetrieveRequest,
)
from nanobot_memory_adapters.testing import ContractSuite, SuiteTarget

pytest.importorskip("bm25s")
from nanobot_memory_adapters.conditions.bm25 import Bm25
from nanobot_memory_adapters.store import StoreProvider


class TestBm25(ContractSuite):
    @pytest.fixture
    def contract_target(self, tmp_path):
        async def make():
            return StoreProvider(Bm25(tmp_path / "bm25.sqlite3"))

        async def make_failing():
            blocker = tmp_path / "not-a-directory"
            blocker.write_text("x")
            return StoreProvider(Bm25(blocker / "store" / "bm25.sqlite3"))

        return SuiteTarget(make=make, make_failing=make_failing)


async def test_bm25_ranks_by_terms_not_by_recency(tmp_path):
    adapter = StoreProvider(Bm25(tmp_path / "bm25.sqlite3"))
    scope = MemoryScope(run_id="r", persona_id="p", agent_id="a")
    await adapter.setup_scope(scope)
    texts = ["My sister's dog is called Biscuit.", "I baked bread on Sunday.",
             "The train to Lisbon was late.", "I watched a film about glaciers."]
    t0 = datetime(2023, 1, 1, tzinfo=UTC)
    for i, text in enumerate(texts):
        await adapter.record_event(MemoryEvent(
            event_id=f"e{i}", run_id="r", user_id="p", agent_id="a", session_id="s",
            turn_id=str(i), timestamp=t0 + timedelta(hours=i),
            messages=[Message(role="user", content=text)]))
    result = await adapter.retrieve(RetrieveRequest(
        query="What is my sister's dog called?", scope=scope,
        budget=ContextBudget(max_tokens=2000)))
    # the oldest turn is the only one sharing terms with the query: first; the rest
    # follow with score 0, newest first (full_history would put e3 first)
    assert [i.source_event_ids for i in result.items] == [["e0"], ["e3"], ["e2"], ["e1"]]
    assert result.items[0].score is not None and result.items[0].score > 0
    assert [i.score for i in result.items[1:]] == [0.0, 0.0, 0.0]
    assert result.formatted_context.index("Biscuit") < result.formatted_context.index("glacier")
    # stemming: "watched ... glaciers" is found by "watching a glacier"
    hit = await adapter.retrieve(RetrieveRequest(
        query="Was I watching a glacier?", scope=scope,
        budget=ContextBudget(max_tokens=2000)))
    assert hit.items[0].source_event_ids == ["e3"] and hit.items[0].score > 0
    assert result.trace.backend_name == "bm25"
    await adapter.aclose()


def test_bm25_declares_no_optional_capability(tmp_path):
    """Declared data, not read from the methods present: bm25 offers none of the optional
    capabilities (full_history's store: an insert per turn, readable at once)."""
    from nanobot_memory_adapters.contract import capabilities_of, undelivered_capabilities

    adapter = StoreProvider(Bm25(tmp_path / "bm25.sqlite3"))
    assert adapter.info.capabilities == ()
    assert adapter.info.consistency_model == "immediate"
    assert capabilities_of(adapter) == [] == undelivered_capabilities(adapter)


def _turn(i: int, text: str, user: str = "p", hours: int | None = None) -> MemoryEvent:
    t0 = datetime(2023, 1, 1, tzinfo=UTC)
    return MemoryEvent(
        event_id=f"{user}-e{i}", run_id="r", user_id=user, agent_id="a", session_id="s",
        turn_id=str(i), timestamp=t0 + timedelta(hours=i if hours is None else hours),
        messages=[Message(role="user", name=user, content=text)])


async def _ask(adapter: StoreProvider, scope: MemoryScope, query: str):
    result = await adapter.retrieve(RetrieveRequest(
        query=query, scope=scope, budget=ContextBudget(max_tokens=2000)))
    return [(i.native_id, i.score) for i in result.items], result.raw["index_updated"]


async def test_bm25_index_per_scope_updated_only_when_its_scope_changes(tmp_path):
    """A scope's index is kept between retrieves: another scope's writes do not rebuild
    it; a write to the scope, another connection's commit and a reset do, and the ranking
    after each equals one built from scratch over the scope's turns."""
    words = ["dog", "bread", "train", "glacier", "sister", "film", "Lisbon", "Sunday"]
    adapter = StoreProvider(Bm25(tmp_path / "bm25.sqlite3"))
    scope = MemoryScope(run_id="r", persona_id="p", agent_id="a")
    other = MemoryScope(run_id="r", persona_id="q", agent_id="a")
    await adapter.setup_scope(scope)
    for i in range(12):
        await adapter.record_event(_turn(i, f"my {words[i % 8]} and the {words[(i * 3) % 8]}"))
    query = "the dog and my sister in Lisbon"
    first, updated = await _ask(adapter, scope, query)
    assert updated and len(first) == 12
    again, updated = await _ask(adapter, scope, query)
    assert (again, updated) == (first, False)
    await adapter.record_event(_turn(0, "a dog in Lisbon", user="q"))  # another scope
    assert (await _ask(adapter, scope, query)) == (first, False)
    # a turn of this scope, older than the rest: read alone, placed in store order
    await adapter.record_event(_turn(99, "my sister's dog went to Lisbon", hours=-5))
    after_write, updated = await _ask(adapter, scope, query)
    assert updated and after_write[0][0] == "p-e99" and len(after_write) == 13

    async def from_scratch() -> list:
        fresh = StoreProvider(Bm25(tmp_path / "bm25.sqlite3"))
        try:
            ranked, updated = await _ask(fresh, scope, query)
            assert updated
            return ranked
        finally:
            await fresh.aclose()

    assert after_write == await from_scratch()
    # another connection's commit to the file: the scope is read again
    writer = StoreProvider(Bm25(tmp_path / "bm25.sqlite3"))
    await writer.record_event(_turn(100, "Lisbon, Lisbon, my sister and her dog"))
    await writer.aclose()
    elsewhere, updated = await _ask(adapter, scope, query)
    assert updated and elsewhere[0][0] == "p-e100" and elsewhere == await from_scratch()
    await adapter.reset_scope(scope)
    assert (await _ask(adapter, scope, query)) == ([], True)
    assert len((await _ask(adapter, other, query))[0]) == 1
    await adapter.aclose()
