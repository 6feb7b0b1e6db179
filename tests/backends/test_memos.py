"""MemOS adapter against a real MemOS 2.0.33 server (its own venv, Postgres+pgvector, Redis),
started once per session by the launcher; its LLM calls are answered by the LLM double.

The contract suite, then MemOS-specific checks: async adds become retrievable after the
readiness wait, memory groups and native labels survive, tags are a working search
filter, cubes are isolated, reset clears one scope, feedback, and fail-fast errors.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from nanobot_memory_adapters.backends.memos import (
    MemOSConfig,
    MemOSStore,
)
from nanobot_memory_adapters.backends.memos.config import NATIVE_TYPES
from nanobot_memory_adapters.backends.memos.server import (
    MemosServerSettings,
    default_home,
    default_venv,
    start_server,
    stop_server,
)
from nanobot_memory_adapters.contract import (
    AdapterError,
    AdapterMode,
    ContextBudget,
    FeedbackRequest,
    MemoryEvent,
    MemoryScope,
    RetrieveRequest,
    capabilities_of,
    supports,
)
from nanobot_memory_adapters.registry import load_provider
from nanobot_memory_adapters.store import StoreProvider
from nanobot_memory_adapters.testing import ContractSuite, SuiteTarget
from tests.llm_double.handlers import memos as memos_handlers
from tests.llm_double.server import LLMDouble, load_handlers

# One MemOS server (Postgres, Redis, a provisioned venv) for the session: one worker.
pytestmark = [pytest.mark.xdist_group("memos"), pytest.mark.long(600)]

REPO = Path(__file__).resolve().parents[2]
# MemOS reports scheduler task status only with its Redis queue (Debian redis-server).
needs_redis = pytest.mark.skipif(
    shutil.which("redis-server") is None,
    reason="redis-server is not installed (apt-get install redis-server): MemOS cannot "
    "report async task status, so async readiness is 'unknown'",
)
T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
READY_S = 90.0


def _shared_venv() -> Path:
    """One provisioned MemOS venv for every test session (provisioning takes minutes)."""
    if os.environ.get("NANOBOT_MEMORY_MEMOS_VENV"):
        return Path(os.environ["NANOBOT_MEMORY_MEMOS_VENV"]).absolute()
    if os.environ.get("NANOBOT_MEMORY_HOME"):
        return default_venv(default_home())
    return REPO / ".nanobot-memory" / "memos" / "venv"


@pytest.fixture(scope="session")
def memos_double():
    # MemOS's handlers first: its extraction prompt also mentions "summary" and
    # "conversation", which other callers' handlers would otherwise claim.
    with LLMDouble(handlers=memos_handlers.HANDLERS + load_handlers()) as double:
        yield double


@pytest.fixture(scope="session")
def memos_server(memos_double, tmp_path_factory):
    """A real MemOS server for the session: fresh Postgres/Redis, shared venv."""
    home = tmp_path_factory.mktemp("memos-home")
    settings = MemosServerSettings(
        home=home,
        port=0,
        llm_base_url=memos_double.base_url,
        llm_api_key="double-key",
        llm_model="double-chat",
        redis=shutil.which("redis-server") is not None,
        venv=_shared_venv(),
        startup_timeout_s=300,
    )
    status = start_server(settings)
    try:
        yield status
    finally:
        stop_server(home)


def _config(server, **overrides) -> MemOSConfig:
    return MemOSConfig(base_url=server["url"], **overrides)


def _scope(run: str, persona: str = "alice") -> MemoryScope:
    return MemoryScope(run_id=run, persona_id=persona, agent_id="nanobot")


def _event(scope: MemoryScope, text: str, n: int = 1, **tags: str) -> MemoryEvent:
    return MemoryEvent(
        event_id=f"{scope.run_id}-{scope.persona_id}-{n}-{uuid.uuid4().hex[:6]}",
        run_id=scope.run_id,
        user_id=scope.persona_id,
        agent_id=scope.agent_id or "nanobot",
        session_id=f"{scope.persona_id}-s1",
        turn_id=str(n),
        timestamp=T0 + timedelta(minutes=n),
        messages=[{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}],
        metadata={"suite": "memos"},
        **tags,
    )


def _request(scope: MemoryScope, query: str, max_tokens: int = 1500, **tags) -> RetrieveRequest:
    return RetrieveRequest(
        query=query, scope=scope, session_id=f"{scope.persona_id}-s1",
        budget=ContextBudget(max_tokens=max_tokens), **tags,
    )


def _run() -> str:
    return f"memos-{uuid.uuid4().hex[:8]}"


# -- the contract suite ----------------------------------------------------------------

@needs_redis
class TestMemOSContract(ContractSuite):
    """Default config: async adds (MemOS's default), fast search, tags as info.* filter."""

    @pytest.fixture
    def contract_target(self, memos_server):
        async def make():
            return StoreProvider(MemOSStore(_config(memos_server)))

        async def make_failing():
            return StoreProvider(MemOSStore(_config(memos_server).model_copy(
                update={"base_url": "http://127.0.0.1:9"}
            )))

        return SuiteTarget(make=make, make_failing=make_failing, readiness_timeout_s=READY_S)


class TestMemOSSyncFineContract(ContractSuite):
    """Sync fine adds (extraction inside the add call) with the feedback capability on."""

    @pytest.fixture
    def contract_target(self, memos_server):
        config = _config(memos_server, async_mode="sync", add_mode="fine", feedback=True)

        async def make():
            return StoreProvider(MemOSStore(config))

        async def make_failing():
            return StoreProvider(MemOSStore(config.model_copy(
                update={"base_url": "http://127.0.0.1:9"}
            )))

        return SuiteTarget(make=make, make_failing=make_failing, readiness_timeout_s=READY_S)


# -- MemOS-specific --------------------------------------------------------------------

@needs_redis
async def test_async_add_becomes_retrievable_after_readiness(memos_server):
    adapter = StoreProvider(MemOSStore(_config(memos_server)))
    try:
        assert supports(adapter, "readiness")
        assert adapter.info.consistency_model == "async_derived"
        scope = _scope(_run())
        await adapter.setup_scope(scope)
        receipt = await adapter.record_event(
            _event(scope, "I live in Zanzibar and my pet axolotl is called Quetzal.")
        )
        assert receipt.status == "queued"
        raw_ids = set(receipt.native_ids)
        assert raw_ids, "MemOS returns the id of its raw 'fast' memory"
        state = await adapter.wait_until_ready(scope, READY_S)
        assert state.status == "ready", state
        result = await adapter.retrieve(_request(scope, "Where do I live?"))
        assert "zanzibar" in result.formatted_context.lower()
        derived = [i for i in result.items if "zanzibar" in i.text.lower()]
        assert derived and all(i.native_type == "UserMemory" for i in derived)
        # the scheduler replaced the raw fast memory by the extracted one
        assert not raw_ids & {i.native_id for i in derived}
    finally:
        await adapter.aclose()


async def test_groups_and_native_labels_survive(memos_server):
    adapter = StoreProvider(MemOSStore(_config(memos_server, async_mode="sync", add_mode="fast")))
    try:
        scope = _scope(_run())
        await adapter.record_event(_event(scope, "I collect brass telescopes in Reykjavik."))
        result = await adapter.retrieve(_request(scope, "What do I collect?"))
        # raw payload: MemOS's own groups, one bucket per cube
        assert set(result.raw) >= {"text_mem", "pref_mem", "tool_mem", "skill_mem"}
        bucket = result.raw["text_mem"][0]
        assert bucket["cube_id"] == adapter.store.native_ids(scope)["cube_id"]
        item = next(i for i in result.items if "telescopes" in i.text)
        assert item.group == "text_mem"
        assert item.native_type == "LongTermMemory"  # a sync fast add: the raw turn
        assert item.raw["metadata"]["tags"] == ["mode:fast"]
        assert item.score is not None and item.created_at is not None
        assert item.metadata["info"]["event_id"].startswith(scope.run_id)
        text = result.formatted_context
        assert text.startswith('<memory-context backend="memos"')
        assert "## text_mem\n" in text
        assert item.native_id not in text  # ids stay in the items and the trace
        assert result.trace.native_request["top_k"] >= 1
    finally:
        await adapter.aclose()


@needs_redis
async def test_tags_are_a_hard_search_filter(memos_server):
    adapter = StoreProvider(MemOSStore(_config(memos_server)))
    try:
        scope = _scope(_run())
        await adapter.record_event(_event(scope, "At work I use the Falcon dashboard.", 1,
                                          context="work", scenario="tools"))
        await adapter.record_event(_event(scope, "At home I use the Heron dashboard.", 2,
                                          context="personal", scenario="tools"))
        assert (await adapter.wait_until_ready(scope, READY_S)).status == "ready"
        body = adapter.store.search_request(_request(scope, "Which dashboard?", context="work"))
        assert body["filter"] == {"and": [{"info.context": "work"}]}
        work = await adapter.retrieve(_request(scope, "Which dashboard do I use?",
                                               context="work"))
        assert "falcon" in work.formatted_context.lower()
        assert "heron" not in work.formatted_context.lower()
        both = await adapter.retrieve(_request(scope, "Which dashboard do I use?",
                                               scenario="tools"))
        assert "falcon" in both.formatted_context.lower()
        assert "heron" in both.formatted_context.lower()
        assert all(i.metadata.get("scenario") == "tools" for i in both.items)
    finally:
        await adapter.aclose()


async def test_custom_tags_on_sync_fine_adds_filter_by_native_tags(memos_server):
    """custom_tags reach MemOS's extractor on sync fine adds; the extracted memory's
    ``tags`` are then a native filter (``filters={"tags": {"contains": ...}}``)."""
    adapter = StoreProvider(MemOSStore(_config(memos_server, async_mode="sync", add_mode="fine")))
    try:
        scope = _scope(_run())
        receipt = await adapter.record_event(
            _event(scope, "At work I use the Falcon dashboard.", 1, context="work")
        )
        assert receipt.status == "committed"
        await adapter.record_event(
            _event(scope, "At home I use the Heron dashboard.", 2, context="personal")
        )
        request = RetrieveRequest(
            query="Which dashboard do I use?", scope=scope,
            budget=ContextBudget(max_tokens=800), filters={"tags": {"contains": "work"}},
        )
        result = await adapter.retrieve(request)
        assert [i.metadata["tags"] for i in result.items] == [["work"]]
        assert "falcon" in result.formatted_context.lower()
    finally:
        await adapter.aclose()


async def test_cubes_isolated_and_reset_clears_one_scope(memos_server):
    adapter = StoreProvider(MemOSStore(_config(memos_server, async_mode="sync", add_mode="fine")))
    try:
        run = _run()
        alice, bob = _scope(run, "alice"), _scope(run, "bob")
        ids_a, ids_b = adapter.store.native_ids(alice), adapter.store.native_ids(bob)
        assert ids_a["cube_id"] != ids_b["cube_id"] and ids_a["user_id"] != ids_b["user_id"]
        await adapter.record_event(_event(alice, "I live in Valparaiso and I bake sourdough."))
        await adapter.record_event(_event(bob, "I live in Tromso and I knit sweaters."))
        query = "Where do I live?"
        a = await adapter.retrieve(_request(alice, query))
        b = await adapter.retrieve(_request(bob, query))
        assert "valparaiso" in a.formatted_context.lower()
        assert "tromso" not in a.formatted_context.lower()
        assert "valparaiso" not in b.formatted_context.lower()
        assert {i.metadata["cube_id"] for i in a.items} == {ids_a["cube_id"]}
        receipt = await adapter.reset_scope(alice)
        assert receipt.status == "reset" and ids_a["cube_id"] in (receipt.detail or "")
        assert not (await adapter.retrieve(_request(alice, query))).items
        assert "tromso" in (await adapter.retrieve(_request(bob, query))).formatted_context.lower()
        # test sessions never reset
        await adapter.set_mode(AdapterMode(read_only=True, reason="test_session"))
        assert (await adapter.reset_scope(bob)).status == "refused_read_only"
    finally:
        await adapter.aclose()


async def test_native_query_inventory_counts_one_cube_by_type(memos_server):
    """MemOS's cube inventory (``/product/get_all``'s ``memory_statistics``) on a real
    server: the scope's cube only, by native type, 0 for an empty cube."""
    traces = []

    class Sink:
        def emit(self, trace, **extra):
            traces.append(trace)

    adapter = StoreProvider(MemOSStore(_config(memos_server, async_mode="sync", add_mode="fine")),
                            trace_sink=Sink())
    try:
        run = _run()
        alice, bob = _scope(run, "alice"), _scope(run, "bob")
        first = await adapter.record_event(_event(alice, "I live in Lisbon and I row boats."))
        await adapter.record_event(_event(alice, "I keep two cats.", n=2))
        out = await adapter.native_query(alice, "inventory")
        assert out["cube_id"] == adapter.store.native_ids(alice)["cube_id"]
        assert out["total"] == sum(out["memory_types"].values()) >= len(first.native_ids) > 0
        assert set(out["memory_types"]) <= set(NATIVE_TYPES)
        empty = await adapter.native_query(bob, "inventory")
        assert empty["total"] == 0 and empty["memory_types"] == {}
        queried = [t for t in traces if t.operation == "native_query"]
        assert [t.scope for t in queried] == [alice.key, bob.key]
    finally:
        await adapter.aclose()


async def test_feedback_capability(memos_server):
    plain = StoreProvider(MemOSStore(_config(memos_server)))
    feedback = StoreProvider(MemOSStore(
        _config(memos_server, async_mode="sync", add_mode="fine", feedback=True)))
    try:
        assert not supports(plain, "feedback")
        assert "feedback" in capabilities_of(feedback)
        scope = _scope(_run())
        await feedback.record_event(_event(scope, "I live in Oslo and I drink green tea."))
        receipt = await feedback.apply_feedback(FeedbackRequest(
            scope=scope, session_id="alice-s1", feedback="Actually I moved to Bergen.",
            metadata={"history": [{"role": "user", "content": "Where do I live?"},
                                  {"role": "assistant", "content": "You live in Oslo."}]},
        ))
        assert receipt.status == "committed" and receipt.native_ids, receipt
        result = await feedback.retrieve(_request(scope, "Where did I move?"))
        assert "bergen" in result.formatted_context.lower()
        await feedback.set_mode(AdapterMode(read_only=True, reason="test_session"))
        gated = await feedback.apply_feedback(FeedbackRequest(scope=scope, feedback="Paris."))
        assert gated.status == "skipped_read_only"
    finally:
        await plain.aclose()
        await feedback.aclose()


@needs_redis
async def test_registry_builds_memos_from_config(memos_server, tmp_path):
    adapter = load_provider(
        {"backend": "memos", "memos": {"base_url": memos_server["url"], "feedback": True}},
        data_dir=tmp_path,
    )
    try:
        assert supports(adapter, "feedback")
        health = await adapter.health()
        assert health.status == "ok", health
        assert health.details["scheduler_queue"] == "redis"
        assert "readiness" in health.capabilities and "feedback" in health.capabilities
    finally:
        await adapter.aclose()


# -- no server needed ---------------------------------------------------------------------

async def test_stopped_server_fails_fast_naming_the_url():
    url = "http://127.0.0.1:9"
    adapter = StoreProvider(MemOSStore(MemOSConfig(base_url=url)))
    try:
        scope = _scope("r1")
        with pytest.raises(AdapterError) as err:
            await adapter.record_event(_event(scope, "I live in Oslo."))
        assert url in str(err.value) and err.value.retryable and err.value.raw
        health = await adapter.health()
        assert health.status == "unavailable" and url in health.details["error"]["message"]
    finally:
        await adapter.aclose()


@pytest.mark.servers
def test_conformance_cli_against_stopped_server_fails_fast():
    env = dict(os.environ, MEMOS_URL="http://127.0.0.1:9")
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "nanobot_memory_adapters.cli", "conformance", "--backend", "memos"],
        capture_output=True, text=True, env=env, timeout=120, cwd=REPO,
    )
    assert proc.returncode != 0
    assert "http://127.0.0.1:9" in proc.stdout + proc.stderr
    assert time.monotonic() - started < 60


def _mock(handler) -> StoreProvider:
    return StoreProvider(MemOSStore(MemOSConfig(base_url="http://memos.test"),
                                    transport=httpx.MockTransport(handler)))


async def test_a_sync_add_that_derived_nothing_says_it_stored_nothing():
    """MemOS's synchronous add answers with every memory it stored (``data: [{memory_id,
    ...}]``): an empty answer is a write that kept nothing, accepted and counted as such; an
    async add's ids are known later, never called nothing."""
    answers = {"data": []}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"code": 200, **answers})

    sync = StoreProvider(MemOSStore(MemOSConfig(base_url="http://memos.test", async_mode="sync"),
                                    transport=httpx.MockTransport(handler)))
    queued = _mock(handler)
    try:
        scope = _scope("r-empty")
        empty = await sync.record_event(_event(scope, "Okay."))
        assert empty.status == "committed" and empty.stored_nothing and empty.accepted
        answers["data"] = [{"memory": "cat PEPPER", "memory_id": "m1", "memory_type": "x"}]
        kept = await sync.record_event(_event(scope, "My cat is PEPPER.", 2))
        assert kept.native_ids == ["m1"] and not kept.stored_nothing
        answers["data"] = []
        later = await queued.record_event(_event(scope, "Okay.", 3))
        assert later.status == "queued" and not later.stored_nothing
    finally:
        await sync.aclose()
        await queued.aclose()


async def test_readiness_unknown_without_redis_queue():
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("task_queue_status"):
            return httpx.Response(503, json={"code": 503, "message": "not connected to Redis"})
        return httpx.Response(200, json={"code": 200, "data": [{"status": "completed"}]})

    adapter = _mock(handler)
    try:
        state = await adapter.wait_until_ready(_scope("r1"), 1.0)
        assert state.status == "unknown"  # never a false "ready"
    finally:
        await adapter.aclose()


async def test_pending_readiness_times_out_as_pending():
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("task_queue_status"):
            return httpx.Response(404, json={"code": 404, "message": "No scheduler streams"})
        return httpx.Response(200, json={"code": 200, "data": [
            {"task_id": "a", "status": "completed"}, {"task_id": "b", "status": "in_progress"},
        ]})

    adapter = _mock(handler)
    try:
        state = await adapter.wait_until_ready(_scope("r1"), 0.6)
        assert state.status == "pending" and state.pending_count == 1
        assert state.waited_ms is not None and state.waited_ms >= 500
    finally:
        await adapter.aclose()


async def test_native_errors_keep_the_body():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(422, json={"code": 422, "message": "Parameter validation error"})

    adapter = _mock(handler)
    try:
        with pytest.raises(AdapterError) as err:
            await adapter.retrieve(_request(_scope("r1"), "x"))
        assert err.value.raw["status_code"] == 422
        assert err.value.raw["body"]["message"] == "Parameter validation error"
        assert not err.value.retryable
    finally:
        await adapter.aclose()


def test_ids_are_safe_for_memos_stream_keys():
    adapter = StoreProvider(MemOSStore(MemOSConfig(base_url="http://memos.test")))
    ids = adapter.store.native_ids(MemoryScope(run_id="run:1", persona_id="tg:42"))
    assert ":" not in ids["user_id"] and ":" not in ids["cube_id"]
    other = adapter.store.native_ids(MemoryScope(run_id="run_1", persona_id="tg_42"))
    assert ids != other  # sanitizing never merges two scopes
    assert other == {"user_id": "run_1__tg_42", "cube_id": "nbm__run_1__tg_42"}  # kept as is
    # The "__" separator of the default templates cannot be forged by an id.
    scopes = [("a__b", "c"), ("a", "b__c"), ("a_", "_b"), ("a", "__b"), ("a___", "b")]
    native = [adapter.store.native_ids(MemoryScope(run_id=r, persona_id=p)) for r, p in scopes]
    assert len({n["user_id"] for n in native}) == len(scopes)
    assert len({n["cube_id"] for n in native}) == len(scopes)
    with pytest.raises(AdapterError):
        adapter.store.search_request(RetrieveRequest(
            query="q", scope=MemoryScope(run_id="r", persona_id="p"),
            budget=ContextBudget(max_tokens=100), filters={"user_name": "someone-else"},
        ))
