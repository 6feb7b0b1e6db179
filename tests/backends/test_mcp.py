"""The ``mcp`` provider against real MCP memory servers started by the test over stdio:
the official reference server (``@modelcontextprotocol/server-memory``, npm) and
``mcp-memory-service`` (PyPI). The contract suite on both, the tool mapping's edges, and
config errors as one clear line."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from nanobot_memory_adapters.backends.mcp import McpAdapter, McpConfig, scope_tag
from nanobot_memory_adapters.backends.mcp.adapter import query_terms
from nanobot_memory_adapters.config import ConfigError
from nanobot_memory_adapters.contract import (
    AdapterError,
    ContextBudget,
    MemoryEvent,
    MemoryScope,
    Message,
    RetrieveRequest,
    capabilities_of,
    supports,
)
from nanobot_memory_adapters.registry import load_provider
from nanobot_memory_adapters.testing import ContractSuite, SuiteTarget
from tests.backends.mcp_servers import mcp_memory_service_command, server_memory_command

# The MCP servers install into one shared cache with no lock: one worker.
pytestmark = [pytest.mark.xdist_group("mcp"), pytest.mark.long(30), pytest.mark.servers]

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


@pytest.fixture(scope="module")
def server_memory() -> list[str]:
    command, why = server_memory_command()
    if command is None:
        pytest.skip(why)
    return command


@pytest.fixture(scope="module")
def memory_service() -> list[str]:
    command, why = mcp_memory_service_command()
    if command is None:
        pytest.skip(why)
    return command


def reference_block(command: list[str]) -> dict:
    return {"preset": "server-memory", "command": command}


def service_block(command: list[str]) -> dict:
    # No embedding model may be downloaded here: the server runs on its own hash-embedding
    # fallback, which it refuses on a store that already holds memories unless told.
    return {"preset": "mcp-memory-service", "command": command,
            "env": {"MCP_MEMORY_ALLOW_HASH_EMBEDDINGS": "1"}}


def _adapter(block: dict, data_dir: Path) -> McpAdapter:
    return McpAdapter(McpConfig.model_validate(block), data_dir=data_dir)


def _scope(persona: str = "alice", run: str | None = None) -> MemoryScope:
    return MemoryScope(run_id=run or f"t-{uuid.uuid4().hex[:8]}", persona_id=persona,
                       agent_id="nanobot")


def _event(scope: MemoryScope, user: str, n: int = 1) -> MemoryEvent:
    return MemoryEvent(
        event_id=f"{scope.run_id}-{scope.persona_id}-{n}", run_id=scope.run_id,
        user_id=scope.persona_id, agent_id="nanobot", session_id="s1", turn_id=str(n),
        timestamp=T0 + timedelta(minutes=n),
        messages=[Message(role="user", content=user), Message(role="assistant", content="Ok.")],
    )


def _request(scope: MemoryScope, query: str, max_tokens: int = 1500) -> RetrieveRequest:
    return RetrieveRequest(query=query, scope=scope, budget=ContextBudget(max_tokens=max_tokens))


def _contract_target(block: dict, tmp_path: Path) -> SuiteTarget:
    """The suite's target for one server block (the failing twin: no such command)."""

    async def make():
        return _adapter(block, tmp_path / "store")

    async def make_failing():
        return _adapter({**block, "command": [str(tmp_path / "no-such-server")]},
                        tmp_path / "failing")

    return SuiteTarget(make=make, make_failing=make_failing)


class TestReferenceServerContract(ContractSuite):
    @pytest.fixture
    def contract_target(self, tmp_path, server_memory):
        return _contract_target(reference_block(server_memory), tmp_path)


class TestMemoryServiceContract(ContractSuite):
    @pytest.fixture
    def contract_target(self, tmp_path, memory_service):
        return _contract_target(service_block(memory_service), tmp_path)


# -- the mapping's edges ----------------------------------------------------------------

async def test_a_whole_question_finds_nothing_on_the_reference_server_word_by_word_it_does(
    tmp_path, server_memory
):
    """search_nodes matches its query as one substring: the adapter sends the question's
    content words one by one (split_terms), and nothing of its own ranking."""
    whole = _adapter({**reference_block(server_memory),
                      "search": {"split_terms": False}},
                     tmp_path / "store")
    scope = _scope()
    try:
        await whole.record_event(_event(scope, "I live in Zanzibar with my axolotl Quetzal."))
        question = "Where do I live and what is my axolotl called?"
        assert (await whole.retrieve(_request(scope, question))).items == []
    finally:
        await whole.aclose()
    words = _adapter(reference_block(server_memory), tmp_path / "store")
    try:
        result = await words.retrieve(_request(scope, question))
        assert "zanzibar" in result.formatted_context.lower()
        assert result.trace.native_request["queries"] == ["live", "axolotl", "called"]
        assert result.trace.native_request["native_budget"] is None
    finally:
        await words.aclose()
    assert query_terms(question, 8) == ["live", "axolotl", "called"]


async def test_words_of_the_scope_tag_do_not_return_the_whole_scope(tmp_path, server_memory):
    """Every entity's name and type carry the scope tag (``nma-scope-<hex>``) and the
    reference server matches names and types: a question with "scope" or "nma" in it
    would return every item of the scope. Such words are not sent."""
    adapter = _adapter(reference_block(server_memory), tmp_path / "store")
    scope = _scope()
    try:
        await adapter.record_event(_event(scope, "I live in Zanzibar with my axolotl."))
        result = await adapter.retrieve(_request(scope, "What is the scope of nma?"))
        assert result.items == [], [i.text for i in result.items]
        sent = result.trace.native_request["queries"]
        assert not any(q in scope_tag(scope) for q in sent), sent
        found = await adapter.retrieve(_request(scope, "What scope has my axolotl?"))
        assert found.trace.native_request["queries"] == ["axolotl"]
        assert [("Zanzibar" in i.text) for i in found.items] == [True]
    finally:
        await adapter.aclose()
    tag = scope_tag(scope)
    assert query_terms(f"scope nma {tag[10:16]} kayak", 8, tag) == ["kayak"]


def test_consistency_and_capabilities_are_declared_from_the_config(tmp_path):
    """The presets' servers answer a record once the turn is searchable ('immediate');
    a server that indexes in the background is declared so in its block. No optional
    capability is declared (no generic tool offers one)."""
    from nanobot_memory_adapters.backends.mcp.adapter import info_for

    plain = McpConfig.model_validate(reference_block(["unused"]))
    assert info_for(plain).consistency_model == "immediate"
    late = McpConfig.model_validate({**reference_block(["unused"]),
                                     "consistency_model": "eventual"})
    assert info_for(late).consistency_model == "eventual"
    assert info_for(plain).capabilities == () == info_for(late).capabilities
    with pytest.raises(ConfigError, match="consistency_model"):
        load_provider({"backend": "mcp", "mcp": {
            **reference_block(["unused"]), "consistency_model": "soon"}}, data_dir=tmp_path)


async def test_a_replayed_turn_is_stored_once_and_counts_as_stored(tmp_path, server_memory):
    adapter = _adapter(reference_block(server_memory), tmp_path / "store")
    scope = _scope()
    event = _event(scope, "My telescope is a brass Dollond.")
    try:
        first, again = await adapter.record_event(event), await adapter.record_event(event)
        assert (first.status, again.status) == ("committed", "committed")
        result = await adapter.retrieve(_request(scope, "telescope"))
        assert len(result.items) == 1 and "Dollond" in result.items[0].text
        assert result.items[0].native_id == f"{scope_tag(scope)}/{event.event_id}"
        assert first.native_ids == [result.items[0].native_id]
        assert result.items[0].source_event_ids == [event.event_id]
    finally:
        await adapter.aclose()


async def test_a_misnamed_tool_is_named_in_one_error_and_health_is_unavailable(
    tmp_path, server_memory
):
    block = reference_block(server_memory)
    block["search"] = {"tool": "search_memories", "arguments": {"query": "{query}"}}
    adapter = _adapter(block, tmp_path / "store")
    try:
        with pytest.raises(AdapterError) as caught:
            await adapter.setup_scope(_scope())
        assert "search_memories" in caught.value.message
        assert "search_nodes" in caught.value.message  # what the server does offer
        health = await adapter.health()
        assert health.status == "unavailable"
        assert "search_memories" in health.details["error"]
    finally:
        await adapter.aclose()


async def test_declares_what_the_tools_cannot_do(tmp_path, server_memory):
    adapter = _adapter(reference_block(server_memory), tmp_path / "store")
    try:
        assert not supports(adapter, "readiness")
        assert capabilities_of(adapter) == []
        info = adapter.info
        assert info.capabilities == ()  # declared, not read from the methods present
        assert info.condition_kind == "architecture"
        assert info.consistency_model == "immediate"
        # no score, no times; provenance only because the entity's name carries the event id
        assert info.item_fields == ("native_id", "source_event_ids")
        assert "search_nodes" in info.description
        health = await adapter.health()
        assert health.status == "ok" and health.details["native_budget"] is False
        assert "create_entities" in health.details["tools"]
    finally:
        await adapter.aclose()


def test_a_prose_answer_in_an_unknown_format_is_an_error_not_an_empty_result(tmp_path):
    """mcp-memory-service answers searches in prose; if its format changes, retrieve fails
    loudly instead of reporting no memories (no server needed: the parsing alone)."""
    adapter = _adapter(service_block(["unused"]), tmp_path / "store")
    scope = _scope()
    tag = scope_tag(scope)
    prose = (f"Found 1 memories (mode: semantic) for query: 'x'\n\n1. [2024-05-08 13:57] "
             f"alice: I live in Oslo\nassistant: Ok.\n   Hash: 33dd61\n"
             f"   Created: 2026-11-26T13:39:50Z [{tag}, other]")
    items, dropped = adapter._items(prose, scope, "retrieve")
    assert dropped == 0 and items[0]["content"].endswith("assistant: Ok.")
    assert items[0]["tags"] == [tag, "other"]
    assert adapter._items("No memories found for query: 'x'", scope, "retrieve") == ([], 0)
    assert adapter._items(prose.replace(tag, "nma-scope-else"), scope, "retrieve") == ([], 1)
    with pytest.raises(AdapterError, match="no list"):
        adapter._items("Results:\n- I live in Oslo", scope, "retrieve")


async def test_mcp_memory_service_replay_and_failures_reported_as_text(tmp_path, memory_service):
    adapter = _adapter(service_block(memory_service), tmp_path / "store")
    scope = _scope()
    event = _event(scope, "My telescope is a brass Dollond.")
    try:
        assert (await adapter.record_event(event)).status == "committed"
        again = await adapter.record_event(event)  # the server refuses the exact duplicate
        assert again.status == "committed"
        assert any("already holds" in w for w in again.trace.warnings)
        result = await adapter.retrieve(_request(scope, "telescope"))
        assert [i.text.count("Dollond") for i in result.items] == [1]
        assert result.items[0].created_at is not None
        empty = await adapter.reset_scope(_scope("nobody"))  # the server says "Error: ..."
        assert empty.status == "reset" and "nothing" in (empty.detail or "")
    finally:
        await adapter.aclose()


def _server_pids(data_dir: Path) -> list[int]:
    """Our own child processes whose environment names this store (the server we started;
    found by its unique MEMORY_FILE_PATH, never by a name)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            environ = (proc / "environ").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and str(data_dir).encode() in environ:
            found.append(int(proc.name))
    return found


async def test_a_killed_server_fails_one_call_retryably_and_the_next_starts_it_again(
    tmp_path, server_memory
):
    import signal

    store = tmp_path / "store"
    # a request written just after the pipe closed is never answered: the call timeout
    # (short here) then ends the server; either way the error says it is gone
    adapter = _adapter({**reference_block(server_memory), "call_timeout_s": 10}, store)
    scope = _scope()
    try:
        await adapter.record_event(_event(scope, "My telescope is a brass Dollond."))
        (pid,) = _server_pids(store)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(AdapterError) as caught:
            await adapter.record_event(_event(scope, "My kite is red.", n=2))
        assert caught.value.retryable  # an outbox keeps the turn
        assert "ServerGone" in caught.value.message, (caught.value.message, caught.value.raw)
        result = await adapter.retrieve(_request(scope, "telescope"))  # a fresh server
        assert [i.text.count("Dollond") for i in result.items] == [1]
        (again,) = _server_pids(store)
        assert again != pid
    finally:
        await adapter.aclose()
    assert _server_pids(store) == []  # aclose ends the server it started


def test_an_adapter_driven_from_two_event_loops_starts_its_own_server_in_each(
    tmp_path, server_memory
):
    """CLI commands run one asyncio.run each; a session belongs to the loop that opened
    it, so a second loop opens its own, and no server outlives its loop."""
    import asyncio

    store = tmp_path / "store"
    adapter = _adapter(reference_block(server_memory), store)
    scope = _scope()

    async def first() -> None:
        await adapter.record_event(_event(scope, "My telescope is a brass Dollond."))

    async def second() -> list[str]:
        try:
            return [i.text for i in (await adapter.retrieve(_request(scope, "telescope"))).items]
        finally:
            await adapter.aclose()

    asyncio.run(first())
    assert _server_pids(store) == []  # the first loop's end stopped its server
    texts = asyncio.run(second())
    assert len(texts) == 1 and "Dollond" in texts[0]
    assert _server_pids(store) == []


# -- config --------------------------------------------------------------------------------

def test_config_mistakes_are_one_clear_line(tmp_path):
    with pytest.raises(ConfigError) as caught:
        load_provider({"backend": "mcp", "mcp": {"preset": "server-memory"}}, data_dir=tmp_path)
    assert "command" in str(caught.value)
    bad = {"preset": "server-memory", "command": ["x"],
           "record": {"tool": "create_entities", "arguments": {"name": "{scope_id}"}}}
    with pytest.raises(ConfigError) as caught:
        load_provider({"backend": "mcp", "mcp": bad}, data_dir=tmp_path)
    text = str(caught.value)
    assert "{scope_id}" in text and "{scope_tag}" in text and "\n" not in text.strip()
    shared = {"preset": "server-memory", "command": ["x"],
              "results": {"scope_value": "everyone"}}
    with pytest.raises(ConfigError, match="scope"):
        load_provider({"backend": "mcp", "mcp": shared}, data_dir=tmp_path)


def test_the_registry_builds_it_from_its_block_with_the_preset_merged(tmp_path):
    adapter = load_provider(
        {"backend": "mcp", "mcp": {"preset": "server-memory", "command": ["node", "x.js"],
                                   "env": {"EXTRA": "1"}, "results": {"native_type": "name"}}},
        data_dir=tmp_path,
    )
    assert isinstance(adapter, McpAdapter)
    config = adapter.config
    assert config.env == {"MEMORY_FILE_PATH": "{data_dir}/server-memory.jsonl", "EXTRA": "1"}
    assert config.results.items == "entities" and config.results.native_type == "name"
    assert adapter.server.params.env is not None
    assert adapter.server.params.env["MEMORY_FILE_PATH"] == str(
        tmp_path / "mcp" / "server-memory.jsonl")


# -- a LoCoMo unit through the bench CLI ------------------------------------------------------

# NANOBOT_MEMORY_LOCOMO or ../shared/data/locomo beside the checkout (never shipped)
LOCOMO7 = Path(os.environ.get("NANOBOT_MEMORY_LOCOMO") or
               Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo"
               / "locomo7.json")


@pytest.mark.skipif(not LOCOMO7.exists(), reason=f"{LOCOMO7} not present")
@pytest.mark.parametrize("server", ["reference", "memory_service"])
def test_bench_runs_mcp_beside_full_history_on_conv_26(tmp_path, request, server):
    """``nanobot-memory bench --providers mcp,full_history`` on conv-26's first session:
    exit 0, every turn recorded, no failed write/read/reset, recall measured."""
    import json
    import subprocess
    import sys

    if server == "reference":
        block = reference_block(request.getfixturevalue("server_memory"))
    else:
        block = service_block(request.getfixturevalue("memory_service"))
    config = tmp_path / "providers.json"
    config.write_text(json.dumps({"mcp": block}))
    out = tmp_path / "bench"
    done = subprocess.run(
        [sys.executable, "-m", "nanobot_memory_adapters.cli", "bench", "--dataset", str(LOCOMO7),
         "--conversations", "conv-26", "--max-sessions", "1", "--providers",
         "mcp,full_history", "--provider-config", str(config), "--out", str(out),
         "--budget-tokens", "2000,300"],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    mcp = results["providers"]["mcp"]
    assert mcp["events_recorded"] == 18 and mcp["condition_kind"] == "architecture"
    assert not any(mcp["failures"].values()), mcp["failures"]
    assert mcp["recall"]["overall"]["count"] > 0
    assert mcp["recall"]["overall"]["turn"] is not None
    provenance = mcp["recall"]["overall"]["provenance"]
    if server == "reference":  # entity names carry the event ids
        assert provenance is not None and provenance > 0
    else:  # mcp-memory-service returns no stored event id: nothing declared, n/a
        assert provenance is None
    traces = [json.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    reads = [t["trace"] for t in traces if t.get("provider") == "mcp"
             and t["trace"]["operation"] == "retrieve"]
    assert reads and all(t["native_request"]["tool"] == block.get("search", {}).get(
        "tool", "search_nodes" if server == "reference" else "memory_search") for t in reads)
    assert all(t["token_count"] <= t["budget_max_tokens"] for t in reads)
