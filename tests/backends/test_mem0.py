"""mem0 adapter: the contract suite (infer=False, infer=True via the LLM double, simple_rag)
plus mem0-specific checks, all on real mem0 + local Qdrant + real MiniLM embeddings."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from nanobot_memory_adapters.backends.mem0 import (
    LLMSettings,
    Mem0Config,
    Mem0Store,
    simple_rag_store,
)
from nanobot_memory_adapters.config import ConfigError
from nanobot_memory_adapters.contract import (
    AdapterError,
    AdapterMode,
    ContextBudget,
    MemoryEvent,
    MemoryScope,
    RetrieveRequest,
    capabilities_of,
    supports,
)
from nanobot_memory_adapters.formatting import opens_item
from nanobot_memory_adapters.registry import load_provider
from nanobot_memory_adapters.store import StoreProvider
from nanobot_memory_adapters.testing import ContractSuite, SuiteTarget

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


def _blocked(tmp_path):
    """A data dir under a regular file: Qdrant and SQLite cannot be created there."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    return blocker / "store"


def _llm(double) -> LLMSettings:
    return LLMSettings(base_url=double.base_url, model="double-chat", api_key="test")


# -- the contract suite ----------------------------------------------------------------

class TestMem0InferFalseContract(ContractSuite):
    """``backend: mem0`` with no LLM: infer=False, reported as simple_rag."""

    @pytest.fixture
    def contract_target(self, tmp_path):
        async def make():
            return StoreProvider(Mem0Store(tmp_path / "data"))

        async def make_failing():
            return StoreProvider(Mem0Store(_blocked(tmp_path)))

        return SuiteTarget(make=make, make_failing=make_failing, readiness_timeout_s=5)


class TestMem0InferTrueContract(ContractSuite):
    """``backend: mem0`` with an LLM (the deterministic double over HTTP): infer=True."""

    @pytest.fixture
    def contract_target(self, tmp_path, llm_double):
        config = Mem0Config(llm=_llm(llm_double))

        async def make():
            return StoreProvider(Mem0Store(tmp_path / "data", config))

        async def make_failing():
            return StoreProvider(Mem0Store(_blocked(tmp_path), config))

        return SuiteTarget(make=make, make_failing=make_failing, readiness_timeout_s=5)


class TestSimpleRagContract(ContractSuite):
    @pytest.fixture
    def contract_target(self, tmp_path):
        async def make():
            return StoreProvider(simple_rag_store(tmp_path / "data"))

        async def make_failing():
            return StoreProvider(simple_rag_store(_blocked(tmp_path)))

        return SuiteTarget(make=make, make_failing=make_failing, readiness_timeout_s=5)


# -- helpers --------------------------------------------------------------------------

def _run() -> str:
    return f"r-{uuid.uuid4().hex[:8]}"


def _scope(run: str, persona: str = "alice") -> MemoryScope:
    return MemoryScope(run_id=run, persona_id=persona, agent_id="nanobot")


_turn = 0


def _event(scope: MemoryScope, text: str, assistant: str = "Noted.", **tags) -> MemoryEvent:
    global _turn
    _turn += 1
    return MemoryEvent(
        event_id=f"e{_turn}-{uuid.uuid4().hex[:6]}",
        run_id=scope.run_id,
        user_id=scope.persona_id,
        agent_id=scope.agent_id or "nanobot",
        session_id="s1",
        turn_id=str(_turn),
        timestamp=T0 + timedelta(minutes=_turn),
        messages=[{"role": "user", "content": text}, {"role": "assistant", "content": assistant}],
        **tags,
    )


def _request(scope: MemoryScope, query: str, max_tokens: int = 1000, **kw) -> RetrieveRequest:
    return RetrieveRequest(query=query, scope=scope, budget=ContextBudget(max_tokens=max_tokens),
                           **kw)


@pytest.fixture
async def raw_adapter(data_dir):
    adapter = StoreProvider(Mem0Store(data_dir))
    yield adapter
    await adapter.aclose()


@pytest.fixture
async def infer_adapter(data_dir, llm_double):
    adapter = StoreProvider(Mem0Store(data_dir, Mem0Config(llm=_llm(llm_double))))
    yield adapter
    await adapter.aclose()


# -- identity and configuration ---------------------------------------------------------

async def test_no_llm_reports_simple_rag_condition(data_dir):
    adapter = load_provider({"backend": "mem0"}, data_dir=data_dir)
    try:
        assert adapter.backend_name == "simple_rag"
        assert adapter.info.condition_kind == "control"
        assert adapter.store.infer is False
        health = await adapter.health()
        assert health.status == "ok", health
        assert health.condition_kind == "control"
        assert health.details["llm"] == {"configured": False, "infer": False}
        assert health.details["embedder"]["dims"] == 384
        assert health.details["vector_store"]["status"] == "ok"
    finally:
        await adapter.aclose()


async def test_llm_configured_reports_mem0_architecture(data_dir, llm_double):
    adapter = load_provider(
        {"backend": "mem0", "mem0": {"llm": {"base_url": llm_double.base_url, "model": "m"}}},
        data_dir=data_dir,
    )
    try:
        assert adapter.backend_name == "mem0"
        assert adapter.info.condition_kind == "architecture"
        health = await adapter.health()
        assert health.status == "ok", health
        assert health.details["llm"]["status"] == "reachable"
        assert set(health.capabilities) >= {
            "bulk_ingest", "native_mutation", "provenance", "readiness"
        }
    finally:
        await adapter.aclose()


async def test_simple_rag_condition_never_infers(data_dir, llm_double):
    adapter = load_provider({"condition": "simple_rag"}, data_dir=data_dir)
    assert isinstance(adapter, StoreProvider) and isinstance(adapter.store, Mem0Store)
    assert adapter.store.infer is False and adapter.info.condition_kind == "control"
    await adapter.aclose()
    # Even handed a mem0 block with an LLM, the simple_rag store stays infer=False.
    forced = StoreProvider(simple_rag_store(data_dir, Mem0Config(llm=_llm(llm_double))))
    assert forced.store.infer is False and forced.backend_name == "simple_rag"
    await forced.aclose()


def test_config_errors_are_actionable(data_dir):
    with pytest.raises(ConfigError, match="unknown setting"):
        load_provider({"backend": "mem0", "mem0": {"topk": 3}}, data_dir=data_dir)
    with pytest.raises(ConfigError, match="reranker"):
        load_provider({"backend": "mem0", "mem0": {"rerank": True}}, data_dir=data_dir)
    with pytest.raises(ConfigError, match="unknown setting"):
        load_provider({"condition": "simple_rag", "simple_rag": {"llm": {}}}, data_dir=data_dir)


async def test_unreachable_llm_gives_retryable_error_and_degraded_health(data_dir):
    adapter = StoreProvider(Mem0Store(data_dir, Mem0Config(
        llm=LLMSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key="k")
    )))
    try:
        health = await adapter.health()
        assert health.status == "degraded"
        scope = _scope(_run())
        with pytest.raises(AdapterError) as info:
            await adapter.record_event(_event(scope, "I live in Oslo."))
        assert info.value.retryable is True
        assert info.value.raw["type"].endswith("LLMError")
    finally:
        await adapter.aclose()


# -- isolation ----------------------------------------------------------------------------

async def test_users_in_the_same_run_never_see_each_other(raw_adapter):
    run = _run()
    alice, bob = _scope(run, "alice"), _scope(run, "bob")
    await raw_adapter.record_event(_event(alice, "My favourite instrument is the theremin."))
    await raw_adapter.record_event(_event(bob, "My favourite instrument is the bagpipe."))
    query = "What is my favourite instrument?"
    a = await raw_adapter.retrieve(_request(alice, query))
    b = await raw_adapter.retrieve(_request(bob, query))
    assert "theremin" in a.formatted_context and "bagpipe" not in a.formatted_context
    assert "bagpipe" in b.formatted_context and "theremin" not in b.formatted_context
    assert {i.metadata["user_id"] for i in a.items} == {"alice"}
    assert {i.metadata["user_id"] for i in b.items} == {"bob"}
    # The native filter always carries user_id AND run_id.
    assert a.trace.native_request["filters"] == {"user_id": "alice", "run_id": run}


async def test_wildcard_ids_are_rejected_before_mem0(raw_adapter):
    with pytest.raises(ValidationError, match="wildcard"):
        MemoryScope(run_id="r1", persona_id="*")
    with pytest.raises(ValidationError, match="wildcard"):
        MemoryScope(run_id="*", persona_id="alice")
    # Even a scope built without validation never reaches mem0.
    forged = MemoryScope.model_construct(run_id="r1", persona_id="*", agent_id=None)
    request = RetrieveRequest.model_construct(
        query="anything", scope=forged, session_id=None,
        budget=ContextBudget(max_tokens=100), scenario=None, context=None, attribute=None,
        filters={},
    )
    with pytest.raises(AdapterError, match=r"wildcard character .* match-all") as info:
        await raw_adapter.retrieve(request)
    assert info.value.raw["field"] == "persona_id"
    with pytest.raises(AdapterError, match="wildcard"):
        await raw_adapter.reset_scope(forged)
    # Whitespace inside an id is fine for the contract but mem0 rejects it: say so first.
    with pytest.raises(AdapterError, match="whitespace"):
        await raw_adapter.retrieve(_request(MemoryScope(run_id="r1", persona_id="a b"), "x"))
    # Request filters may narrow, never widen or re-scope.
    scope = _scope(_run())
    with pytest.raises(AdapterError, match="match-all"):
        await raw_adapter.retrieve(_request(scope, "x", filters={"scenario": "*"}))
    with pytest.raises(AdapterError, match="override the scope"):
        await raw_adapter.retrieve(_request(scope, "x", filters={"user_id": "bob"}))
    # mem0 merges AND conditions into the top level: a nested id would replace the scope's.
    for nested in ({"AND": [{"user_id": "bob"}]}, {"AND": [{"run_id": "r0"}]},
                   {"OR": [{"agent_id": "x"}]}, {"NOT": [{"user_id": "alice"}]}):
        with pytest.raises(AdapterError, match="override the scope"):
            await raw_adapter.retrieve(_request(scope, "x", filters=nested))


async def test_nested_filters_cannot_reach_another_user(raw_adapter):
    run = _run()
    alice, bob = _scope(run, "alice"), _scope(run, "bob")
    await raw_adapter.record_event(_event(bob, "I live in Montevideo."))
    # What mem0 itself does with it (why the adapter refuses it): AND replaces user_id
    # (shown on bob's collection: with a shared store it is a leak).
    memory = await raw_adapter.store._native(bob)
    leaked = await memory.search("Where do I live?", top_k=5, filters={
        "user_id": "alice", "run_id": run, "AND": [{"user_id": "bob"}]})
    assert [r["memory"] for r in leaked["results"]] == ["I live in Montevideo."]
    with pytest.raises(AdapterError, match="override the scope"):
        await raw_adapter.retrieve(
            _request(alice, "Where do I live?", filters={"AND": [{"user_id": "bob"}]}))
    # Non-identity logical filters still pass through to mem0.
    ok = await raw_adapter.retrieve(
        _request(alice, "Where do I live?", filters={"AND": [{"session_id": "s1"}]}))
    sent = ok.trace.native_request["filters"]
    assert sent["AND"] == [{"session_id": "s1"}]
    assert (sent["user_id"], sent["run_id"]) == ("alice", run)
    assert "Montevideo" not in ok.formatted_context


async def test_reset_of_one_scope_leaves_another_intact(raw_adapter):
    run = _run()
    alice, bob = _scope(run, "alice"), _scope(run, "bob")
    other_run = _scope(_run(), "alice")
    w = await raw_adapter.record_event(_event(alice, "I grow chili peppers on my balcony."))
    b = await raw_adapter.record_event(_event(bob, "I grow chili peppers in a greenhouse."))
    await raw_adapter.record_event(_event(other_run, "I grow chili peppers in the garden."))
    receipt = await raw_adapter.reset_scope(alice)
    assert receipt.status == "reset"
    assert "history" in receipt.detail and "delete_all" in receipt.detail
    query = "Where do I grow chili peppers?"
    assert not (await raw_adapter.retrieve(_request(alice, query))).items
    assert "greenhouse" in (await raw_adapter.retrieve(_request(bob, query))).formatted_context
    assert "garden" in (await raw_adapter.retrieve(_request(other_run, query))).formatted_context
    # What mem0's delete_all leaves (the history rows with the old text) goes too; the
    # other scope's history stays
    memory = await raw_adapter.store._native()
    assert await memory.history(w.native_ids[0]) == []
    assert [r["event"] for r in await memory.history(b.native_ids[0])] == ["ADD"]


# -- retrieval mapping --------------------------------------------------------------------

async def test_budget_sets_native_top_k_and_items_keep_native_fields(raw_adapter):
    scope = _scope(_run())
    for city in ("Lisbon", "Kyoto", "Nairobi", "Quito"):
        await raw_adapter.record_event(_event(scope, f"I visited {city} last spring."))
    result = await raw_adapter.retrieve(RetrieveRequest(
        query="Which cities did I visit?", scope=scope,
        budget=ContextBudget(max_tokens=1000, max_items=3),
    ))
    assert result.trace.native_request["top_k"] == 3
    assert result.trace.native_request["threshold"] == 0.1
    assert len(result.items) == 3
    for item in result.items:
        assert item.native_id and item.score is not None and item.created_at and item.updated_at
        assert item.raw["id"] == item.native_id and "hash" in item.raw
        assert item.metadata["session_id"] == "s1" and item.metadata["timestamp"]
    scores = [i.score for i in result.items]
    assert scores == sorted(scores, reverse=True)  # mem0's order kept
    # The turn's time in its day heading; relevance stays in the items and the trace,
    # mem0's storage time in created_at and raw.
    day, first = result.formatted_context.splitlines()[1:3]
    assert day.startswith("### 2024-") and opens_item(first) and not first.startswith("[")
    assert f"{result.items[0].score:.2f}".removeprefix("0") not in first
    assert "stored=" not in result.formatted_context
    # Budget by tokens only: top_k = what 300 tokens can show with compact labels
    # (300 // (LABEL_TOKENS 7 + item_text_tokens 25 + 1) = 9: a verbatim turn is sized by
    # the median LoCoMo turn, so the packer can fill the budget).
    by_tokens = await raw_adapter.retrieve(_request(scope, "cities", max_tokens=300))
    assert by_tokens.trace.native_request["top_k"] == 9


async def test_tags_are_metadata_and_filters(raw_adapter):
    scope = _scope(_run())
    await raw_adapter.record_event(_event(scope, "I drink espresso in the office.",
                                          context="work", scenario="coffee"))
    await raw_adapter.record_event(_event(scope, "I drink green tea at home.", context="personal"))
    work = await raw_adapter.retrieve(_request(scope, "What do I drink?", context="work"))
    assert work.trace.native_request["filters"]["context"] == "work"
    assert work.items and all(i.metadata["context"] == "work" for i in work.items)
    assert work.items[0].metadata["scenario"] == "coffee"
    both = await raw_adapter.retrieve(_request(scope, "What do I drink?"))
    assert {i.metadata["context"] for i in both.items} == {"work", "personal"}


async def test_metadata_tag_mapping_stores_but_does_not_filter(data_dir):
    adapter = StoreProvider(Mem0Store(data_dir, Mem0Config(tag_mapping="metadata")))
    try:
        assert adapter.info.tag_mapping == "metadata"
        scope = _scope(_run())
        await adapter.record_event(_event(scope, "I drink green tea at home.", context="personal"))
        result = await adapter.retrieve(_request(scope, "What do I drink?", context="work"))
        assert "context" not in result.trace.native_request["filters"]
        assert result.items[0].metadata["context"] == "personal"
    finally:
        await adapter.aclose()


async def test_agent_scoped_filters_by_agent_id(data_dir):
    adapter = StoreProvider(Mem0Store(data_dir, Mem0Config(agent_scoped=True)))
    try:
        run = _run()
        a = MemoryScope(run_id=run, persona_id="alice", agent_id="bot-a")
        b = MemoryScope(run_id=run, persona_id="alice", agent_id="bot-b")
        await adapter.record_event(_event(a, "I sail a small catamaran."))
        ra = await adapter.retrieve(_request(a, "What do I sail?"))
        rb = await adapter.retrieve(_request(b, "What do I sail?"))
        assert ra.trace.native_request["filters"] == {
            "user_id": "alice", "run_id": run, "agent_id": "bot-a"
        }
        assert "catamaran" in ra.formatted_context and not rb.items
        with pytest.raises(AdapterError, match="agent_id is missing"):
            await adapter.retrieve(_request(MemoryScope(run_id=run, persona_id="alice"), "x"))
    finally:
        await adapter.aclose()


# -- infer=True (mem0 extraction through the LLM double) ----------------------------------

async def test_infer_true_extracts_with_one_json_call(infer_adapter, llm_double):
    scope = _scope(_run())
    before = len(llm_double.chat_requests())
    receipt = await infer_adapter.record_event(
        _event(scope, "I live in Zanzibar. My pet axolotl is called Quetzal.")
    )
    calls = llm_double.chat_requests()[before:]
    assert len(calls) == 1
    call = calls[0]
    assert call.response_format == {"type": "json_object"}
    assert "## New Messages" in call.user and "## Observation Date" in call.user
    assert len(receipt.native_ids) == 2
    result = await infer_adapter.retrieve(_request(scope, "Where does the user live?"))
    texts = [i.text for i in result.items]
    assert "User lives in Zanzibar." in texts
    assert "User's pet axolotl is called Quetzal." in texts
    assert all(i.metadata["attributed_to"] == "user" for i in result.items)
    # The assistant's "Noted." is not a memory with extraction (it is with infer=False).
    assert not any(t == "Noted." for t in texts)
    assert result.trace.native_request["filters"] == {"user_id": "alice", "run_id": scope.run_id}


async def test_openrouter_key_in_env_never_redirects_extraction(data_dir, llm_double,
                                                                monkeypatch):
    """mem0's OpenAI LLM switches to openrouter.ai whenever OPENROUTER_API_KEY is set; the
    adapter keeps extraction on the configured endpoint with the configured key."""
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-must-not-be-used")
    adapter = StoreProvider(Mem0Store(data_dir, Mem0Config(llm=_llm(llm_double))))
    try:
        scope = _scope(_run())
        before = len(llm_double.chat_requests())
        receipt = await adapter.record_event(_event(scope, "I live in Zanzibar."))
        assert len(llm_double.chat_requests()) == before + 1 and receipt.native_ids
        client = adapter.store._memory.llm.client
        assert str(client.base_url).rstrip("/") == llm_double.base_url.rstrip("/")
        assert client.api_key == "test"
    finally:
        await adapter.aclose()


async def test_bulk_ingest_uses_one_multi_message_add(infer_adapter, raw_adapter, llm_double):
    assert supports(infer_adapter, "bulk_ingest")
    scope = _scope(_run())
    events = [_event(scope, f"I own {n} bicycles.") for n in ("two", "three")]
    events.append(_event(scope, "I cycle to work.", context="work"))  # other tags: new call
    # With extraction the default is mem0's own evaluation batch: 2 messages per add,
    # so each two-message event is its own call.
    assert infer_adapter.store.batch_messages == 2 and raw_adapter.store.batch_messages == 1
    before = len(llm_double.chat_requests())
    default = await infer_adapter.record_events(events)
    assert len(llm_double.chat_requests()) - before == 3
    assert [r.status for r in default] == ["committed"] * 3
    await infer_adapter.reset_scope(scope)
    infer_adapter.store.config.bulk_max_messages = 4
    before = len(llm_double.chat_requests())
    receipts = await infer_adapter.record_events(events)
    assert len(llm_double.chat_requests()) - before == 2
    assert [r.event_id for r in receipts] == [e.event_id for e in events]
    assert all(r.status == "committed" for r in receipts)
    assert receipts[0].native_ids == receipts[1].native_ids  # one batch, one extraction
    # infer=False: each event gets exactly the ids of its own messages.
    raw_receipts = await raw_adapter.record_events(events)
    assert [len(r.native_ids) for r in raw_receipts] == [2, 2, 2]
    assert len({i for r in raw_receipts for i in r.native_ids}) == 6
    # ...and each stored message names exactly its own event (one event per add)
    listed = await raw_adapter.provenance(scope)
    assert not [m for m in listed["memories"] if m["metadata"].get("event_ids")]
    by_event = {e.event_id: 0 for e in events}
    for m in listed["memories"]:
        by_event[m["metadata"]["event_id"]] += 1
    assert by_event == {e.event_id: 2 for e in events}
    raw_adapter.store.config.bulk_max_messages = 40  # a configured batch: one add, shared metadata
    await raw_adapter.reset_scope(scope)
    await raw_adapter.record_events(events[:2])
    listed = await raw_adapter.provenance(scope)
    batch = [m for m in listed["memories"] if m["metadata"].get("event_ids")]
    assert batch and batch[0]["metadata"]["event_ids"] == [events[0].event_id, events[1].event_id]


# -- capabilities ---------------------------------------------------------------------------

async def test_readiness_is_immediate(raw_adapter):
    assert supports(raw_adapter, "readiness")
    state = await raw_adapter.wait_until_ready(_scope(_run()), 0.01)
    assert state.status == "ready" and state.pending_count == 0


async def test_native_mutation_and_provenance_stay_in_scope(raw_adapter):
    assert supports(raw_adapter, "native_mutation")
    assert supports(raw_adapter, "provenance")
    run = _run()
    alice, bob = _scope(run, "alice"), _scope(run, "bob")
    receipt = await raw_adapter.record_event(_event(alice, "I drive a red car."))
    mid = receipt.native_ids[0]
    with pytest.raises(AdapterError, match="does not exist in scope"):
        await raw_adapter.native_mutation(bob, "delete", {"native_id": mid})
    with pytest.raises(AdapterError, match="does not exist in scope"):
        await raw_adapter.provenance(bob, mid)
    await raw_adapter.set_mode(AdapterMode(read_only=True, reason="test_session"))
    gated = await raw_adapter.native_mutation(alice, "update", {"native_id": mid, "text": "x"})
    assert gated["status"] == "skipped_read_only"
    await raw_adapter.set_mode(AdapterMode(read_only=False, reason="done"))
    updated = await raw_adapter.native_mutation(
        alice, "update", {"native_id": mid, "text": "I drive a blue car."}
    )
    assert updated["status"] == "committed"
    prov = await raw_adapter.provenance(alice, mid)
    assert prov["memory"]["memory"] == "I drive a blue car."
    assert [h["event"] for h in prov["history"]] == ["ADD", "UPDATE"]
    history = await raw_adapter.native_mutation(alice, "history", {"native_id": mid})
    assert history["history"][-1]["old_memory"] == "I drive a red car."
    await raw_adapter.native_mutation(alice, "delete", {"native_id": mid})
    result = await raw_adapter.retrieve(_request(alice, "What car do I drive?"))
    assert mid not in [i.native_id for i in result.items]
    with pytest.raises(AdapterError, match=r"no native operation 'merge'"):
        await raw_adapter.native_mutation(alice, "merge", {"native_id": mid})


async def test_one_qdrant_client_per_path_shared_and_closed(data_dir):
    a = StoreProvider(Mem0Store(data_dir))
    b = StoreProvider(simple_rag_store(data_dir))
    c = StoreProvider(Mem0Store(data_dir, Mem0Config(collection_name="other")))
    scope = _scope(_run())
    await a.setup_scope(scope)
    await b.setup_scope(scope)
    await c.setup_scope(scope)
    from nanobot_memory_adapters.backends.mem0.qdrant import QDRANT

    key = str((data_dir / "mem0" / "qdrant").resolve())
    assert QDRANT.users(key) == 3
    assert a.store._memory.vector_store.client is b.store._memory.vector_store.client
    await a.record_event(_event(scope, "I play the cello."))
    await a.aclose()
    # b shares the path and collection ("simple_rag"): it still works and sees a's write.
    assert "cello" in (await b.retrieve(_request(scope, "What do I play?"))).formatted_context
    # c uses another collection on the same client: nothing there.
    assert not (await c.retrieve(_request(scope, "What do I play?"))).items
    await b.aclose()
    await c.aclose()
    await c.aclose()  # twice is fine
    assert not QDRANT.is_open(key)
    # The lock is released: a fresh client on the same path opens.
    from qdrant_client import QdrantClient

    QdrantClient(path=key).close()


async def test_concurrent_writes_and_searches_on_a_shared_client(data_dir):
    import asyncio

    a, b = StoreProvider(Mem0Store(data_dir)), StoreProvider(simple_rag_store(data_dir))
    try:
        scopes = [_scope(_run(), f"p{i}") for i in range(4)]
        writes = [x.record_event(_event(s, f"I keep {n} goldfish."))
                  for s in scopes for n in ("two", "five") for x in (a, b)]
        reads = [a.retrieve(_request(s, "How many goldfish?")) for s in scopes]
        await asyncio.gather(*writes, *reads)
        await asyncio.gather(*(a.reset_scope(s) for s in scopes[:2]))
        for i, s in enumerate(scopes):
            listed = (await b.provenance(s))["memories"]
            assert len(listed) == (0 if i < 2 else 8), (i, listed)
    finally:
        await a.aclose()
        await b.aclose()


def test_capabilities_declared(data_dir):
    # no LLM: simple_rag, which embeds the turns themselves
    adapter = StoreProvider(Mem0Store(data_dir))
    assert set(capabilities_of(adapter)) == {
        "bulk_ingest", "readiness", "native_mutation", "provenance", "native_query",
        "ingest_lookahead",
    }


async def test_native_query_diagnostics_are_traced_and_stay_in_scope(data_dir):
    """mem0's diagnostics (seed §2.2): the scope's memory count and one memory's history,
    each traced; another scope's memory is refused."""
    traces = []

    class Sink:
        def emit(self, trace, **extra):
            traces.append(trace)

    adapter = StoreProvider(Mem0Store(data_dir), trace_sink=Sink())
    try:
        run = _run()
        alice, bob = _scope(run, "alice"), _scope(run, "bob")
        first = await adapter.record_event(_event(alice, "I drive a red car."))
        second = await adapter.record_event(_event(alice, "I keep two cats."))
        mid = first.native_ids[0]
        count = await adapter.native_query(alice, "memory_count")
        assert count["memory_count"] == len(first.native_ids) + len(second.native_ids) > 1
        assert (await adapter.native_query(bob, "memory_count"))["memory_count"] == 0
        # more memories than the listing's page: counted, not capped at the page size
        paged = await adapter.native_query(alice, "memory_count", top_k=1)
        assert paged["memory_count"] == count["memory_count"]
        history = await adapter.native_query(alice, "history", native_id=mid)
        assert [h["event"] for h in history["history"]] == ["ADD"]
        with pytest.raises(AdapterError, match="does not exist in scope"):
            await adapter.native_query(bob, "history", native_id=mid)
        with pytest.raises(AdapterError, match="unknown diagnostic"):
            await adapter.native_query(alice, "What car do I drive?")
        queried = [t for t in traces if t.operation == "native_query"]
        assert [t.native_operation for t in queried] == [
            "AsyncMemory.get_all", "AsyncMemory.get_all", "AsyncMemory.get_all",
            "AsyncMemory.history"]
        assert queried[-1].native_ids == [mid] and queried[0].scope == alice.key
    finally:
        await adapter.aclose()


async def test_items_show_when_the_turn_happened_not_only_when_stored(tmp_path):
    """mem0's created_at is ingestion time; the turn's own time comes back as event_at."""
    from datetime import UTC, datetime

    import nanobot_memory_adapters as nma

    adapter = nma.load_provider({"condition": "simple_rag"}, data_dir=tmp_path)
    try:
        scope = nma.MemoryScope(run_id="r-time", persona_id="alice")
        await adapter.record_event(nma.MemoryEvent(
            event_id="t1", run_id="r-time", user_id="alice", agent_id="bot", session_id="s",
            turn_id="1", timestamp=datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
            messages=[{"role": "user", "content": "I adopted a beagle named Biscuit."}]))
        result = await adapter.retrieve(nma.RetrieveRequest(
            query="my dog", scope=scope, budget=nma.ContextBudget(max_tokens=400)))
        assert result.items[0].event_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
        assert result.items[0].created_at != result.items[0].event_at
        # the turn's day and time (its heading), not storage
        day, first = result.formatted_context.splitlines()[1:3]
        assert day == "### 2023-05-08 13:56" and not first.startswith("[")
    finally:
        await adapter.aclose()


# -- writes never lie ---------------------------------------------------------------------

async def test_cut_extraction_answer_is_a_failed_retryable_write(data_dir, llm_double):
    """A model answer cut at max_tokens is not JSON; mem0 logs it and returns nothing. The
    adapter must not call that committed: record_event raises a retryable AdapterError,
    bulk writes report a failed receipt per event, health says writes are failing."""
    tiny = _llm(llm_double).model_copy(update={"max_tokens": 6})
    adapter = StoreProvider(Mem0Store(data_dir, Mem0Config(llm=tiny)))
    try:
        scope = _scope(_run())
        event = _event(scope, "I live in Zanzibar and my axolotl is called Quetzal.")
        with pytest.raises(AdapterError) as caught:
            await adapter.record_event(event)
        assert caught.value.retryable
        assert "Error parsing extraction response" in str(caught.value.raw["mem0_log"])
        assert caught.value.raw["event_ids"] == [event.event_id]
        assert llm_double.chat_requests()[-1].body["max_tokens"] == 6
        receipts = await adapter.record_events(
            [_event(scope, "I own two bicycles."), _event(scope, "I cycle to work.")]
        )
        assert [r.status for r in receipts] == ["failed", "failed"]
        assert all(r.retryable and not r.accepted for r in receipts)
        assert all(r.trace.status == "failed" for r in receipts)
        health = await adapter.health()
        assert health.status == "degraded"
        assert health.details["failed_writes"]["count"] == 3
        assert any("failed since start" in w for w in health.warnings)
        # Nothing was stored, and a working model afterwards commits the retried event.
        adapter.llm = _llm(llm_double)
        adapter.store._memory.llm.config.max_tokens = 2000
        receipt = await adapter.record_event(event)
        assert receipt.status == "committed" and receipt.native_ids
        assert (await adapter.health()).status == "ok"
    finally:
        await adapter.aclose()


async def test_an_extraction_that_finds_nothing_stays_committed(infer_adapter):
    """The double extracts nothing from a one-word user message: a true empty result is
    committed (no retry) with a warning and says it stored nothing, in record_event and in
    record_events; a turn with a fact does not."""
    scope = _scope(_run())
    receipt = await infer_adapter.record_event(_event(scope, "Okay."))
    assert receipt.status == "committed" and not receipt.native_ids
    assert receipt.stored_nothing and receipt.accepted
    assert "extracted no new memory" in " ".join(receipt.trace.warnings)
    [bulk] = await infer_adapter.record_events([_event(scope, "Sure.")])
    assert bulk.status == "committed" and bulk.stored_nothing
    assert "extracted no new memory" in " ".join(bulk.trace.warnings)
    kept = await infer_adapter.record_event(_event(scope, "My cat is called PEPPER."))
    assert kept.native_ids and not kept.stored_nothing


async def test_one_failed_batch_does_not_fail_the_others(infer_adapter):
    """A provider rejection of one batch (the double's fail marker) fails that batch's
    events only; the batches before and after it are committed."""
    scope = _scope(_run())
    events = [
        _event(scope, "I own two bicycles."),
        _event(scope, "My locker code is [llm-double:fail] today."),
        _event(scope, "I cycle to work every day."),
    ]
    receipts = await infer_adapter.record_events(events)
    assert [r.status for r in receipts] == ["committed", "failed", "committed"]
    assert receipts[1].error and receipts[1].error["operation"] == "record_events"


async def test_items_name_the_events_they_derive_from(infer_adapter, raw_adapter):
    scope = _scope(_run())
    event = _event(scope, "I live in Zanzibar.")
    await infer_adapter.record_event(event)
    result = await infer_adapter.retrieve(RetrieveRequest(
        query="Where do I live?", scope=scope, budget=ContextBudget(max_tokens=500)))
    assert result.items and all(i.source_event_ids == [event.event_id] for i in result.items)
    assert result.shown == list(range(len(result.items)))
    batch = [_event(scope, "I own a kayak."), _event(scope, "I paddle on Sundays.")]
    await raw_adapter.record_events(batch)
    result = await raw_adapter.retrieve(RetrieveRequest(
        query="kayak", scope=scope, budget=ContextBudget(max_tokens=500)))
    kayak = next(i for i in result.items if "kayak" in i.text)
    assert kayak.source_event_ids == [batch[0].event_id]  # verbatim: its own turn only


async def test_a_replayed_event_of_a_batched_add_is_not_stored_twice(infer_adapter, llm_double):
    """With extraction two turns go into one mem0 add; the second is named only in the
    batch's ``event_ids``. A crash before the outbox heard back replays it on its own:
    mem0 is asked for it there too, and it is not extracted again."""
    scope = _scope(_run())
    batch = [e.model_copy(update={"messages": e.messages[:1]}) for e in (  # 1 message each
        _event(scope, "I keep three beehives on the roof."),
        _event(scope, "My sister Ana lives in Porto."))]
    receipts = await infer_adapter.record_events(batch)
    assert all(r.status == "committed" for r in receipts)
    listed = await infer_adapter.provenance(scope)
    before_memories = len(listed["memories"])
    assert before_memories
    before = len(llm_double.chat_requests())
    again = await infer_adapter.record_event(batch[1])
    assert again.status == "committed" and again.native_ids
    assert any("already in mem0" in w for w in again.trace.warnings)
    assert len(llm_double.chat_requests()) == before  # no second extraction
    assert len((await infer_adapter.provenance(scope))["memories"]) == before_memories


async def test_a_replayed_event_is_not_stored_twice(raw_adapter, infer_adapter, llm_double):
    """A process killed after mem0 stored a turn but before the outbox heard back replays
    it: the adapter asks mem0 (get_all filtered by event_id) and does not add it again."""
    for adapter in (raw_adapter, infer_adapter):
        scope = _scope(_run())
        event = _event(scope, "I keep three beehives on the roof.")
        first = await adapter.record_event(event)
        assert first.status == "committed" and first.native_ids
        before = len(llm_double.chat_requests())
        again = await adapter.record_event(event)
        assert again.status == "committed"
        assert sorted(again.native_ids) == sorted(first.native_ids)
        assert any("already in mem0" in w for w in again.trace.warnings)
        assert len(llm_double.chat_requests()) == before  # no second extraction
        listed = await adapter.provenance(scope)
        assert len(listed["memories"]) == len(first.native_ids)
        other = await adapter.record_event(_event(scope, "I also keep a wasp hotel."))
        assert other.status == "committed" and not set(other.native_ids) & set(first.native_ids)


async def test_a_replayed_bulk_write_adds_only_what_mem0_does_not_hold(
    raw_adapter, infer_adapter, llm_double
):
    """A session recorded again with ``record_events`` (a bench unit resumed after a
    crash cut its session short) stores each turn once: the events mem0 holds are
    answered from its ``get_all``, only the missing ones are added."""
    for adapter in (raw_adapter, infer_adapter):
        scope = _scope(_run())
        events = [e.model_copy(update={"messages": e.messages[:1]}) for e in (
            _event(scope, "I keep three beehives on the roof."),
            _event(scope, "My sister Ana lives in Porto."),
            _event(scope, "I paddle a kayak on Sundays."),
            _event(scope, "I bake rye bread on Fridays."))]
        first = await adapter.record_events(events[:2])  # the crash came after these
        assert all(r.status == "committed" and r.native_ids for r in first)
        held = len((await adapter.provenance(scope))["memories"])
        before = len(llm_double.chat_requests())
        again = await adapter.record_events(events)
        assert [r.status for r in again] == ["committed"] * 4
        for old, new in zip(first, again[:2], strict=True):
            assert sorted(new.native_ids) == sorted(old.native_ids)
            assert any("already in mem0" in w for w in new.trace.warnings)
        assert all(r.native_ids and not any("already" in w for w in r.trace.warnings)
                   for r in again[2:])
        added = len((await adapter.provenance(scope))["memories"]) - held
        assert added == len({i for r in again[2:] for i in r.native_ids})  # a batch shares
        if adapter is infer_adapter:  # one extraction for the two new turns, none for the old
            assert len(llm_double.chat_requests()) == before + 1


async def test_the_replay_check_does_not_scan_the_store_per_turn(raw_adapter):
    """Ingest stays linear in history: the scope is listed once (its first write), never
    once per turn; a replay is still recognised, from a fresh adapter (a new process)
    too, and a reset makes the scope's events new again."""
    scope = _scope(_run())
    memory = await raw_adapter.store._native(scope)
    store = memory.vector_store
    calls = {"list": 0, "get_all": 0}
    real_list, real_get_all = store.list, memory.get_all

    def counting_list(*args, **kwargs):
        calls["list"] += 1
        return real_list(*args, **kwargs)

    async def counting_get_all(*args, **kwargs):
        calls["get_all"] += 1
        return await real_get_all(*args, **kwargs)

    store.list, memory.get_all = counting_list, counting_get_all
    try:
        events = [_event(scope, f"turn {i}: I water the ferns on day {i}.") for i in range(6)]
        for event in events[:3]:
            assert (await raw_adapter.record_event(event)).status == "committed"
        await raw_adapter.record_events(events[3:])
        assert calls["get_all"] == 0 and calls["list"] <= 1, calls
        again = await raw_adapter.record_event(events[1])
        assert any("already in mem0" in w for w in again.trace.warnings)
        assert calls["get_all"] == 0 and calls["list"] <= 1, calls
    finally:
        store.list, memory.get_all = real_list, real_get_all
    await raw_adapter.reset_scope(scope)
    renewed = await raw_adapter.record_event(events[0])
    assert renewed.native_ids and not any("already" in w for w in renewed.trace.warnings)


async def test_a_replay_is_recognised_by_a_new_adapter_on_the_same_store(data_dir):
    """The index of stored events is rebuilt from mem0's store, not carried in memory
    only: an adapter opened after the first one closed (its Qdrant handle, and the index
    kept in it, closed too; as in a restarted process) still finds the event."""
    from nanobot_memory_adapters.backends.mem0.qdrant import QDRANT

    scope = _scope(_run())
    event = _event(scope, "I keep three beehives on the roof.")
    first = StoreProvider(Mem0Store(data_dir))
    try:
        stored = await first.record_event(event)
    finally:
        await first.aclose()
    assert not QDRANT.is_open(first.store.qdrant_path)  # nothing of the first one is left
    second = StoreProvider(Mem0Store(data_dir))
    try:
        again = await second.record_event(event)
    finally:
        await second.aclose()
    assert sorted(again.native_ids) == sorted(stored.native_ids)
    assert any("already in mem0" in w for w in again.trace.warnings)


def test_a_long_query_is_embedded_each_time_and_never_kept():
    """The query cache keeps short questions only: a long text (a pasted document) is
    passed to mem0's embedder every time and takes no room in the cache."""
    from nanobot_memory_adapters.backends.mem0 import embed_cache

    calls: list[str] = []

    class Embedder:  # counts what reaches the wrapped embedder
        def embed(self, text, memory_action=None):
            calls.append(text)
            return [float(len(text))] * 4

    embed_cache.clear()
    proxy = embed_cache.CachedQueryEmbedder(Embedder(), "counting")
    long_text = "What did I say about the beehives? " * 100
    short = "Where does my sister live?"
    for _ in range(2):
        assert proxy.embed(long_text, "search") == [float(len(long_text))] * 4
        assert proxy.embed(short, "search") == [float(len(short))] * 4
    assert calls == [long_text, short, long_text]
    assert ("counting", long_text) not in embed_cache._cache
    embed_cache.clear()


async def test_a_question_asked_again_is_embedded_once_with_the_same_results(data_dir):
    """The same question at every test point (and in every unit of a run) is embedded
    once per (model, text) in a process; the results are those without the cache: the
    same ids and order, the same scores (up to the local Qdrant's float noise, which it
    shows with or without the cache)."""
    from nanobot_memory_adapters.backends.mem0 import embed_cache

    embed_cache.clear()
    scope = _scope(_run())
    # two units of one run
    adapters = [StoreProvider(Mem0Store(data_dir)), StoreProvider(Mem0Store(data_dir))]
    try:
        for text in ("I keep three beehives on the roof.", "My sister Ana lives in Porto.",
                     "I paddle a kayak on Sundays."):
            await adapters[0].record_event(_event(scope, text))
        memories = [await a.store._native() for a in adapters]
        proxy = memories[0].embedding_model
        inner = getattr(proxy, "_embedder", proxy)  # the embedder mem0 configured
        calls: list[tuple[str, object]] = []
        real_embed = inner.embed

        def counting(text, memory_action=None):
            calls.append((text, memory_action))
            return real_embed(text, memory_action)

        inner.embed = counting
        question = "Where does my sister live?"
        cached = [await a.retrieve(_request(scope, question)) for a in adapters * 2]
        assert [c for c in calls if c[1] == "search"] == [(question, "search")]
        (await adapters[0].store._native(scope)).embedding_model = inner  # without the cache
        plain = await adapters[0].retrieve(_request(scope, question))
        assert len(calls) == 2
        for result in cached:  # embedded Qdrant's own scores wobble by ~1e-8 call to call
            assert [i.native_id for i in result.items] == [i.native_id for i in plain.items]
            assert [i.score for i in result.items] == pytest.approx(
                [i.score for i in plain.items], abs=1e-6)
        assert plain.items and "Porto" in plain.items[0].text
    finally:
        for adapter in adapters:
            await adapter.aclose()


_WRITER = """
import asyncio, sys, time
from datetime import UTC, datetime
from nanobot_memory_adapters.backends.mem0 import simple_rag_store
from nanobot_memory_adapters.contract import MemoryEvent
from nanobot_memory_adapters.store import StoreProvider

async def main():
    adapter = StoreProvider(simple_rag_store(sys.argv[1]))
    for i, text in enumerate(sys.argv[2:]):
        receipt = await adapter.record_event(MemoryEvent(
            event_id=f"k{i}", run_id="killed", user_id="alice", agent_id="nanobot",
            session_id="s1", turn_id=str(i), timestamp=datetime(2024, 5, 8, tzinfo=UTC),
            messages=[{"role": "user", "content": text}]))
        assert receipt.status == "committed", receipt
    print("stored", flush=True)
    time.sleep(600)

asyncio.run(main())
"""


@pytest.mark.servers
async def test_mem0s_files_commit_through_a_wal_and_survive_a_kill(data_dir):
    """mem0's history and the local Qdrant's storage are put in WAL mode, where a new
    connection still syncs every commit (synchronous FULL); what a killed process
    committed is recovered from the log by the next one."""
    import select
    import signal
    import sqlite3
    import subprocess
    import sys

    facts = ["I play the cello.", "My sister lives in Lyon.", "I am allergic to cats."]
    errors = data_dir.parent / "writer.err"
    with errors.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(data_dir), *facts],
                                stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        assert proc.stdout is not None
        ready = select.select([proc.stdout], [], [], 120)[0]
        line = proc.stdout.readline() if ready else ""
        assert line.strip() == "stored", (line, errors.read_text()[-2000:])
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    history = data_dir / "mem0" / "history-simple_rag.db"
    files = [history,
             *sorted((data_dir / "mem0" / "qdrant").glob("collection/*/storage.sqlite"))]
    assert len(files) >= 2 and all(f.exists() for f in files), files
    for f in files:
        with sqlite3.connect(f) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal", f
            assert db.execute("PRAGMA synchronous").fetchone()[0] == 2, f  # FULL
    adapter = StoreProvider(simple_rag_store(data_dir))
    try:
        scope = MemoryScope(run_id="killed", persona_id="alice", agent_id="nanobot")
        shown = (await adapter.retrieve(_request(scope, "What do I play, where does my "
                                                 "sister live, what am I allergic to?"))
                 ).formatted_context
        assert all(fact in shown for fact in facts), shown
        with sqlite3.connect(history) as db:
            assert db.execute("SELECT count(*) FROM history").fetchone()[0] == len(facts)
    finally:
        await adapter.aclose()


def test_wal_is_not_used_where_it_would_not_sync_every_commit(tmp_path, monkeypatch):
    """A SQLite built with a WAL default of NORMAL keeps the rollback journal; a file
    another connection holds keeps its mode without an error."""
    import sqlite3

    from nanobot_memory_adapters.backends.mem0 import journals

    synced, relaxed = tmp_path / "synced.db", tmp_path / "relaxed.db"
    journals.use_wal([synced])
    monkeypatch.setattr(journals, "_synchronous", lambda path: 1)  # NORMAL
    journals.use_wal([relaxed])
    modes = {p.name: sqlite3.connect(p).execute("PRAGMA journal_mode").fetchone()[0]
             for p in (synced, relaxed)}
    assert modes == {"synced.db": "wal", "relaxed.db": "delete"}
    busy = tmp_path / "busy.db"
    holder = sqlite3.connect(busy, isolation_level=None)
    holder.execute("CREATE TABLE t(x)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        journals.use_wal([busy])  # locked: logged, not raised
    finally:
        holder.execute("ROLLBACK")
    assert holder.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    holder.close()


@pytest.mark.parametrize("kind", ["simple_rag", "mem0"])
def test_a_dimension_mismatch_names_the_block_to_fix(kind):
    """The message names the block the user wrote (it said memory.mem0 for simple_rag)."""
    from nanobot_memory_adapters.backends.mem0.config import Mem0Config, SimpleRagConfig
    from nanobot_memory_adapters.backends.mem0.embedder import install_runtime

    model = Mem0Config if kind == "mem0" else SimpleRagConfig
    extra = {"llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}} \
        if kind == "mem0" else {}
    config = model.model_validate({"embedding_dims": 7, **extra})
    with pytest.raises(ValueError, match=rf"set memory\.{kind}\.embedding_dims to 384"):
        install_runtime(object(), config)
