"""mem0 with extraction, Graphiti and the nanobot plugin on a real model.

Run: ``../shared/tools/local-llm.sh start 8081`` then
``NANOBOT_MEMORY_TEST_LLM_URL=http://127.0.0.1:8081/v1 ./scripts/test.sh tests/real_llm``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import pytest

from nanobot_memory_adapters.contract import (
    AdapterError,
    ContextBudget,
    MemoryEvent,
    MemoryScope,
    RetrieveRequest,
)
from nanobot_memory_adapters.registry import load_provider
from nanobot_memory_adapters.testing.suite import SuiteTarget, run_item
from tests.real_llm.recorder import RecordingProxy

pytest.importorskip("mem0")

# Contract items whose outcome does not depend on what the model chooses to extract:
# receipts, read-only gates, budgets, native errors, raw provenance, every write gated.
MODEL_INDEPENDENT_ITEMS = (1, 4, 5, 7, 8, 11)


# The lane's answers are short (Graphiti's item 5: 13 calls, 848 tokens, the longest 177, in
# a loop-free run of 183 s; mem0's under 200). The small model sometimes loops at
# temperature 0, and one loop to Graphiti's default cap of 4,096 tokens cost CI ~430 s
# (item 5 took 617 s; with a cap of 640, 262-294 s, one loop cut and retried: ~65 s at
# ~10 tokens/s). A cut answer is not JSON: graphiti-core retries the call, mem0's write
# fails (retryable), as for any user with a cap. 400 is twice the longest answer seen.
LANE_MAX_TOKENS = 400


def _mem0_block(llm: dict[str, str], **over: Any) -> dict[str, Any]:
    return {"backend": "mem0", "mem0": {"llm": {"max_tokens": LANE_MAX_TOKENS, **llm, **over}}}


def _graphiti_block(llm: dict[str, str]) -> dict[str, Any]:
    return {"backend": "graphiti", "graphiti": {"llm": {**llm, "max_tokens": LANE_MAX_TOKENS}}}


def _target(block: dict[str, Any], data: Path, failing: dict[str, Any],
            budget_visits: Literal["turns", "one_turn"] = "turns") -> SuiteTarget:
    async def make():  # type: ignore[no-untyped-def]
        return load_provider(block, data_dir=data)

    async def make_failing():  # type: ignore[no-untyped-def]
        return load_provider(failing, data_dir=data / "failing")

    return SuiteTarget(make=make, make_failing=make_failing, readiness_timeout_s=60,
                       budget_visits=budget_visits)


def _stored_memories(data: Path) -> int:
    """Points in every collection of the item's embedded Qdrant store(s) under ``data``."""
    from nanobot_memory_adapters.backends.mem0.qdrant import acquire_client, release_client

    total = 0
    for path in data.rglob("qdrant"):
        if not (path / "collection").is_dir():
            continue
        client = acquire_client(path)
        try:
            total += sum(client.count(c.name).count
                         for c in client.get_collections().collections)
        finally:
            release_client(path)
    return total


@pytest.mark.parametrize("item", MODEL_INDEPENDENT_ITEMS)
async def test_mem0_with_extraction_keeps_the_contract(item, real_llm, tmp_path_factory):
    data = tmp_path_factory.mktemp("mem0-real")
    failing = _mem0_block({**real_llm, "base_url": "http://127.0.0.1:9/v1"})
    result = await run_item(item, _target(_mem0_block(real_llm), data, failing))
    if (result.status == "failed" and result.detail == "nothing retrieved with a large budget"
            and _stored_memories(data) == 0):
        # Item 5 asks for the four visits back: it can be judged only if the model
        # extracted something from them. One CI run (2026-12-02) failed here in 9.7 s
        # (35-130 s in four local runs that passed), most likely with nothing extracted;
        # the skip needs the store to be empty. With memories stored and none retrieved,
        # the item still fails.
        pytest.skip(f"item {item}: the model extracted no memory from the four turns, so "
                    "what the budget retrieves cannot be judged")
    assert result.status != "failed", f"item {item}: {result.detail}"


@pytest.mark.parametrize("item", MODEL_INDEPENDENT_ITEMS)
async def test_graphiti_keeps_the_contract(item, real_llm, tmp_path_factory):
    pytest.importorskip("graphiti_core")
    data = tmp_path_factory.mktemp("graphiti-real")
    failing = {"backend": "graphiti", "graphiti": {
        "llm": {**real_llm, "base_url": "http://127.0.0.1:9/v1"},
        "database": {"path": str(data / "not-a-dir" / "x" / "graph.kuzu")}}}
    (data / "not-a-dir").write_text("a file where a directory should be")
    # Item 5 keeps its four turns here too: with the four visits in one turn
    # (``budget_visits="one_turn"``, a quarter of the extraction calls) both mem0 and
    # Graphiti failed item 5 on the 1.5B model in CI, so the cheaper variant is not used.
    result = await run_item(item, _target(_graphiti_block(real_llm), data, failing))
    if (result.status == "failed" and "[graphiti.record_event" in result.detail
            and "JSONDecodeError" in result.detail):
        # The small model looped until max_tokens (and graphiti-core's retries did not get
        # past it): the adapter raised a failed, retryable write instead of claiming it
        # stored anything, which is the contract; whether the item's own assertions hold
        # cannot be judged on this run.
        pytest.skip(f"item {item}: the model's answer was not JSON; the write failed "
                    f"as it must ({result.detail[:160]})")
    assert result.status != "failed", f"item {item}: {result.detail}"


def _event(text: str, n: int) -> MemoryEvent:
    return MemoryEvent(
        event_id=f"real-{n}", run_id="real", user_id="alice", agent_id="nanobot",
        session_id="s1", turn_id=str(n), timestamp=datetime(2024, 5, 8, 13, n, tzinfo=UTC),
        messages=[{"role": "user", "content": text},
                  {"role": "assistant", "content": "Good to know!"}],
    )


async def test_a_cut_extraction_answer_is_never_committed(real_llm, data_dir):
    """A real model's answer cut at max_tokens is not JSON: mem0 stores nothing, so the
    write must fail (retryable), never say committed; with room it commits. Three tokens
    cannot hold even an empty answer ({"memory": []} takes five)."""
    tiny = load_provider(_mem0_block(real_llm, max_tokens=3), data_dir=data_dir)
    text = "My sister Ana lives in Porto and she works as a marine biologist there."
    try:
        with pytest.raises(AdapterError) as caught:
            await tiny.record_event(_event(text, 1))
        assert caught.value.retryable
        [receipt] = await tiny.record_events([_event(text, 2)])
        assert receipt.status == "failed" and receipt.retryable
        assert (await tiny.health()).status == "degraded"
    finally:
        await tiny.aclose()
    roomy = load_provider(_mem0_block(real_llm), data_dir=data_dir)
    try:
        receipt = await roomy.record_event(_event(text, 3))
        assert receipt.status == "committed"
        result = await roomy.retrieve(RetrieveRequest(
            query="Where does Ana live?", scope=MemoryScope(run_id="real", persona_id="alice"),
            budget=ContextBudget(max_tokens=500)))
        # Whatever the model wrote, every item says which event it came from.
        assert all(i.source_event_ids == ["real-3"] for i in result.items)
    finally:
        await roomy.aclose()


async def test_a_fact_told_to_nanobot_reaches_the_next_sessions_prompt(real_llm, tmp_path):
    """A real nanobot AgentLoop with the plugin on mem0 (extraction on the same real
    model): a fact said in one chat session is in the prompt the model gets in a new
    session of the same user.

    The 1.5B model sometimes extracts nothing from the turn (an empty fact list: a
    committed write that added no memory, with mem0's warning); it did so in 4 of 6 runs
    of this test on 2026-11-28. So the user says it again in other words, as a user
    would, until ``memory_search`` finds it (at most three times); the check of the next
    session's prompt is unchanged."""
    from nanobot.agent.loop import AgentLoop
    from nanobot.agent.tools.registry import ToolRegistry
    from nanobot.config.loader import load_config

    from nanobot_memory_adapters.nanobot import plugin_for

    with RecordingProxy(real_llm["base_url"]) as proxy:
        home = tmp_path / "home"
        home.mkdir()
        (home / "config.json").write_text(json.dumps({
            "agents": {"defaults": {"workspace": str(home / "workspace"), "model":
                                    real_llm["model"], "provider": "custom", "maxTokens": 64,
                                    "contextWindowTokens": 200000}},
            "providers": {"custom": {"apiKey": "none", "apiBase": proxy.base_url}},
            # A chat-only nanobot (its own switches): the shell, file, web and self tools'
            # schemas are 3.7k of the 7.2k tokens of nanobot's first prompt, which the CPU
            # model reads cold at ~70 tokens/s; none of them is what this test is about.
            "tools": {name: {"enable": False} for name in ("exec", "file", "web", "cliApps",
                                                           "my")},
        }))
        (home / "memory.json").write_text(json.dumps({
            "memory": {**_mem0_block(real_llm), "budget": {"max_tokens": 600}},
            # The test is about the memory path, not the chat model's replies: offered the
            # tool, the 1.5B model writes a memory_search call as its answer, and beside
            # that answer its own extraction of the fact comes back empty; the guide is
            # therefore the listed skill here, not the memory_guide tool (the default
            # since 2026-12-02), so no tool of the plugin's is offered. Until 2026-12-02
            # the skill was always in the prompt and the model echoed its example section.
            "nanobot": {"search_tool": False, "guide_tool": False, "install_skill": True},
        }))
        loop = AgentLoop.from_config(load_config(home / "config.json"),
                                     tool_registry=ToolRegistry())
        plugin = plugin_for(loop)
        try:
            for telling in ("My sister Ana lives in Porto.",
                            "Please remember this: my sister Ana lives in Porto, Portugal.",
                            "Note for later: Ana, my sister, lives in the city of Porto."):
                await loop.process_direct(telling, session_key="cli:one", channel="cli",
                                          chat_id="me", sender_id="me")
                assert await plugin.flush(timeout_s=900) == 0
                assert plugin.outbox.stats("mem0").failed == 0
                found = await plugin.search(query="Where does my sister live?", limit=5,
                                            session_key="cli:one", channel="cli",
                                            chat_id="me", sender_id="me")
                if "Porto" in found:
                    break
            else:
                pytest.fail("the model extracted no memory naming Porto in three tellings")
            before = len(proxy.requests)
            await loop.process_direct("Where does my sister live?", session_key="cli:two",
                                      channel="cli", chat_id="me", sender_id="me")
            agent = [r for r in proxy.requests[before:] if r.get("tools")]
            assert agent, "nanobot sent no agent request"
            prompt = json.dumps(agent[0]["messages"], ensure_ascii=False)
            assert "<memory-context" in prompt and "Porto" in prompt
        finally:
            await loop.aclose()
            await plugin.aclose()
